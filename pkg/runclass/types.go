package runclass

import "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"

// The record of a run is the API's status.lastRun (SPEC O1, upstream
// A1-78..A1-81): [Record] and its parts are v1alpha1's types.

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
type ErrorKind = v1alpha1.RunErrorKind

const (
	// ErrorStep: a Terraform step exited with a non-zero code.
	ErrorStep = v1alpha1.RunErrorStep
	// ErrorImageLayout: the image holds no module or no Terraform
	// (upstream's ImageInvalid).
	ErrorImageLayout = v1alpha1.RunErrorImageLayout
	// ErrorImagePull: an image of the Job's pod could not be pulled
	// (upstream's ImagePullFailed).
	ErrorImagePull = v1alpha1.RunErrorImagePull
	// ErrorInterrupted: the pod was evicted, preempted, deleted or lost,
	// or the runner stopped by a signal (upstream's JobInterrupted).
	ErrorInterrupted = v1alpha1.RunErrorInterrupted
	// ErrorDeadline: the Job ran past activeDeadlineSeconds.
	ErrorDeadline = v1alpha1.RunErrorDeadline
	// ErrorRunner: the runner could not run Terraform (bad variables or
	// inputs, a working copy it could not make).
	ErrorRunner = v1alpha1.RunErrorRunner
	// ErrorPlanChanged: an apply of an approved plan found another plan
	// and applied nothing (SPEC O8): not a failure, a new plan.
	ErrorPlanChanged = v1alpha1.RunErrorPlanChanged
	// ErrorBlocked: a guarded cluster apply found deletions or
	// replacements and applied nothing (SPEC O8): not a failure, a
	// Destructive plan. Upstream's kind blocked (A1-80); the runner's
	// document says destructive (runresult.KindDestructive).
	ErrorBlocked = v1alpha1.RunErrorBlocked
	// ErrorUnknown: no readable result document says why (the pod is
	// gone, killed, out of memory, an older runner); the summary says what
	// the Job and the kubelet reported.
	ErrorUnknown = v1alpha1.RunErrorUnknown
)

// Record is a finished run as status.lastRun holds it (SPEC O1).
type Record = v1alpha1.LastRun

// Step is one step of a run (upstream A1-79).
type Step = v1alpha1.RunStep

// Changes are the changes a run planned (upstream A1-81).
type Changes = v1alpha1.RunChanges

// Error is why a run did not succeed (upstream A1-80).
type Error = v1alpha1.RunError
