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

	// DriftRemediation counts the drift remediations in a row (SPEC O7):
	// on an apply started by a drift check under Remediate, its number in
	// the row (1-3); on a drift check, the row so far when it started.
	// Unset for an apply of a spec change, which ends the row.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3
	DriftRemediation int32 `json:"driftRemediation,omitempty"`
}

// RunErrorKind says what ended a run that did not succeed (SPEC O1;
// upstream's error kinds, A1-80).
// +kubebuilder:validation:Enum=step;image-layout;image-pull;interrupted;deadline;runner;plan-changed;blocked;destructive;unknown
type RunErrorKind string

const (
	// RunErrorStep: a Terraform step exited with a non-zero code.
	RunErrorStep RunErrorKind = "step"
	// RunErrorImageLayout: the image holds no module or no Terraform.
	RunErrorImageLayout RunErrorKind = "image-layout"
	// RunErrorImagePull: an image of the Job's pod could not be pulled.
	RunErrorImagePull RunErrorKind = "image-pull"
	// RunErrorInterrupted: the pod was evicted, preempted, deleted or
	// lost, or the runner was stopped by a signal.
	RunErrorInterrupted RunErrorKind = "interrupted"
	// RunErrorDeadline: the Job ran past activeDeadlineSeconds.
	RunErrorDeadline RunErrorKind = "deadline"
	// RunErrorRunner: the runner could not run Terraform (bad variables
	// or inputs, a working copy it could not make).
	RunErrorRunner RunErrorKind = "runner"
	// RunErrorPlanChanged: an apply of an approved plan (SPEC O8) planned
	// again and found another plan: it applied nothing. Not a failure
	// (A3-69): a new plan waits for approval, with no backoff.
	RunErrorPlanChanged RunErrorKind = "plan-changed"
	// RunErrorBlocked: a guarded cluster apply (SPEC O8, upstream
	// A3-64) planned to delete or replace resources: it applied nothing.
	// Not a failure (A3-69): a Destructive plan waits for approval.
	// Upstream's name for the kind (A1-80).
	RunErrorBlocked RunErrorKind = "blocked"
	// RunErrorDestructive is what captf wrote for RunErrorBlocked before
	// it took upstream's name: never written now, kept in the enum so that
	// a status stored by an earlier captf still validates, and read as
	// RunErrorBlocked.
	RunErrorDestructive RunErrorKind = "destructive"
	// RunErrorUnknown: no readable result document says why (the pod is
	// gone, was killed or out of memory, or its message is not a
	// document); the summary says what the Job and its pod reported.
	RunErrorUnknown RunErrorKind = "unknown"
)

// MaxRunErrorSummary bounds LastRun.Error.Summary (upstream A1-80: at most
// 512 bytes).
const MaxRunErrorSummary = 512

// LastRun is the newest finished run of the object, as the runner's result
// document in its pod's termination message and the Job describe it (SPEC
// O1; upstream status.lastRun, A1-78..A1-81). It is recorded once per Job,
// when the Job's run is recorded in lastApply or lastDestroy; a Job or pod
// that is gone by then leaves only what the Job, or the record, says. It
// never holds a variable, credential or bootstrap value: the runner redacts
// the error before writing it (SPEC X1).
type LastRun struct {
	// Job is the name of the Job, in the object's namespace; the Job
	// itself may be gone.
	// +kubebuilder:validation:MaxLength=253
	Job string `json:"job"`

	// Operation is what the Job ran: apply, destroy or drift.
	Operation JobAction `json:"operation"`

	// Generation is the object's metadata.generation the Job ran for.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// Attempt numbers the Job among its generation's (SPEC T7).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Attempt int32 `json:"attempt,omitempty"`

	// Outcome is how the Job ended, as lastApply or lastDestroy records it.
	Outcome RunOutcome `json:"outcome"`

	// StartTime is when the Job started, when the Job was still there to
	// say.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// FinishTime is when the Job finished.
	FinishTime metav1.Time `json:"finishTime"`

	// Image is the module image the run used.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`

	// RuntimeVersion is the first line of `terraform version` (or `tofu
	// version`) in the image.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RuntimeVersion string `json:"runtimeVersion,omitempty"`

	// Steps are the steps that ran, in order, with their exit codes and
	// durations (A1-79); none when no result document was read.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Steps []RunStep `json:"steps,omitempty"`

	// Changes are the changes Terraform planned, when it printed them.
	// +optional
	Changes *RunChanges `json:"changes,omitempty"`

	// Drift is what a drift check found, when its plan ran to its end
	// (SPEC O7, A1-81).
	// +optional
	Drift *RunDrift `json:"drift,omitempty"`

	// Error says why the run did not succeed; unset when it did (A1-80).
	// +optional
	Error *RunError `json:"error,omitempty"`
}

// RunStep is one step of a run (upstream A1-79).
type RunStep struct {
	// Name is setup, init, apply, destroy, refresh, plan or show.
	// +kubebuilder:validation:MaxLength=16
	Name string `json:"name"`
	// ExitCode is the step's exit code (128+n when signal n ended it).
	ExitCode int32 `json:"exitCode"`
	// DurationMilliseconds is how long the step ran.
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
	// Kind is what ended the run.
	Kind RunErrorKind `json:"kind"`
	// Step is the step that failed or was interrupted, when one is known.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Step string `json:"step,omitempty"`
	// ExitCode is that step's exit code, or the container's when no result
	// document was read.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Summary is the end of the error output, redacted by the runner
	// (SPEC X1), or what the Job and its pod reported; at most 512 bytes.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Summary string `json:"summary,omitempty"`
}

// SourceStatus is the module image the object's runs are pinned to (SPEC
// O6, upstream A3-70..A3-72): the digest the pod of a successful apply
// ran (its imageID), so a later run cannot pick up whatever a tag points
// to by then.
type SourceStatus struct {
	// Image is the image reference (spec.source.image) the digest was
	// recorded for.
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image"`

	// ImageDigest is the digest of that image the successful apply ran,
	// from the pod's imageID. A TerraformMachine records it once, at its
	// first successful apply of Image, and its later runs (a destroy, a
	// re-apply) run repository@ImageDigest; a TerraformCluster or
	// TerraformMachinePool re-pins on each successful apply.
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	ImageDigest string `json:"imageDigest"`
}
