package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// RunOutcome is how a finished Job ended (SPEC T7, O2).
// +kubebuilder:validation:Enum=Succeeded;Failed;DeadlineExceeded;Interrupted
type RunOutcome string

const (
	// RunSucceeded: the Job completed; Terraform exited 0.
	RunSucceeded RunOutcome = "Succeeded"
	// RunFailed: the Job failed for any reason but its deadline, typically
	// Terraform exiting non-zero (backoffLimit 0, SPEC J4).
	RunFailed RunOutcome = "Failed"
	// RunDeadlineExceeded: the Job ran past spec.jobs.activeDeadlineSeconds.
	RunDeadlineExceeded RunOutcome = "DeadlineExceeded"
	// RunInterrupted: the Job's pod was evicted, preempted, deleted or lost
	// with its node, or the Job was deleted while it ran (SPEC O2). The run
	// is retried at once and does not count towards the backoff.
	RunInterrupted RunOutcome = "Interrupted"
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

	// Interruptions counts the attempts of this generation and action, up
	// to this one, that were interrupted (SPEC O2): they are not counted in
	// the backoff of a later failure. The first three of a generation are
	// retried at once; later ones wait the backoff like a failure.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Interruptions int32 `json:"interruptions,omitempty"`
}

// RunErrorKind says what ended a run that did not succeed (SPEC O1, O2;
// upstream's error kinds, A1-80).
// +kubebuilder:validation:Enum=step;image-layout;image-pull;interrupted;deadline;runner;unknown
type RunErrorKind string

const (
	// RunErrorStep: a Terraform step exited with a non-zero code.
	RunErrorStep RunErrorKind = "step"
	// RunErrorImageLayout: the image holds no module or no Terraform
	// (ApplyJobSucceeded=False/ImageInvalid).
	RunErrorImageLayout RunErrorKind = "image-layout"
	// RunErrorImagePull: an image of the Job's pod could not be pulled
	// (ApplyJobSucceeded=False/ImagePullFailed).
	RunErrorImagePull RunErrorKind = "image-pull"
	// RunErrorInterrupted: the pod was evicted, preempted, deleted or
	// lost, or the Job deleted (JobInterrupted).
	RunErrorInterrupted RunErrorKind = "interrupted"
	// RunErrorDeadline: the Job ran past activeDeadlineSeconds.
	RunErrorDeadline RunErrorKind = "deadline"
	// RunErrorRunner: the runner could not run Terraform (bad variables or
	// inputs, a working copy it could not make).
	RunErrorRunner RunErrorKind = "runner"
	// RunErrorUnknown: the pod failed without a readable result document
	// (killed, out of memory, an older runner); the summary says what the
	// kubelet reported.
	RunErrorUnknown RunErrorKind = "unknown"
)

// LastRun is the newest finished run of the object, apply or destroy
// (SPEC O1; upstream's status.lastRun, A1-78..A1-81): what the runner's
// result document and the Job's pod said, kept after the Job is pruned.
type LastRun struct {
	// Job is the Job's name, in the object's namespace. It may be gone.
	// +kubebuilder:validation:MaxLength=253
	Job string `json:"job"`
	// Operation is apply or destroy.
	Operation JobAction `json:"operation"`
	// Generation is the object's metadata.generation the Job ran for.
	Generation int64 `json:"generation"`
	// Attempt numbers the Job among its generation's (SPEC T7).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Attempt int32 `json:"attempt,omitempty"`
	// Outcome is how the run ended.
	Outcome RunOutcome `json:"outcome"`
	// FinishTime is when it ended, as status.lastApply or
	// status.lastDestroy records it.
	FinishTime metav1.Time `json:"finishTime"`
	// Image is the module image the Job ran.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
	// RuntimeVersion is the first line of `terraform version` (or `tofu
	// version`) in the image.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RuntimeVersion string `json:"runtimeVersion,omitempty"`
	// Steps are the Terraform steps that ran, in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Steps []RunStep `json:"steps,omitempty"`
	// Changes are the changes Terraform planned, from its plan summary.
	// +optional
	Changes *RunChanges `json:"changes,omitempty"`
	// Error says why the run did not succeed; unset when it did.
	// +optional
	Error *RunError `json:"error,omitempty"`
}

// RunStep is one step of a run (upstream A1-79).
type RunStep struct {
	// Name is setup, init, apply or destroy.
	// +kubebuilder:validation:MaxLength=32
	Name string `json:"name"`
	// ExitCode is the step's exit code (128+n when signal n ended it).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	ExitCode int32 `json:"exitCode"`
	// DurationMilliseconds is how long it ran.
	// +kubebuilder:validation:Minimum=0
	DurationMilliseconds int64 `json:"durationMilliseconds"`
}

// RunChanges are the changes a run planned (upstream A1-81's names): a
// replacement counts once, as replace.
type RunChanges struct {
	// +kubebuilder:validation:Minimum=0
	Create int32 `json:"create"`
	// +kubebuilder:validation:Minimum=0
	Update int32 `json:"update"`
	// +kubebuilder:validation:Minimum=0
	Replace int32 `json:"replace"`
	// +kubebuilder:validation:Minimum=0
	Delete int32 `json:"delete"`
}

// RunError is why a run did not succeed (upstream A1-80).
type RunError struct {
	// Kind is step, image-layout, image-pull, interrupted, deadline,
	// runner or unknown.
	Kind RunErrorKind `json:"kind"`
	// Step is the step that failed or was interrupted.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Step string `json:"step,omitempty"`
	// ExitCode is that step's exit code, or the container's when no
	// result document was read.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Summary is the end of the error: Terraform's own error lines with
	// every credential, variable and input value replaced by
	// "(sensitive)" (SPEC O1, X1), or what the pod's status said.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Summary string `json:"summary,omitempty"`
}
