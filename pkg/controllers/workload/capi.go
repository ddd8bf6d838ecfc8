package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// The outputs a module declares for Cluster API's fields (SPEC T5).
const (
	outputControlPlaneEndpoint = "control_plane_endpoint"
	outputProviderID           = "provider_id"
	outputProviderIDList       = "provider_id_list"
)

// Bounds the CRD enforces on the fields; checked here first so that a bad
// output is reported, not refused by the API server on every pass.
const (
	maxFieldLength    = 512
	maxProviderIDList = 10000
)

// parseEndpoint reads the output control_plane_endpoint: an object with
// host and port ({"host": "h", "port": 6443}, the port a number or a
// decimal string), or a "host:port" string ("[v6]:port" for IPv6).
func parseEndpoint(raw []byte) (v1alpha1.APIEndpoint, error) {
	raw = bytes.TrimSpace(raw)
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: %q is not host:port ([v6]:port for IPv6)", outputControlPlaneEndpoint, truncateForMessage(s))
		}
		return endpoint(host, port)
	}
	var o struct {
		Host *string         `json:"host"`
		Port json.RawMessage `json:"port"`
	}
	if err := json.Unmarshal(raw, &o); err != nil || o.Host == nil || o.Port == nil {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s must be an object with host and port, or a \"host:port\" string", outputControlPlaneEndpoint)
	}
	var port string
	if err := json.Unmarshal(o.Port, &port); err != nil {
		port = string(bytes.TrimSpace(o.Port))
	}
	return endpoint(*o.Host, port)
}

func endpoint(host, port string) (v1alpha1.APIEndpoint, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if err := checkField(outputControlPlaneEndpoint+" host", host); err != nil {
		return v1alpha1.APIEndpoint{}, err
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return v1alpha1.APIEndpoint{}, fmt.Errorf("%s: port %q is not a number from 1 to 65535", outputControlPlaneEndpoint, truncateForMessage(port))
	}
	return v1alpha1.APIEndpoint{Host: host, Port: int32(p)}, nil
}

// parseProviderID reads the output provider_id: a string.
func parseProviderID(raw []byte) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s must be a string", outputProviderID)
	}
	return s, checkField(outputProviderID, s)
}

// parseProviderIDList reads the output provider_id_list: a list of
// strings.
func parseProviderIDList(raw []byte) ([]string, error) {
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%s must be a list of strings", outputProviderIDList)
	}
	if len(l) > maxProviderIDList {
		return nil, fmt.Errorf("%s has %d items, more than %d", outputProviderIDList, len(l), maxProviderIDList)
	}
	for i, s := range l {
		if err := checkField(fmt.Sprintf("%s[%d]", outputProviderIDList, i), s); err != nil {
			return nil, err
		}
	}
	return l, nil
}

func checkField(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("%s is empty", what)
	case len(s) > maxFieldLength:
		return fmt.Errorf("%s is %d bytes, more than %d", what, len(s), maxFieldLength)
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return errors.New(what + " contains white space or control characters")
	}
	return nil
}

// truncateForMessage keeps an output's value short in a condition message
// (outputs named here are not sensitive: T4 never hands sensitive ones on).
func truncateForMessage(s string) string {
	const n = 64
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// providerOutput parses the output that sets obj's Cluster API field
// (SPEC T5). found is false when the module declares no such output (a
// sensitive output is not in outputs, T4, so it never reaches the spec);
// err says why the output cannot set field; set sets the field when it is
// still unset and reports whether it did.
func providerOutput(obj runtime.Object, outputs map[string]json.RawMessage) (field string, found bool, set func() bool, err error) {
	switch o := obj.(type) {
	case *v1alpha1.TerraformCluster:
		raw, ok := outputs[outputControlPlaneEndpoint]
		ep, err := parseEndpoint(raw)
		return "spec.controlPlaneEndpoint", ok, func() bool {
			if !o.Spec.ControlPlaneEndpoint.IsZero() {
				return false
			}
			o.Spec.ControlPlaneEndpoint = ep
			return true
		}, err
	case *v1alpha1.TerraformMachine:
		raw, ok := outputs[outputProviderID]
		id, err := parseProviderID(raw)
		return "spec.providerID", ok, func() bool {
			if o.Spec.ProviderID != "" {
				return false
			}
			o.Spec.ProviderID = id
			return true
		}, err
	case *v1alpha1.TerraformMachinePool:
		raw, ok := outputs[outputProviderIDList]
		l, err := parseProviderIDList(raw)
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
