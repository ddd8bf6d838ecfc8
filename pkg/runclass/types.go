package runclass

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// These types are the shape SPEC O1 gives status.lastRun (upstream
// A1-78..A1-81). They are not in the API yet: no controller records a
// run's classification, so no field of the CRDs claims to hold one. The
// wiring that writes status.lastRun adds them to pkg/apis.

// Outcome is how a finished run ended: the outcomes of status.lastApply
// (v1alpha1.RunOutcome) and Interrupted (SPEC O2).
type Outcome string

const (
	Succeeded        Outcome = Outcome(v1alpha1.RunSucceeded)
	Failed           Outcome = Outcome(v1alpha1.RunFailed)
	DeadlineExceeded Outcome = Outcome(v1alpha1.RunDeadlineExceeded)
	// Interrupted: the Job's pod was evicted, preempted, deleted or lost
	// with its node, or the Job was deleted while it ran (SPEC O2): to be
	// retried at once and not counted towards the backoff.
	Interrupted Outcome = "Interrupted"
)

// ErrorKind says what ended a run that did not succeed (SPEC O1, O2;
// upstream's error kinds, A1-80).
type ErrorKind string

const (
	// ErrorStep: a Terraform step exited with a non-zero code.
	ErrorStep ErrorKind = "step"
	// ErrorImageLayout: the image holds no module or no Terraform
	// (upstream's ImageInvalid).
	ErrorImageLayout ErrorKind = "image-layout"
	// ErrorImagePull: an image of the Job's pod could not be pulled
	// (upstream's ImagePullFailed).
	ErrorImagePull ErrorKind = "image-pull"
	// ErrorInterrupted: the pod was evicted, preempted, deleted or lost,
	// or the Job deleted (upstream's JobInterrupted).
	ErrorInterrupted ErrorKind = "interrupted"
	// ErrorDeadline: the Job ran past activeDeadlineSeconds.
	ErrorDeadline ErrorKind = "deadline"
	// ErrorRunner: the runner could not run Terraform (bad variables or
	// inputs, a working copy it could not make).
	ErrorRunner ErrorKind = "runner"
	// ErrorUnknown: the pod failed without a readable result document
	// (killed, out of memory, an older runner); the summary says what the
	// kubelet reported.
	ErrorUnknown ErrorKind = "unknown"
)

// Record is a finished run as the runner's result document and the Job's
// pod describe it (SPEC O1; the shape of upstream's status.lastRun).
type Record struct {
	// Job is the Job's name, in the object's namespace.
	Job string
	// Operation is apply or destroy.
	Operation v1alpha1.JobAction
	// Generation is the object's metadata.generation the Job ran for.
	Generation int64
	// Attempt numbers the Job among its generation's (SPEC T7).
	Attempt int32
	// Outcome is how the run ended.
	Outcome Outcome
	// FinishTime is when it ended.
	FinishTime metav1.Time
	// Image is the module image the Job ran.
	Image string
	// RuntimeVersion is the first line of `terraform version` (or `tofu
	// version`) in the image.
	RuntimeVersion string
	// Steps are the Terraform steps that ran, in order.
	Steps []Step
	// Changes are the changes Terraform planned.
	Changes *Changes
	// Error says why the run did not succeed; nil when it did.
	Error *Error
}

// Step is one step of a run (upstream A1-79).
type Step struct {
	// Name is setup, init, apply or destroy.
	Name string
	// ExitCode is the step's exit code (128+n when signal n ended it).
	ExitCode int32
	// DurationMilliseconds is how long it ran.
	DurationMilliseconds int64
}

// Changes are the changes a run planned (upstream A1-81's names): a
// replacement counts once, as replace.
type Changes struct {
	Create, Update, Replace, Delete int32
}

// Error is why a run did not succeed (upstream A1-80).
type Error struct {
	Kind ErrorKind
	// Step is the step that failed or was interrupted.
	Step string
	// ExitCode is that step's exit code, or the container's when no
	// result document was read.
	ExitCode *int32
	// Summary is the end of the error, redacted (SPEC O1, X1), or what
	// the pod's status said; at most MaxSummary bytes.
	Summary string
}
