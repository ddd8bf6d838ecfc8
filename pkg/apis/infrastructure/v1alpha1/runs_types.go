package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RunOutcome is how a finished Job ended (SPEC T7).
// +kubebuilder:validation:Enum=Succeeded;Failed;DeadlineExceeded
type RunOutcome string

const (
	// RunSucceeded: the Job completed; Terraform exited 0.
	RunSucceeded RunOutcome = "Succeeded"
	// RunFailed: the Job failed for any reason but its deadline, typically
	// Terraform exiting non-zero (backoffLimit 0, SPEC J4).
	RunFailed RunOutcome = "Failed"
	// RunDeadlineExceeded: the Job ran past spec.jobs.activeDeadlineSeconds.
	RunDeadlineExceeded RunOutcome = "DeadlineExceeded"
)

// RunRecord is the recorded outcome of a finished apply or destroy Job
// (SPEC T7). The manager decides from it, not from the Job: a finished Job
// that disappears (a TTL, kubectl delete, pruning) never runs its
// generation again.
type RunRecord struct {
	// Generation is the object's metadata.generation the Job ran for.
	Generation int64 `json:"generation"`

	// SourceHash is the mirror's captf.io/source-hash the Job started with
	// (SPEC C5), empty when the Job recorded none. A re-apply on rotation
	// (SPEC C6) compares it with the mirror's current hash.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SourceHash string `json:"sourceHash,omitempty"`

	// JobName is the name of the Job, in the object's namespace. The Job
	// itself may be gone.
	// +kubebuilder:validation:MaxLength=253
	JobName string `json:"jobName"`

	// Outcome is how the Job ended: Succeeded, Failed or DeadlineExceeded.
	Outcome RunOutcome `json:"outcome"`

	// FinishTime is when the Job finished: the time of its Complete or
	// Failed condition, or when the manager first saw it finished if the
	// Job controller recorded none. Retries back off from it.
	FinishTime metav1.Time `json:"finishTime"`

	// InputsHash is the hash of the contract inputs the Job ran with (SPEC
	// K6): an apply is due again when the inputs rendered now hash to
	// another value (a MachinePool's replicas, a cluster's exports for a
	// pool). Empty for a Job that recorded none.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	InputsHash string `json:"inputsHash,omitempty"`

	// Attempt numbers the Job among the Jobs of its action and generation,
	// from 1. Every retry (after a backoff or on captf.io/retry) and every
	// re-apply on rotation (SPEC C6) is a new attempt; a new generation
	// starts again at 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Attempt int32 `json:"attempt"`
}
