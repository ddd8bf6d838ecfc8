package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories=cluster-api,shortName=tfci
// +kubebuilder:subresource:status
// +kubebuilder:metadata:labels={"clusterctl.cluster.x-k8s.io/move-hierarchy=","cluster.x-k8s.io/v1beta2=v1alpha1"}
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretRef.name`,description="Name of the source Secret"
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.secretRef.namespace`,description="Namespace of the source Secret"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Mirrored-In",type=string,JSONPath=`.status.namespaces`,priority=1,description="Namespaces holding a mirror"
// +kubebuilder:printcolumn:name="Mirrors",type=integer,JSONPath=`.status.mirrors.total`,priority=1,description="Mirrors of the source Secret"
// +kubebuilder:printcolumn:name="Current",type=string,JSONPath=`.status.conditions[?(@.type=="MirrorsCurrent")].status`,priority=1,description="Every mirror carries the current source hash"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformClusterIdentity names a Secret of cloud credentials and the
// namespaces allowed to use it. The manager mirrors the Secret into each
// allowed namespace where a workload object uses the identity (SPEC section 4).
type TerraformClusterIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the source Secret and the namespaces that may use it.
	// +required
	Spec TerraformClusterIdentitySpec `json:"spec"`

	// Status is written by the manager.
	// +optional
	Status TerraformClusterIdentityStatus `json:"status,omitempty"`
}

// TerraformClusterIdentitySpec is the desired state of a TerraformClusterIdentity.
type TerraformClusterIdentitySpec struct {
	// SecretRef names the source Secret. The manager reads it (never writes
	// it, SPEC V6) and copies its data into mirrors. Creating the identity or
	// changing this field requires `get` on that Secret (SPEC A2, A3).
	// +required
	SecretRef SecretReference `json:"secretRef"`

	// AllowedNamespaces says which namespaces may use the identity (SPEC
	// section 3). Unset allows none; `selector: {}` allows every namespace; `{}`
	// is rejected as ambiguous.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`

	// RequiredKeys are keys the source Secret must hold (SPEC C3). While one
	// is missing the identity is Ready=False/CredentialsIncomplete, its users
	// IdentityAllowed=False/CredentialsIncomplete, and no Job starts. An
	// empty value counts as present.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	RequiredKeys []string `json:"requiredKeys,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// Name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
}

// AllowedNamespaces selects namespaces by name, by label, or both (the union).
// +kubebuilder:validation:XValidation:rule="has(self.list) || has(self.selector)",message="allowedNamespaces must not be empty ({}): write selector: {} to allow every namespace, or list the namespaces (A1)"
type AllowedNamespaces struct {
	// List names namespaces exactly. An empty list matches none.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	List []string `json:"list,omitempty"`

	// Selector matches namespaces by their labels. `{}` matches every
	// namespace, including ones created later. Operators In and NotIn need at
	// least one value, Exists and DoesNotExist none; keys and values must be
	// valid label keys and values (the webhook checks what CEL cannot).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn'] ? (has(e.values) && size(e.values) > 0) : (e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0)))",message="selector.matchExpressions: In and NotIn need at least one value, Exists and DoesNotExist take none, and no other operator is valid (A1)"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// TerraformClusterIdentityStatus is the observed state of a TerraformClusterIdentity.
type TerraformClusterIdentityStatus struct {
	// Conditions: Ready (the source Secret exists and may be used),
	// MirrorsCurrent (every mirror carries the source's current hash),
	// CredentialsValid (the hygiene report, C4) and RotationComplete (C5).
	// SPEC section 10.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Namespaces that currently hold a mirror of this identity, sorted, at
	// most 1000 shown (SPEC S2); status.mirrors.total counts them all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	Namespaces []string `json:"namespaces,omitempty"`

	// Mirrors counts this identity's mirrors by state (SPEC section 13).
	// +optional
	Mirrors *MirrorCounts `json:"mirrors,omitempty"`

	// Rotation says how far the current source data has spread (SPEC C5):
	// the old credential may be revoked once RotationComplete is True.
	// +optional
	Rotation *RotationStatus `json:"rotation,omitempty"`
}

// RotationStatus reports rotation completeness (SPEC C5).
type RotationStatus struct {
	// MirrorsCurrent counts mirrors carrying the source's current hash.
	MirrorsCurrent int32 `json:"mirrorsCurrent"`
	// MirrorsStale counts mirrors carrying an older hash.
	MirrorsStale int32 `json:"mirrorsStale"`
	// JobsOnPreviousCredentials counts running Jobs of this identity that
	// started with an older hash: their environment keeps the old values.
	JobsOnPreviousCredentials int32 `json:"jobsOnPreviousCredentials"`
}

// MirrorCounts counts the mirrors of an identity by state.
type MirrorCounts struct {
	// Total mirrors of this identity.
	Total int32 `json:"total"`
	// Current mirrors carry the hash of the source as last read.
	Current int32 `json:"current"`
	// Stale mirrors carry an older hash; the manager is rewriting them.
	Stale int32 `json:"stale"`
	// Conflicted counts namespaces where a foreign Secret holds the mirror's
	// name (SPEC M7).
	Conflicted int32 `json:"conflicted"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TerraformClusterIdentityList is a list of TerraformClusterIdentity.
type TerraformClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterIdentity `json:"items"`
}
