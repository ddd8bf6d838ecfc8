package contract

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/bounded"
)

// The contract inputs (SPEC K6; upstream A3-13..A3-17): the runner gives
// them to the module beside spec.variables. A module declares only those
// it uses; Terraform and OpenTofu warn about, and ignore, values of
// undeclared variables in a variables file.
const (
	InputCluster         = "captf_cluster"
	InputObject          = "captf_object"
	InputTags            = "captf_tags"
	InputClusterOutputs  = "captf_cluster_outputs"
	InputEndpoint        = "control_plane_endpoint"
	InputKubernetes      = "kubernetes_version"
	InputClusterNetwork  = "cluster_network"
	InputMachineName     = "machine_name"
	InputBootstrapData   = "bootstrap_data"
	InputBootstrapFormat = "bootstrap_format"
	InputFailureDomain   = "failure_domain"
	InputControlPlane    = "control_plane"
	InputPoolName        = "machinepool_name"
	InputReplicas        = "replicas"
	InputFailureDomains  = "failure_domains"
	InputNodeLabels      = "node_labels"

	// InputSensitive is no variable: the names of the other inputs whose
	// values are sensitive (SPEC O9: the variables a Secret gave), a JSON
	// array the runner takes out of the variables file and whose values it
	// keeps out of Terraform's output (X1). It travels with the inputs
	// (the run Secret, the saved inputs of later runs) and is left out of
	// their hash, which the values it names already cover.
	InputSensitive = "captf_sensitive_inputs"
)

// ReservedInputs are the contract inputs' names, which spec.variables may
// not use (SPEC K6). The captf_ prefix is reserved as a whole (T3).
var ReservedInputs = []string{
	InputEndpoint, InputKubernetes, InputClusterNetwork, InputMachineName,
	InputBootstrapData, InputBootstrapFormat, InputFailureDomain, InputControlPlane,
	InputPoolName, InputReplicas, InputFailureDomains, InputNodeLabels,
}

// SensitiveInputs are the inputs whose values never appear in a Job spec,
// status, event or log (SPEC K5, X1); InputSensitive names more.
var SensitiveInputs = []string{InputBootstrapData}

// MarkSensitive records names (inputs whose values are sensitive, O9) as
// InputSensitive, sorted; none records nothing.
func (in Inputs) MarkSensitive(names []string) {
	if len(names) == 0 {
		delete(in, InputSensitive)
		return
	}
	in.set(InputSensitive, slices.Sorted(slices.Values(names)))
}

// Sensitive returns the names of the inputs whose values are sensitive:
// SensitiveInputs and those InputSensitive names, when present.
func (in Inputs) Sensitive() []string {
	var names []string
	for _, k := range SensitiveInputs {
		if _, ok := in[k]; ok {
			names = append(names, k)
		}
	}
	var marked []string
	if raw, ok := in[InputSensitive]; ok && json.Unmarshal(raw, &marked) == nil {
		for _, k := range marked {
			if _, ok := in[k]; ok && !slices.Contains(names, k) {
				names = append(names, k)
			}
		}
	}
	return names
}

// BootstrapData is the content of a bootstrap data Secret (SPEC K5).
type BootstrapData struct {
	// Value is the Secret's key value.
	Value []byte
	// Format is its key format; cloud-config when unset.
	Format string
}

// DefaultBootstrapFormat is the format of bootstrap data whose Secret
// names none (Cluster API's default).
const DefaultBootstrapFormat = "cloud-config"

// InputSources is what one run's inputs are rendered from.
type InputSources struct {
	// Kind and Object are the workload object.
	Kind   string
	Object metav1.Object
	// Owners are its Cluster API owners (zero for a standalone object).
	Owners Owners
	// Exports is, for a machine or pool, its TerraformCluster's
	// status.exports; nil when it has none.
	Exports json.RawMessage
	// Bootstrap is, for a machine or pool, its bootstrap data; nil when
	// there is none (a standalone object).
	Bootstrap *BootstrapData
	// OwnEndpoint is, for a TerraformCluster, its own
	// spec.controlPlaneEndpoint as "host:port" ("" when unset). A
	// Cluster's endpoint equal to it is the module's own output that
	// Cluster API copied back, not an input: it is left out, so the copy
	// does not make a second apply due (K6).
	OwnEndpoint string
}

