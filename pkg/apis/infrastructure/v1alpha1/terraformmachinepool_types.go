package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfmp
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster\.x-k8s\.io/cluster-name`,description="The Cluster API Cluster this object belongs to"
// +kubebuilder:printcolumn:name="MachinePool",type=string,JSONPath=`.metadata.ownerReferences[?(@.kind=="MachinePool")].name`,description="The Cluster API MachinePool that owns this object"
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`,description="The instances the pool has, from its output replicas"
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity`,description="The identity this pool resolved to"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`,description="A succeeded apply is recorded"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.source.image`,priority=1,description="The module image the Jobs run"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformMachinePool runs Terraform Jobs for a pool of machines. Like a
// TerraformMachine it falls back to its cluster's identity, but its own
// identityRef is mutable (SPEC A8).
type TerraformMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec TerraformMachinePoolSpec `json:"spec"`

	// Status is written by the manager.
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// TerraformMachinePoolSpec is the desired state of a TerraformMachinePool.
type TerraformMachinePoolSpec struct {
	// IdentityRef names this pool's identity. Optional, with the same
	// fallback as a machine (SPEC I2), and mutable (SPEC A8).
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

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

	// ProviderIDList are the provider identifiers of the pool's instances
	// (Cluster API's InfraMachinePool contract). While it is unset, the
	// manager sets it once from the apply's output provider_id_list, a
	// list of strings (SPEC T5); that write is not a new generation to
	// apply (J1). Set by hand, it is left alone.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	ProviderIDList []string `json:"providerIDList,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TerraformMachinePoolList is a list of TerraformMachinePool.
type TerraformMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePool `json:"items"`
}
