package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The template kinds (SPEC K9): what a ClusterClass or a
// MachineDeployment clones into TerraformClusters, TerraformMachines and
// TerraformMachinePools. A template's spec.template.spec is immutable
// (the admission webhook refuses a change, except a ClusterClass topology
// dry-run); its identityRef may be left unset for a ClusterClass patch.

// TemplateObjectMeta is the metadata a template gives the objects cloned
// from it.
type TemplateObjectMeta struct {
	// Labels copied to the cloned object.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations copied to the cloned object.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfct
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.source.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformClusterTemplate is the template a ClusterClass clones into a
// TerraformCluster (SPEC K9).
type TerraformClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the template.
	// +required
	Spec TerraformClusterTemplateSpec `json:"spec"`
}

// TerraformClusterTemplateSpec holds a TerraformCluster's template.
type TerraformClusterTemplateSpec struct {
	// Template is the TerraformCluster to clone.
	// +required
	Template TerraformClusterTemplateResource `json:"template"`
}

// TerraformClusterTemplateResource is a TerraformCluster to clone.
type TerraformClusterTemplateResource struct {
	// Metadata of the cloned object.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// Spec of the cloned object; identityRef may be left to a ClusterClass
	// patch. Immutable (SPEC K9).
	// +required
	Spec TerraformClusterSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// TerraformClusterTemplateList is a list of TerraformClusterTemplates.
type TerraformClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterTemplate `json:"items"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfmt
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.source.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformMachineTemplate is the template a MachineDeployment, MachineSet
// or control plane clones into TerraformMachines (SPEC K9).
type TerraformMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the template.
	// +required
	Spec TerraformMachineTemplateSpec `json:"spec"`
}

// TerraformMachineTemplateSpec holds a TerraformMachine's template.
type TerraformMachineTemplateSpec struct {
	// Template is the TerraformMachine to clone.
	// +required
	Template TerraformMachineTemplateResource `json:"template"`
}

// TerraformMachineTemplateResource is a TerraformMachine to clone.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.providerID)",message="spec.template.spec.providerID must be empty: every machine gets its own from its module (K7)"
type TerraformMachineTemplateResource struct {
	// Metadata of the cloned object.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// Spec of the cloned object. Immutable (SPEC K9).
	// +required
	Spec TerraformMachineSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// TerraformMachineTemplateList is a list of TerraformMachineTemplates.
type TerraformMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachineTemplate `json:"items"`
}

// +genclient
// +genclient:noStatus
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api,shortName=tfmpt
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.source.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformMachinePoolTemplate is the template a ClusterClass clones into
// TerraformMachinePools (SPEC K9).
type TerraformMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the template.
	// +required
	Spec TerraformMachinePoolTemplateSpec `json:"spec"`
}

// TerraformMachinePoolTemplateSpec holds a TerraformMachinePool's template.
type TerraformMachinePoolTemplateSpec struct {
	// Template is the TerraformMachinePool to clone.
	// +required
	Template TerraformMachinePoolTemplateResource `json:"template"`
}

// TerraformMachinePoolTemplateResource is a TerraformMachinePool to clone.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.providerIDList)",message="spec.template.spec.providerIDList must be empty: every pool gets its own from its module (K7)"
type TerraformMachinePoolTemplateResource struct {
	// Metadata of the cloned object.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// Spec of the cloned object. Immutable (SPEC K9).
	// +required
	Spec TerraformMachinePoolSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// TerraformMachinePoolTemplateList is a list of TerraformMachinePoolTemplates.
type TerraformMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolTemplate `json:"items"`
}