// EndpointString is an endpoint as OwnEndpoint compares it.
func EndpointString(host string, port int32) string {
	if host == "" && port == 0 {
		return ""
	}
	return fmt.Sprintf("%s:%d", host, port)
}

// Inputs are the rendered contract inputs of one run.
type Inputs map[string]json.RawMessage

// RenderInputs renders the contract inputs of src (SPEC K6). An input
// whose source does not exist (no Cluster, a standalone object) is left
// out, so the module's default applies.
func RenderInputs(src InputSources) Inputs {
	in := Inputs{}
	obj := src.Object
	cluster := clusterName(src)
	in.set(InputCluster, map[string]string{"name": cluster, "namespace": obj.GetNamespace()})
	in.set(InputObject, map[string]string{
		"kind": src.Kind, "name": obj.GetName(), "namespace": obj.GetNamespace(), "uid": string(obj.GetUID()),
	})
	tags := map[string]string{
		"cluster": cluster, "namespace": obj.GetNamespace(), "kind": src.Kind, "name": obj.GetName(), "managed-by": "captf",
	}
	if t := obj.GetAnnotations()[capiv1.AnnotationClonedFromName]; t != "" {
		tags["template"] = t
	}
	in.set(InputTags, tags)
	c := src.Owners.Cluster
	switch src.Kind {
	case v1alpha1.KindTerraformCluster:
		if c != nil {
			if ep := c.Spec.ControlPlaneEndpoint; !ep.IsZero() && EndpointString(ep.Host, ep.Port) != src.OwnEndpoint {
				in.set(InputEndpoint, map[string]any{"host": c.Spec.ControlPlaneEndpoint.Host, "port": c.Spec.ControlPlaneEndpoint.Port})
			}
			if c.Spec.Topology != nil && c.Spec.Topology.Version != "" {
				in.set(InputKubernetes, c.Spec.Topology.Version)
			}
			n := c.Spec.ClusterNetwork
			in.set(InputClusterNetwork, map[string]any{
				"api_server_port": n.APIServerPort,
				"pods":            nonNil(n.Pods.CIDRBlocks),
				"services":        nonNil(n.Services.CIDRBlocks),
				"service_domain":  n.ServiceDomain,
			})
		}
	case v1alpha1.KindTerraformMachine:
		in.setClusterOutputs(src.Exports)
		in.setBootstrap(src.Bootstrap)
		name := obj.GetName()
		if m := src.Owners.Machine; m != nil {
			name = m.Name
			if m.Spec.FailureDomain != "" {
				in.set(InputFailureDomain, m.Spec.FailureDomain)
			}
			if m.Spec.Version != "" {
				in.set(InputKubernetes, m.Spec.Version)
			}
			_, cp := m.Labels[capiv1.LabelControlPlane]
			in.set(InputControlPlane, cp)
		}
		in.set(InputMachineName, name)
	case v1alpha1.KindTerraformMachinePool:
		in.setClusterOutputs(src.Exports)
		in.setBootstrap(src.Bootstrap)
		name := obj.GetName()
		if p := src.Owners.MachinePool; p != nil {
			name = p.Name
			replicas := int32(1) // Cluster API's default
			if p.Spec.Replicas != nil {
				replicas = *p.Spec.Replicas
			}
			in.set(InputReplicas, replicas)
			in.set(InputFailureDomains, nonNil(p.Spec.FailureDomains))
			if v := p.Spec.Template.Spec.Version; v != "" {
				in.set(InputKubernetes, v)
			}
			labels := p.Spec.Template.ObjectMeta.Labels
			if labels == nil {
				labels = map[string]string{}
			}
			in.set(InputNodeLabels, labels)
		}
		in.set(InputPoolName, name)
	}
	return in
}

