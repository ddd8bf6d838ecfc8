package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeletionPolicy says what the deletion of an object does with its
// infrastructure and its Terraform state (SPEC O5, upstream A1-72:
// Destroy or Retain). Delete is the name captf used before it took
// upstream's; it is still accepted and means Destroy.
// +kubebuilder:validation:Enum=Destroy;Delete;Retain
type DeletionPolicy string

const (
	// DeletionPolicyDestroy: a destroy Job destroys the infrastructure,
	// then the state goes (T2) and the backups with the object (the
	// default; upstream A1-72's name).
	DeletionPolicyDestroy DeletionPolicy = "Destroy"
	// DeletionPolicyDelete is the deprecated alias of DeletionPolicyDestroy
	// (captf's name before it took upstream's): it behaves identically and
	// stays accepted so that stored objects keep validating.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyRetain: no destroy Job; the infrastructure, the state
	// Secrets and the state backups stay, labelled
	// captf.io/retained-from-uid, for a later object to adopt
	// (spec.adoptRetainedState).
	DeletionPolicyRetain DeletionPolicy = "Retain"
)

// StatePolicy is the part of a workload spec that says what becomes of
// the Terraform state when the object goes and comes (SPEC O5), inlined
// in the specs of the three workload kinds.
type StatePolicy struct {
	// DeletionPolicy: Destroy (the default) destroys the infrastructure
	// with a destroy Job when the object is deleted, then its state;
	// Delete is a deprecated alias of Destroy.
	// Retain deletes the object without a destroy Job and keeps the
	// infrastructure, the state Secrets and the state backups (no longer
	// owned by the object, labelled captf.io/retained-from-uid=<uid>); a
	// running Job is waited for first. It may be changed at any time, also
	// while the object is being deleted.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// AdoptRetainedState lets this object take over the state an earlier
	// object of the same kind, namespace and name retained
	// (deletionPolicy Retain): its state Secrets and backups become this
	// object's, and its apply runs against that state, not an empty one.
	// Without it, a retained state stops the first apply
	// (ApplyJobSucceeded=False/RetainedStateExists), so that no object
	// takes over infrastructure by reusing a name.
	// +optional
	AdoptRetainedState bool `json:"adoptRetainedState,omitempty"`
}

// StateBackup is one backup of the object's Terraform state (SPEC O5).
type StateBackup struct {
	// Serial is the state's serial the backup holds.
	Serial int64 `json:"serial"`
	// TakenAt is when the backup was taken.
	TakenAt metav1.Time `json:"takenAt"`
	// SecretName names the backup Secret in the object's namespace
	// (captf-state-backup-<suffix>-<serial>); a split state's parts
	// follow it as -part-<i>.
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// Parts is the number of Secrets of the backup when the state was
	// split into more than one.
	// +optional
	Parts int32 `json:"parts,omitempty"`
	// Bytes is the size of the backed-up state as stored (the backend's
	// gzip, all parts together; upstream A1-88). Unset for a backup taken
	// before captf recorded sizes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Bytes int64 `json:"bytes,omitempty"`
}

// Destroys tells whether the deletion of an object under this policy runs
// a destroy Job: Destroy, its alias Delete and the unset default do;
// Retain does not. Every decision on the policy goes through it, so the
// alias can never behave differently.
func (p DeletionPolicy) Destroys() bool {
	return p != DeletionPolicyRetain
}

// StatePolicyOf returns the StatePolicy of a TerraformCluster,
// TerraformMachine or TerraformMachinePool; the zero value for any other
// object.
func StatePolicyOf(obj runtime.Object) StatePolicy {
	switch o := obj.(type) {
	case *TerraformCluster:
		return o.Spec.StatePolicy
	case *TerraformMachine:
		return o.Spec.StatePolicy
	case *TerraformMachinePool:
		return o.Spec.StatePolicy
	}
	return StatePolicy{}
}
