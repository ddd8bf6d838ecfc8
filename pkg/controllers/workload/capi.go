package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
)

// contractOutputsStep applies the contract outputs published in
// status.outputs (SPEC T5, K7) on every pass of a non-deleting object:
// OutputsValid and the status fields from them, the spec fields Cluster
// API reads (providerFieldsStep), then provisioned, which latches once the
// recorded apply succeeded and, for an object Cluster API owns, the field
// Cluster API needs is set; and InfrastructureHealthy, which Ready follows
// once provisioned (K8). Outputs change only when a successful apply is
// read (T4), so a steady pass changes nothing. It returns the object as
// stored when it had to update it.
func (c *Controller) contractOutputsStep(ctx context.Context, w *workload) (*workload, error) {
	values, tooLarge, have := publishedOutputs(w.status)
	octx := c.outputsContext(w)
	octx.TooLarge = tooLarge
	out := contract.MapOutputs(octx, values)
	now := c.clock.Now()
	if have {
		setContractCondition(w, now, v1alpha1.ConditionOutputsValid, out.Valid)
		setStatusFields(w, out)
	}
	w, err := c.providerFieldsStep(ctx, w, out, have)
	if err != nil {
		return w, err
	}
	latchProvisioned(w, out)
	if !provisioned(w.status) {
		setCondition(w, now, v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForProvisioning,
			"not provisioned yet")
		return w, nil
	}
	setContractCondition(w, now, v1alpha1.ConditionInfrastructureHealthy, out.Health)
	return w, nil
}

// latchProvisioned sets status.initialization.provisioned once the
// recorded apply succeeded and, for an object Cluster API owns, the field
// Cluster API needs is set (T5, K7); it stays true. A pool's status.ready
// follows it (K7).
func latchProvisioned(w *workload, out contract.Outputs) {
	if rec := w.status.LastApply; !provisioned(w.status) && rec != nil && rec.Outcome == v1alpha1.RunSucceeded &&
		(w.contract.standalone || requiredFieldSet(w, out)) {
		if w.status.Initialization == nil {
			w.status.Initialization = &v1alpha1.WorkloadInitialization{}
		}
		w.status.Initialization.Provisioned = ptr.To(true)
	}
	if w.kind.name == v1alpha1.KindTerraformMachinePool {
		w.status.Ready = provisioned(w.status)
	}
}

// publishedOutputs returns the outputs the contract is mapped from as a
// map, the contract outputs over their bound, and whether the state has
// been read (T4): status.contractOutputs when set (K7: read on their own
// because status.outputs could not hold them), else status.outputs.
func publishedOutputs(st *v1alpha1.WorkloadStatus) (map[string]json.RawMessage, []string, bool) {
	raw, tooLarge := st.Outputs, []string(nil)
	if co := st.ContractOutputs; co != nil {
		raw, tooLarge = co.Values, co.TooLarge
		if raw == nil {
			raw = &runtime.RawExtension{Raw: []byte(`{}`)}
		}
	}
	if raw == nil || len(raw.Raw) == 0 {
		return map[string]json.RawMessage{}, nil, false
	}
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw.Raw, &values); err != nil || values == nil {
		return map[string]json.RawMessage{}, tooLarge, true // not an object: every output missing
	}
	return values, tooLarge, true
}

// outputsContext is what mapping w's outputs needs beyond them.
func (c *Controller) outputsContext(w *workload) contract.OutputsContext {
	ctx := contract.OutputsContext{Kind: w.kind.name}
	switch o := w.robj.(type) {
	case *v1alpha1.TerraformCluster:
		ctx.EndpointSet = !o.Spec.ControlPlaneEndpoint.IsZero()
	case *v1alpha1.TerraformMachine:
		ctx.ProviderID = o.Spec.ProviderID
		if m := w.contract.owners.Machine; m != nil {
			ctx.MachineFailureDomain = m.Spec.FailureDomain
		}
	}
	return ctx
}

// setContractCondition sets a condition pkg/contract decided.
func setContractCondition(w *workload, now time.Time, t v1alpha1.ConditionType, cond contract.Condition) {
	setCondition(w, now, t, cond.Status, cond.Reason, "%s", cond.Message)
}

// setStatusFields sets the status fields of the outputs (K7).
func setStatusFields(w *workload, out contract.Outputs) {
	st := w.status
	switch w.kind.name {
	case v1alpha1.KindTerraformCluster:
		st.FailureDomains = out.FailureDomains
		st.Exports = &runtime.RawExtension{Raw: out.Exports}
	case v1alpha1.KindTerraformMachine:
		st.Addresses = out.Addresses
		st.FailureDomain = out.FailureDomain
		st.Interruptible = out.Interruptible
	case v1alpha1.KindTerraformMachinePool:
		st.Replicas = out.Replicas
	}
}

// requiredFieldSet reports whether the field Cluster API needs of a
// provisioned object is set (K7): a cluster's endpoint, a machine's
// provider ID, a pool's valid provider ID list.
func requiredFieldSet(w *workload, out contract.Outputs) bool {
	switch o := w.robj.(type) {
	case *v1alpha1.TerraformCluster:
		return !o.Spec.ControlPlaneEndpoint.IsZero()
	case *v1alpha1.TerraformMachine:
		return o.Spec.ProviderID != ""
	case *v1alpha1.TerraformMachinePool:
		return out.HasProviderIDList
	}
	return false
}

