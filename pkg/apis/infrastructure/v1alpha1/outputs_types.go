package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ContractOutputs are contract outputs read from the state on their own
// (SPEC K7).
type ContractOutputs struct {
	// Values maps each non-sensitive contract output of the role that the
	// state holds, within its bound, to its value.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *runtime.RawExtension `json:"values,omitempty"`

	// TooLarge names the contract outputs whose value is over its bound
	// (OutputsValid=False/OutputsInvalid), sorted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	TooLarge []string `json:"tooLarge,omitempty"`
}

// OutputsSource names the apply Job whose state status.outputs reflects.
type OutputsSource struct {
	// JobName is the name of the successful apply Job, in the object's
	// namespace: the jobName of status.lastApply when the state was read.
	// The Job itself may be gone.
	JobName string `json:"jobName"`
	// JobCreationTimestamp is that Job's creation time when the manager
	// still saw the Job at the read; unset when the Job was already gone.
	//
	// Deprecated: informational only. The manager no longer compares it:
	// whether to read is decided from jobName and status.lastApply (SPEC
	// T7), which survive the Job. It was required before; it may be
	// removed in a later API version.
	// +optional
	JobCreationTimestamp metav1.Time `json:"jobCreationTimestamp,omitempty"`
}
