package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfm
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels.cluster\.x-k8s\.io/cluster-name`,description="The Cluster API Cluster this object belongs to"
// +kubebuilder:printcolumn:name="Machine",type=string,JSONPath=`.metadata.ownerReferences[?(@.kind=="Machine")].name`,description="The Cluster API Machine that owns this object"
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity`,description="The identity this machine resolved to"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`,description="A succeeded apply is recorded"
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.source.image`,priority=1,description="The module image the Jobs run"
// +kubebuilder:printcolumn:name="InputsApplied",type=string,JSONPath=`.status.conditions[?(@.type=="InputsApplied")].status`,priority=1,description="The last apply ran with the current spec and contract inputs (SPEC K1, K6)"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformMachine runs Terraform Jobs for one machine. It belongs to the
// TerraformCluster of its namespace named by its cluster.x-k8s.io/cluster-name
// label, and falls back to that cluster's identity (SPEC I2).
type TerraformMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	// +required
	Spec TerraformMachineSpec `json:"spec"`

	// Status is written by the manager.
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// TerraformMachineSpec is the desired state of a TerraformMachine.
// +kubebuilder:validation:XValidation:rule="has(self.identityRef) == has(oldSelf.identityRef) && (!has(self.identityRef) || self.identityRef.name == oldSelf.identityRef.name)",message="spec.identityRef is immutable, including from unset to set and from set to unset: replace the machine to change it (A7)"
type TerraformMachineSpec struct {
	// IdentityRef names this machine's identity. Optional: without it the
	// machine uses its cluster's spec.defaults.identityRef, else the cluster's
	// spec.identityRef (SPEC I2). Immutable once created (SPEC A7).
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
	// A machine reports drift only (SPEC O7): action Remediate is refused.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.action) || self.action == 'Report'",message="spec.drift.action of a TerraformMachine must be Report: machines report drift only; Cluster API replaces a machine, it is not re-applied (O7)"
	Drift *DriftSpec `json:"drift,omitempty"`

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

	// ProviderID is the machine's identifier at its provider (Cluster API's
	// InfraMachine contract), matched against the Node's spec.providerID.
	// While it is unset, the manager sets it once from the apply's output
	// provider_id, a string (SPEC T5); that write is not a new generation
	// to apply (J1). Set by hand, it is left alone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ProviderID string `json:"providerID,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TerraformMachineList is a list of TerraformMachine.
type TerraformMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachine `json:"items"`
}
