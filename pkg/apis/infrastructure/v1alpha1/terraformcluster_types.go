package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfc
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster\.x-k8s\.io/cluster-name`,description="The Cluster API Cluster this object belongs to"
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.spec.identityRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`,description="A succeeded apply is recorded"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,description="The control plane endpoint's host"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.source.image`,priority=1,description="The module image the Jobs run"
// +kubebuilder:printcolumn:name="InputsApplied",type=string,JSONPath=`.status.conditions[?(@.type=="InputsApplied")].status`,priority=1,description="The last apply ran with the current spec and contract inputs (SPEC K1, K6)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformCluster runs Terraform Jobs for a cluster's infrastructure with
// the credentials of its identity (SPEC I1).
// +kubebuilder:validation:XValidation:rule="has(self.spec.identityRef)",message="spec.identityRef is required: spec.defaults.identityRef applies to machines and pools only, never to the cluster itself (A6)",fieldPath=".spec.identityRef"
type TerraformCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec TerraformClusterSpec `json:"spec"`

	// Status is written by the manager.
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// TerraformClusterSpec is the desired state of a TerraformCluster. Its
// identityRef is required on the TerraformCluster (A6), not in a
// TerraformClusterTemplate, where a ClusterClass patch may set it (K9).
type TerraformClusterSpec struct {
	// IdentityRef names the identity whose credentials this cluster's Jobs
	// use. Required (SPEC A6) and mutable: a change re-resolves the
	// credentials at once.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// Defaults for the machines and pools of this cluster.
	// +optional
	Defaults *ClusterDefaults `json:"defaults,omitempty"`

	// Source is what the Jobs run.
	// +optional
	Source SourceSpec `json:"source,omitempty"`

	// Jobs tunes the Jobs.
	// +optional
	// +kubebuilder:default={}
	Jobs JobsSpec `json:"jobs,omitempty"`

	// Drift schedules drift checks (SPEC O7): a Job that refreshes the
	// state and plans, never applies, after spec.drift.intervalSeconds
	// without a run; DriftDetected reports what it found.
	// +optional
	Drift *DriftSpec `json:"drift,omitempty"`

	// ApplyPolicy: Automatic (default) applies every spec change as soon
	// as it is due; Manual applies the first generation at once and makes
	// every later apply a plan Job and a TerraformPlan that a person with
	// the verb approve on terraformplans approves (SPEC O8, A3-63).
	// +optional
	// +kubebuilder:default=Automatic
	ApplyPolicy ApplyPolicy `json:"applyPolicy,omitempty"`

	// StatePolicy: deletionPolicy and adoptRetainedState (SPEC O5).
	StatePolicy `json:",inline"`

	// MaxActiveJobs caps the Jobs that run at once for this cluster: its
	// own and those of its machines and pools (SPEC O4). Unset means the
	// manager's --cluster-max-active-jobs (default 20). A Job beyond the
	// cap does not start: ApplyJobSucceeded is Unknown/WaitingForJobSlot
	// until a Job of the cluster ends. The cluster-wide
	// --max-active-jobs applies as well.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxActiveJobs *int32 `json:"maxActiveJobs,omitempty"`

	// Variables are the module's input variables (SPEC T3): a JSON object of
	// variable name to value, written by the runner as a variables file in
	// the working copy for apply and destroy. At most 256 keys (refused
	// here) and 64 KiB; keys are Terraform identifiers (a letter or _, then
	// letters, digits, _ or -) and the prefix captf_ is reserved. The CRD
	// cannot check the size, nor the keys of an object without a schema
	// (CEL sees none of them); see jobs.ValidateVariables. A change is a spec
	// change: a new generation, applied by a new Job (J1). Variables are not
	// secret: they are visible in the object and in the Job; credentials
	// belong in the identity's Secret.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:MaxProperties=256
	Variables *runtime.RawExtension `json:"variables,omitempty"`

	// VariablesFrom takes input variables from ConfigMaps and Secrets of
	// the object's namespace labelled captf.io/variables=true (SPEC O9):
	// each source's keys are variables, later sources win, and
	// spec.variables wins over all. Values from a Secret are sensitive:
	// they reach the Job's pod only through its run Secret, never its
	// spec, the status or a log. A change of a source re-applies clusters
	// and pools; a machine pins what it was provisioned with.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VariablesFrom []VariablesFromSource `json:"variablesFrom,omitempty"`

	// ControlPlaneEndpoint is where the cluster's API server is reached
	// (Cluster API's InfraCluster contract). While it is unset, the manager
	// sets it once from the apply's output control_plane_endpoint (SPEC
	// T5): an object with host and port, or a "host:port" string
	// ("[v6]:port" for IPv6). That write of the manager's is not a new
	// generation to apply (J1). Set by hand, it is left alone.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`
}

// APIEndpoint is a host and port (Cluster API v1beta2's APIEndpoint).
type APIEndpoint struct {
	// Host is a DNS name or IP address.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`

	// Port is the TCP port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// IsZero reports whether neither host nor port is set.
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// ClusterDefaults are inherited by the machines and pools of a cluster.
type ClusterDefaults struct {
	// IdentityRef is the identity of a machine or pool of this cluster that
	// has no identityRef of its own (SPEC I2). Never used by the cluster
	// itself. Machines without their own identityRef follow changes to it
	// (SPEC I3).
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// Drift is the drift schedule of a machine or pool of this cluster
	// that sets no spec.drift of its own (SPEC O7, A1-101). Never used by
	// the cluster itself.
	// +optional
	Drift *DriftSpec `json:"drift,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TerraformClusterList is a list of TerraformCluster.
type TerraformClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformCluster `json:"items"`
}