// setProviderFields sets obj's Cluster API spec fields from out (SPEC
// T5, K7): a cluster's endpoint and a machine's provider ID once, while
// unset; a pool's provider ID list whenever it differs (kept current). It
// reports whether it changed anything.
func setProviderFields(obj runtime.Object, out contract.Outputs) bool {
	switch o := obj.(type) {
	case *v1alpha1.TerraformCluster:
		if !o.Spec.ControlPlaneEndpoint.IsZero() || out.Endpoint.IsZero() {
			return false
		}
		o.Spec.ControlPlaneEndpoint = out.Endpoint
		return true
	case *v1alpha1.TerraformMachine:
		if o.Spec.ProviderID != "" || out.ProviderID == "" {
			return false
		}
		o.Spec.ProviderID = out.ProviderID
		return true
	case *v1alpha1.TerraformMachinePool:
		if !out.HasProviderIDList || slices.Equal(o.Spec.ProviderIDList, out.ProviderIDList) {
			return false
		}
		o.Spec.ProviderIDList = slices.Clone(out.ProviderIDList)
		return true
	}
	return false
}

// providerField is the spec field setProviderFields sets on obj, as a
// path "spec.<name>" (providerFieldsPatch).
func providerField(obj runtime.Object) string {
	switch obj.(type) {
	case *v1alpha1.TerraformCluster:
		return "spec.controlPlaneEndpoint"
	case *v1alpha1.TerraformMachine:
		return "spec.providerID"
	case *v1alpha1.TerraformMachinePool:
		return "spec.providerIDList"
	}
	return ""
}

// coversGeneration reports whether rec, the newest finished apply, covers
// the object's generation: it is of that generation, or it succeeded for
// the generation before and the manager's own write of the Cluster API
// fields made this one (T5: not a new generation to apply, J1).
func coversGeneration(w *workload, rec *v1alpha1.RunRecord) bool {
	if rec == nil {
		return false
	}
	gen := w.obj.GetGeneration()
	if rec.Generation == gen {
		return true
	}
	return rec.Outcome == v1alpha1.RunSucceeded && rec.Generation == gen-1 &&
		providerFieldsMark(w) == gen
}

// providerFieldsMark returns the generation the manager's own write of the
// Cluster API fields made (AnnotationProviderFieldsGeneration), -1 when
// there is none or it is not this object's: the mark names the object's
// UID, and a copy (clusterctl move, a restore) has another, so a copied
// mark cannot hide the copy's first spec change (K11). A mark without a
// UID (written before marks named one) is taken as this object's.
func providerFieldsMark(w *workload) int64 {
	v, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration]
	if !ok {
		return -1
	}
	gen, uid, hasUID := strings.Cut(v, "/")
	if hasUID && types.UID(uid) != w.obj.GetUID() {
		return -1
	}
	n, err := strconv.ParseInt(gen, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// providerFieldsMarkValue is the mark of a write that makes generation gen
// of w.
func providerFieldsMarkValue(w *workload, gen int64) string {
	return strconv.FormatInt(gen, 10) + "/" + string(w.obj.GetUID())
}

// providerFieldsStep writes the Cluster API spec fields from the outputs
// (SPEC T5, K7): never while paused, never during a deletion (the caller
// is the normal pass), and only when the recorded newest apply succeeded
// and covers the generation; the same update names the generation it
// creates in AnnotationProviderFieldsGeneration, so that generation is not
// applied again. It returns the object as stored.
func (c *Controller) providerFieldsStep(ctx context.Context, w *workload, out contract.Outputs, have bool) (*workload, error) {
	if !have || paused(w) {
		return w, nil
	}
	// Only once the succeeded apply of this generation is recorded (T7): the
	// write then names the generation it makes. Outputs are never ahead of
	// the record (outputsStep reads only after a recorded apply, T4), but
	// they can be behind the spec: after a user's change (a new generation
	// still to apply, e.g. the field cleared) a write would make a
	// generation the record does not cover, which the manager would apply
	// again.
	if rec := w.status.LastApply; rec == nil || rec.Outcome != v1alpha1.RunSucceeded || !coversGeneration(w, rec) {
		return w, nil
	}
	status := w.status.DeepCopy()
	if !setProviderFields(w.robj, out) {
		return w, nil
	}
	// B12: a patch of the field and the annotation alone, conditional on
	// the version decided on (patch.go), never an update of the cached copy.
	patch, err := providerFieldsPatch(w.robj, w.obj.GetResourceVersion(), providerField(w.robj),
		v1alpha1.AnnotationProviderFieldsGeneration, providerFieldsMarkValue(w, w.obj.GetGeneration()+1))
	if err != nil {
		return w, err
	}
	stored, err := w.kind.patch(ctx, w, patch)
	if err != nil {
		return w, fmt.Errorf("setting the Cluster API fields from the outputs: %w", err)
	}
	klog.FromContext(ctx).Info("Set the Cluster API fields from the outputs", "generation", stored.obj.GetGeneration())
	return keepPass(stored, w, status), nil
}
