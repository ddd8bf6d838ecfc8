package jobs

import (
	"strconv"
	"strings"
	"syscall"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// Outcome is what a Job's status says about its run (SPEC J7). The
// controller maps it to the ApplyJobSucceeded condition: Running to
// Unknown/JobRunning, Succeeded to True/ApplySucceeded or DestroySucceeded,
// Failed to False/ApplyFailed or DestroyFailed, DeadlineExceeded to
// False/JobDeadlineExceeded.
type Outcome int

const (
	// Running: no condition decides the Job yet. The Job may not have
	// started a pod, or its pod is running Terraform.
	Running Outcome = iota
	// Succeeded: a Complete or SuccessCriteriaMet condition is True; the
	// runner, and so Terraform, exited 0.
	Succeeded
	// Failed: a Failed or FailureTarget condition is True for any reason
	// other than the deadline, typically BackoffLimitExceeded (with
	// backoffLimit 0, the runner exited non-zero once, J4).
	Failed
	// DeadlineExceeded: a Failed or FailureTarget condition is True with
	// reason DeadlineExceeded: the Job ran past activeDeadlineSeconds (J4).
	DeadlineExceeded
)

// String returns the outcome's name, for logs.
func (o Outcome) String() string {
	switch o {
	case Running:
		return "Running"
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	case DeadlineExceeded:
		return "DeadlineExceeded"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Status interprets job.Status.Conditions (SPEC J7):
//
//   - Succeeded when Complete=True or SuccessCriteriaMet=True;
//   - else DeadlineExceeded when Failed=True or FailureTarget=True has reason
//     DeadlineExceeded;
//   - else Failed when Failed=True or FailureTarget=True;
//   - else Running (also for a nil Job, and for conditions that are False or
//     Unknown).
//
// SuccessCriteriaMet and FailureTarget count because the Job controller adds
// them as soon as the outcome is decided, while Complete and Failed wait
// until every pod has terminated, which after a deadline can take the whole
// termination grace period. Use [Finished] to know whether pods are gone.
//
// message is the message of the deciding failure condition (Failed
// preferred over FailureTarget), "" otherwise. The Job controller writes it
// (for example "Job was active longer than specified deadline"); it never
// holds container output, so no Secret value can reach a condition this way
// (X1).
func Status(job *batchv1.Job) (outcome Outcome, message string) {
	if job == nil {
		return Running, ""
	}
	if trueCondition(job, batchv1.JobComplete) != nil || trueCondition(job, batchv1.JobSuccessCriteriaMet) != nil {
		return Succeeded, ""
	}
	failed := trueCondition(job, batchv1.JobFailed)
	target := trueCondition(job, batchv1.JobFailureTarget)
	for _, c := range []*batchv1.JobCondition{failed, target} {
		if c != nil && c.Reason == batchv1.JobReasonDeadlineExceeded {
			return DeadlineExceeded, c.Message
		}
	}
	for _, c := range []*batchv1.JobCondition{failed, target} {
		if c != nil {
			return Failed, c.Message
		}
	}
	return Running, ""
}

// Finished reports whether the Job is in a terminal condition, Complete=True
// or Failed=True. Since Kubernetes 1.31 the Job controller adds these only
// once every pod of the Job has terminated, so a Finished Job no longer runs
// Terraform. A controller that must not run two Jobs of one object at a time
// (SPEC J1), for example an apply still releasing its state lock after its
// deadline and the next destroy, waits for Finished, not only for [Status]
// to leave Running.
func Finished(job *batchv1.Job) bool {
	if job == nil {
		return false
	}
	return trueCondition(job, batchv1.JobComplete) != nil || trueCondition(job, batchv1.JobFailed) != nil
}

// trueCondition returns the first condition of type t whose status is True,
// or nil.
func trueCondition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if c := &job.Status.Conditions[i]; c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// FinishTime returns when a [Finished] Job finished: the last transition
// of its Complete or Failed condition, else its status.completionTime; ok
// is false when the Job is not finished or records no time (SPEC T7).
func FinishTime(job *batchv1.Job) (t time.Time, ok bool) {
	if !Finished(job) {
		return time.Time{}, false
	}
	for _, ct := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if c := trueCondition(job, ct); c != nil && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.Time, true
		}
	}
	if job.Status.CompletionTime != nil && !job.Status.CompletionTime.IsZero() {
		return job.Status.CompletionTime.Time, true
	}
	return time.Time{}, false
}

// Disrupted reports whether the Job failed through its pod failure policy
// (reason PodFailurePolicy on its Failed or FailureTarget condition): its
// pod had the DisruptionTarget condition, set by the control plane when it
// evicts or preempts a pod or its node is lost, or the runner exited with a
// stopped code (SPEC O2, [podFailurePolicy]).
// The Job controller writes the condition, so it holds once the pod is gone.
func Disrupted(job *batchv1.Job) bool {
	if job == nil {
		return false
	}
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobFailureTarget} {
		if c := trueCondition(job, t); c != nil && c.Reason == batchv1.JobReasonPodFailurePolicy {
			return true
		}
	}
	return false
}

// StoppedExitCodes are the runner's exit codes for a run a stop request
// ended (128+SIGINT, 128+SIGTERM; pkg/runner's summarize): the kubelet
// stopped the pod because it was deleted, evicted or its node shut down.
// Nothing else makes the runner exit with them: Terraform exits 0, 1 or 2
// and the runner's own failures 125.
var StoppedExitCodes = []int32{128 + int32(syscall.SIGINT), 128 + int32(syscall.SIGTERM)}

// podFailurePolicy fails the Job at once, with reason PodFailurePolicy, when
// its pod was interrupted (SPEC O2): the pod has the DisruptionTarget
// condition (evicted, preempted, its node lost or drained), or a container
// exited with one of [StoppedExitCodes] (the pod deleted while it ran). The
// Job controller keeps that reason on the Job after the pod is gone, which
// is what tells an interruption from a failure once nobody can read the pod
// ([Disrupted]). The rules only name the reason: with backoffLimit 0 the Job
// fails either way (J4).
//
// The cost (measured by fault 8): with a policy, the Job controller keeps a
// deleted pod's tracking finalizer until the pod is terminal, so a deleted
// Pending pod that no kubelet ever ran waits for the pod garbage collector.
func podFailurePolicy() *batchv1.PodFailurePolicy {
	return &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
		Action:          batchv1.PodFailurePolicyActionFailJob,
		OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
	}, {
		Action:      batchv1.PodFailurePolicyActionFailJob,
		OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: StoppedExitCodes},
	}}}
}

// StoppedByExitCode reports whether a [Disrupted] Job failed through the
// exit-code rule of its pod failure policy (the pod was stopped: deleted,
// or its node shut down) rather than DisruptionTarget. The Job controller
// says which rule matched only in the condition's message ("Container X
// for pod Y failed with exit code 143 matching FailJob rule at index 1"),
// so this reads the message; it only chooses the words and the metric's
// cause, never whether the run counts.
func StoppedByExitCode(job *batchv1.Job) bool {
	if !Disrupted(job) {
		return false
	}
	_, msg := Status(job)
	return strings.Contains(msg, "exit code")
}