// clusterName is the Cluster API cluster's name: the Cluster found, else
// the object's cluster.x-k8s.io/cluster-name label, else (a cluster) its
// own name.
func clusterName(src InputSources) string {
	if c := src.Owners.Cluster; c != nil {
		return c.Name
	}
	if l := src.Object.GetLabels()[v1alpha1.LabelClusterName]; l != "" {
		return l
	}
	if src.Kind == v1alpha1.KindTerraformCluster {
		return src.Object.GetName()
	}
	return ""
}

func (in Inputs) setClusterOutputs(exports json.RawMessage) {
	if len(exports) == 0 || string(exports) == "null" {
		in[InputClusterOutputs] = json.RawMessage(`{}`)
		return
	}
	in[InputClusterOutputs] = slices.Clone(exports)
}

func (in Inputs) setBootstrap(b *BootstrapData) {
	if b == nil {
		return
	}
	in.set(InputBootstrapData, base64.StdEncoding.EncodeToString(b.Value))
	format := b.Format
	if format == "" {
		format = DefaultBootstrapFormat
	}
	in.set(InputBootstrapFormat, format)
}

// set stores v as JSON. Every value here marshals.
func (in Inputs) set(name string, v any) {
	b, _ := json.Marshal(v)
	in[name] = b
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// JSON is the inputs as one JSON object, keys sorted: the variables file
// the runner writes.
func (in Inputs) JSON() []byte {
	b, _ := json.Marshal(map[string]json.RawMessage(in))
	return b
}

// Hash is the lowercase hex SHA-256 of JSON() without the object's UID:
// the inputs hash recorded with status.lastApply (SPEC K6) and on the
// state (K11). A live object's UID never changes, so leaving it out
// changes no re-apply decision, while a copy clusterctl moved (or a
// restore) has another UID and the same inputs: it adopts its applied
// state instead of applying again. A hash reveals nothing of a sensitive
// value.
func (in Inputs) Hash() string {
	if len(in) == 0 {
		return ""
	}
	h := in
	if _, ok := in[InputSensitive]; ok {
		h = maps.Clone(in)
		delete(h, InputSensitive)
	}
	var obj map[string]string
	if raw, ok := in[InputObject]; ok && json.Unmarshal(raw, &obj) == nil {
		if _, ok := obj["uid"]; ok {
			delete(obj, "uid")
			h = maps.Clone(h)
			h.set(InputObject, obj)
		}
	}
	sum := sha256.Sum256(h.JSON())
	return hex.EncodeToString(sum[:])
}

// Redacted is the inputs with every sensitive value replaced by
// "(sensitive)", for what may be shown.
func (in Inputs) Redacted() Inputs {
	out := maps.Clone(in)
	for _, k := range in.Sensitive() {
		out[k] = json.RawMessage(`"(sensitive)"`)
	}
	return out
}

// MaxInputsBytes bounds the inputs of one run: the Secrets that carry
// them hold at most 1 MiB.
const MaxInputsBytes = 1 << 20

// inputsLimits bound the decoding of an inputs Secret, which a tenant may
// edit (SPEC B10): the size of a Secret, a modest depth and count.
var inputsLimits = bounded.Limits{MaxInput: MaxInputsBytes, MaxSize: MaxInputsBytes, MaxDepth: 64, MaxValues: 100000, MaxToken: MaxInputsBytes, MaxKey: 256}

// DecodeInputs reads inputs as JSON() wrote them, within bounds (B10): a
// JSON object of at most MaxInputsBytes.
func DecodeInputs(b []byte) (Inputs, error) {
	var in Inputs
	if err := bounded.Unmarshal(b, &in, inputsLimits); err != nil {
		return nil, err
	}
	if in == nil {
		return nil, errors.New("the inputs are not a JSON object")
	}
	return in, nil
}
