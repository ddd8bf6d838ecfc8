package jobs

import (
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/drift"
)

// ActionOf returns the action a Job was built for (its captf.io/action
// annotation): v1alpha1.JobActionApply, v1alpha1.JobActionDestroy,
// v1alpha1.JobActionDrift (SPEC O7), v1alpha1.JobActionRestore (O5), or "" when
// the annotation is missing or holds anything else.
func ActionOf(job *batchv1.Job) v1alpha1.JobAction {
	if job == nil {
		return ""
	}
	switch a := v1alpha1.JobAction(job.Annotations[v1alpha1.AnnotationJobAction]); a {
	case v1alpha1.JobActionApply, v1alpha1.JobActionDestroy, v1alpha1.JobActionDrift, v1alpha1.JobActionRestore, v1alpha1.JobActionPlan:
		return a
	}
	return ""
}

// RestoreSerialOf returns a restore Job's captf.io/restore-serial (SPEC
// O5), false when absent or not a canonical serial.
func RestoreSerialOf(job *batchv1.Job) (int64, bool) {
	if job == nil {
		return 0, false
	}
	v := job.Annotations[v1alpha1.AnnotationJobRestoreSerial]
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
		return 0, false
	}
	return n, true
}

// DriftRemediationOf returns a Job's captf.io/drift-remediation (SPEC
// O7), 0 when absent or not a number from 0 to drift.MaxRemediations.
func DriftRemediationOf(job *batchv1.Job) int {
	if job == nil {
		return 0
	}
	n, err := strconv.Atoi(job.Annotations[v1alpha1.AnnotationJobDriftRemediation])
	if err != nil || n < 0 || n > drift.MaxRemediations {
		return 0
	}
	return n
}

// ReapplyOf returns a Job's re-apply number (SPEC C6); 0 for a first apply
// or anything unreadable.
func ReapplyOf(job *batchv1.Job) int {
	if job == nil {
		return 0
	}
	n, err := strconv.Atoi(job.Annotations[v1alpha1.AnnotationJobReapply])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// MaxAttempt bounds the attempt numbers [AttemptOf] reads: at 30 minutes
// between failures, far more than any object needs, and it keeps a value
// written by someone else within what status.lastApply.attempt holds.
const MaxAttempt = 1000000

// AttemptOf returns a Job's attempt number among the Jobs of its action and
// generation (SPEC T7): its captf.io/attempt annotation when that is an
// integer from 1 to [MaxAttempt]; else, for Jobs created before attempts
// were recorded, 1 plus its re-apply number (a generation's Jobs then were
// its first apply and its re-applies, in order), at most MaxAttempt.
func AttemptOf(job *batchv1.Job) int {
	if job == nil {
		return 0
	}
	if n, err := strconv.Atoi(job.Annotations[v1alpha1.AnnotationJobAttempt]); err == nil && n >= 1 && n <= MaxAttempt {
		return n
	}
	return 1 + min(ReapplyOf(job), MaxAttempt-1)
}

// InterruptionsOf returns how many attempts of a Job's generation before
// it were interrupted (its captf.io/interruptions annotation, SPEC O2): 0
// when missing or not an integer from 0 to the Job's attempt minus 1.
func InterruptionsOf(job *batchv1.Job) int {
	if job == nil {
		return 0
	}
	n, err := strconv.Atoi(job.Annotations[v1alpha1.AnnotationJobInterruptions])
	if err != nil || n < 0 || n >= AttemptOf(job) {
		return 0
	}
	return n
}

// RetryOf returns the captf.io/retry value a Job was started for (SPEC
// T7), "" when none.
func RetryOf(job *batchv1.Job) string {
	if job == nil {
		return ""
	}
	return job.Annotations[v1alpha1.AnnotationRetry]
}

// GenerationOf returns the object generation a Job was built for (its
// captf.io/generation annotation); ok is false when the annotation is missing
// or not a decimal integer.
func GenerationOf(job *batchv1.Job) (generation int64, ok bool) {
	if job == nil {
		return 0, false
	}
	v, found := job.Annotations[v1alpha1.AnnotationJobGeneration]
	if !found || strings.HasPrefix(v, "+") {
		return 0, false
	}
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return g, true
}

// SourceHashOf returns the mirror source hash a Job started with (its
// captf.io/source-hash annotation, SPEC C5), "" when it has none.
func SourceHashOf(job *batchv1.Job) string {
	if job == nil {
		return ""
	}
	return job.Annotations[v1alpha1.AnnotationSourceHash]
}

// InputsHashOf returns the hash of the contract inputs a Job ran with
// (SPEC K6), "" when none is recorded or it is not a hash the manager
// wrote (at most 128 characters, the record's bound).
func InputsHashOf(job *batchv1.Job) string {
	if job == nil {
		return ""
	}
	h := job.Annotations[v1alpha1.AnnotationInputsHash]
	if len(h) > 128 {
		return ""
	}
	return h
}

// PlanOf returns the TerraformPlan an apply Job applies (SPEC O8), ""
// when none.
func PlanOf(job *batchv1.Job) string {
	if job == nil {
		return ""
	}
	return job.Annotations[v1alpha1.AnnotationPlan]
}
