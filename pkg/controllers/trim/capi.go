package trim

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Subset is what a cache keeps of one kind watched through a dynamic
// informer: labels and annotations as Keep says, the metadata every object
// keeps (metadataFields), and the fields listed, nothing else.
type Subset struct {
	Keep Keep
	// Fields are dot-separated paths from the object's root, each with
	// who reads it.
	Fields map[string]string
}

// capiGroup is Cluster API's core group.
const capiGroup = "cluster.x-k8s.io"

// CAPI is the seam for the Cluster API objects the manager reads (SPEC
// section 18, contract v1beta2). Their informers are dynamic, with
// [ForCache] as the transform; an unstructured object of a kind not listed
// here keeps its metadata alone (fail closed: a new informer's fields must
// be listed before it sees them). The K2-K6 work adjusts this table to what
// it reads.
var CAPI = map[schema.GroupKind]Subset{
	{Group: capiGroup, Kind: "Cluster"}: {
		Keep: Keep{Annotations: map[string]string{
			v1alpha1.AnnotationPaused: "T5, K3: a paused Cluster pauses its objects",
		}},
		Fields: map[string]string{
			"spec.infrastructureRef":    "K2: the TerraformCluster it names",
			"spec.paused":               "K3: pauses every object of the cluster",
			"spec.controlPlaneEndpoint": "K6: the input control_plane_endpoint",
			"spec.clusterNetwork":       "K6: the input cluster_network",
			"spec.topology.version":     "K6: the input kubernetes_version",
		},
	},
	{Group: capiGroup, Kind: "Machine"}: {
		Keep: Keep{Labels: map[string]string{
			v1alpha1.LabelClusterName: "SPEC 1.2, K2: the machine's cluster",
			LabelControlPlane:         "K6: the input control_plane",
		}},
		Fields: map[string]string{
			"spec.clusterName":              "K2: the machine's cluster",
			"spec.infrastructureRef":        "K2: the TerraformMachine it names",
			"spec.bootstrap.dataSecretName": "K5: the bootstrap data Secret",
			"spec.failureDomain":            "K6, K7: the input failure_domain, FailureDomainMismatch",
			"spec.version":                  "K6: the input kubernetes_version",
		},
	},
	{Group: capiGroup, Kind: "MachinePool"}: {
		Keep: Keep{Labels: map[string]string{
			v1alpha1.LabelClusterName: "SPEC 1.2, K2: the pool's cluster",
		}},
		Fields: map[string]string{
			"spec.clusterName":                            "K2: the pool's cluster",
			"spec.replicas":                               "K6: the input replicas",
			"spec.failureDomains":                         "K6: the input failure_domains",
			"spec.template.spec.infrastructureRef":        "K2: the TerraformMachinePool it names",
			"spec.template.spec.bootstrap.dataSecretName": "K5: the bootstrap data Secret",
			"spec.template.spec.version":                  "K6: the input kubernetes_version",
		},
	},
}

// metadataFields are kept on every trimmed unstructured object: identity,
// versions, deletion, owners and finalizers.
var metadataFields = []string{
	"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers",
}

// TrimUnstructured reduces u in place to what [CAPI] keeps of its kind and
// returns it. It is idempotent.
func TrimUnstructured(u *unstructured.Unstructured) *unstructured.Unstructured {
	sub := CAPI[u.GroupVersionKind().GroupKind()]
	out := map[string]interface{}{}
	for _, f := range []string{"apiVersion", "kind"} {
		if v, ok := u.Object[f]; ok {
			out[f] = v
		}
	}
	if m, ok := u.Object["metadata"].(map[string]interface{}); ok {
		meta := map[string]interface{}{}
		for _, f := range metadataFields {
			if v, ok := m[f]; ok {
				meta[f] = v
			}
		}
		labels := m["labels"]
		if !sub.Keep.AllLabels {
			labels = filterAny(labels, sub.Keep.Labels)
		}
		if labels != nil {
			meta["labels"] = labels
		}
		if annotations := filterAny(m["annotations"], sub.Keep.Annotations); annotations != nil {
			meta["annotations"] = annotations
		}
		out["metadata"] = meta
	}
	for path := range sub.Fields {
		fields := strings.Split(path, ".")
		if v, found, err := unstructured.NestedFieldNoCopy(u.Object, fields...); err == nil && found {
			_ = unstructured.SetNestedField(out, v, fields...)
		}
	}
	u.Object = out
	return u
}

// filterAny is filter for an unstructured map of strings; nil when none
// is kept.
func filterAny(in interface{}, keep map[string]string) interface{} {
	m, ok := in.(map[string]interface{})
	if !ok {
		return nil
	}
	out := map[string]interface{}{}
	for key, v := range m {
		if _, ok := keep[key]; ok {
			out[key] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
