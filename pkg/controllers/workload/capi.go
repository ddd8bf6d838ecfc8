package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
)

// providerOutput parses the output that sets obj's Cluster API field
// (SPEC T5). found is false when the module declares no such output (a
// sensitive output is not in outputs, T4, so it never reaches the spec);
// err says why the output cannot set field; set sets the field when it is
// still unset and reports whether it did.
func providerOutput(obj runtime.Object, outputs map[string]json.RawMessage) (field string, found bool, set func() bool, err error) {
	switch o := obj.(type) {
	case *v1alpha1.TerraformCluster:
		raw, ok := outputs[contract.OutputControlPlaneEndpoint]
		ep, err := contract.ParseEndpoint(raw)
		return "spec.controlPlaneEndpoint", ok, func() bool {
			if !o.Spec.ControlPlaneEndpoint.IsZero() {
				return false
			}
			o.Spec.ControlPlaneEndpoint = ep
			return true
		}, err
	case *v1alpha1.TerraformMachine:
		raw, ok := outputs[contract.OutputProviderID]
		id, err := contract.ParseProviderID(raw)
		return "spec.providerID", ok, func() bool {
			if o.Spec.ProviderID != "" {
				return false
			}
			o.Spec.ProviderID = id
			return true
		}, err
	case *v1alpha1.TerraformMachinePool:
		raw, ok := outputs[contract.OutputProviderIDList]
		l, err := contract.ParseProviderIDList(raw)
		return "spec.providerIDList", ok, func() bool {
			if len(o.Spec.ProviderIDList) > 0 || len(l) == 0 {
				return false
			}
			o.Spec.ProviderIDList = l
			return true
		}, err
	}
	return "", false, nil, nil
}

// providerOutputProblem says why the output of obj's Cluster API field
// cannot set it (SPEC T5); "" when the module declares none or it is
// valid. The outputs step reports it once per read, in OutputsAvailable.
func providerOutputProblem(obj runtime.Object, outputs map[string]json.RawMessage) string {
	field, found, _, err := providerOutput(obj, outputs)
	if !found || err == nil {
		return ""
	}
	return fmt.Sprintf("%v, so it does not set %s", err, field)
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
		w.obj.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration] == strconv.FormatInt(gen, 10)
}

// providerFieldsStep sets the Cluster API fields from the published
// outputs once, while they are unset (SPEC T5): never while paused, never
// during a deletion (the caller is the normal pass), and only when the
// recorded newest apply succeeded and covers the generation; the same
// patch names the generation it creates in
// AnnotationProviderFieldsGeneration, so that generation is not applied
// again. It returns the object as stored.
func (c *Controller) providerFieldsStep(ctx context.Context, w *workload) (*workload, error) {
	if w.status.Outputs == nil || len(w.status.Outputs.Raw) == 0 || paused(w) {
		return w, nil
	}
	var outputs map[string]json.RawMessage
	if err := json.Unmarshal(w.status.Outputs.Raw, &outputs); err != nil {
		return w, nil // not an object: nothing to take from it
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
	status, events := w.status.DeepCopy(), w.events
	field, found, set, err := providerOutput(w.robj, outputs)
	if !found || err != nil || !set() {
		return w, nil
	}
	// B12: a patch of the field and the annotation alone, conditional on
	// the version decided on (patch.go), never an update of the cached copy.
	patch, err := providerFieldsPatch(w.robj, w.obj.GetResourceVersion(), field,
		v1alpha1.AnnotationProviderFieldsGeneration, strconv.FormatInt(w.obj.GetGeneration()+1, 10))
	if err != nil {
		return w, err
	}
	stored, err := w.kind.patch(ctx, w, patch)
	if err != nil {
		return w, fmt.Errorf("setting the Cluster API fields from the outputs: %w", err)
	}
	klog.FromContext(ctx).Info("Set the Cluster API fields from the outputs", "generation", stored.obj.GetGeneration())
	// The stored object carries the status as it was before this pass;
	// keep what this pass computed.
	*stored.status = *status
	stored.events = events
	return stored, nil
}
