package jobs

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

func cond(t batchv1.JobConditionType, s corev1.ConditionStatus, reason, message string) batchv1.JobCondition {
	return batchv1.JobCondition{Type: t, Status: s, Reason: reason, Message: message}
}

const (
	msgBackoff  = "Job has reached the specified backoff limit"
	msgDeadline = "Job was active longer than specified deadline"
)

// TestStatusJ7 covers how a Job's conditions map to an outcome, including
// the conditions the Job controller adds since Kubernetes 1.31 before the
// terminal ones (SuccessCriteriaMet, FailureTarget).
func TestStatusJ7(t *testing.T) {
	for _, tc := range []struct {
		name       string
		conditions []batchv1.JobCondition
		want       Outcome
		message    string
		finished   bool
	}{
		{name: "running: no conditions", want: Running},
		{
			name:       "Complete",
			conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"), cond(batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods")},
			want:       Succeeded,
			finished:   true,
		},
		{
			name:       "Complete only (before Kubernetes 1.31)",
			conditions: []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue, "", "")},
			want:       Succeeded,
			finished:   true,
		},
		{
			name:       "SuccessCriteriaMet only: succeeded, pod still terminating",
			conditions: []batchv1.JobCondition{cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, "")},
			want:       Succeeded,
		},
		{
			name:       "Failed with BackoffLimitExceeded",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, msgBackoff), cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, msgBackoff)},
			want:       Failed,
			message:    msgBackoff,
			finished:   true,
		},
		{
			name:       "Failed with BackoffLimitExceeded, no FailureTarget (before Kubernetes 1.31)",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, msgBackoff)},
			want:       Failed,
			message:    msgBackoff,
			finished:   true,
		},
		{
			name:       "FailureTarget with BackoffLimitExceeded: failed, pod still terminating",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded, msgBackoff)},
			want:       Failed,
			message:    msgBackoff,
		},
		{
			name:       "Failed with another reason",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonPodFailurePolicy, "Container terraform exited with 1")},
			want:       Failed,
			message:    "Container terraform exited with 1",
			finished:   true,
		},
		{
			name:       "Failed with DeadlineExceeded",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, msgDeadline), cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, msgDeadline)},
			want:       DeadlineExceeded,
			message:    msgDeadline,
			finished:   true,
		},
		{
			name:       "FailureTarget with DeadlineExceeded: pod still stopping",
			conditions: []batchv1.JobCondition{cond(batchv1.JobFailureTarget, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, msgDeadline)},
			want:       DeadlineExceeded,
			message:    msgDeadline,
		},
		{
			name: "conditions present but False",
			conditions: []batchv1.JobCondition{
				cond(batchv1.JobComplete, corev1.ConditionFalse, "", ""),
				cond(batchv1.JobSuccessCriteriaMet, corev1.ConditionFalse, "", ""),
				cond(batchv1.JobFailed, corev1.ConditionFalse, batchv1.JobReasonDeadlineExceeded, msgDeadline),
				cond(batchv1.JobFailureTarget, corev1.ConditionFalse, batchv1.JobReasonBackoffLimitExceeded, msgBackoff),
				cond(batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended"),
			},
			want: Running,
		},
		{
			name: "conditions Unknown",
			conditions: []batchv1.JobCondition{
				cond(batchv1.JobComplete, corev1.ConditionUnknown, "", ""),
				cond(batchv1.JobFailed, corev1.ConditionUnknown, batchv1.JobReasonBackoffLimitExceeded, msgBackoff),
			},
			want: Running,
		},
		{
			name: "a False condition before a True one of the same type",
			conditions: []batchv1.JobCondition{
				cond(batchv1.JobFailed, corev1.ConditionFalse, batchv1.JobReasonBackoffLimitExceeded, "old"),
				cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded, msgDeadline),
			},
			want:     DeadlineExceeded,
			message:  msgDeadline,
			finished: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := &batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conditions}}
			got, message := Status(job)
			require.Equal(t, tc.want, got, "got %v", got)
			require.Equal(t, tc.message, message)
			require.Equal(t, tc.finished, Finished(job))
		})
	}
}

func TestStatusNilJob(t *testing.T) {
	got, message := Status(nil)
	require.Equal(t, Running, got)
	require.Empty(t, message)
	require.False(t, Finished(nil))
}

func TestOutcomeString(t *testing.T) {
	require.Equal(t, "Running", Running.String())
	require.Equal(t, "Succeeded", Succeeded.String())
	require.Equal(t, "Failed", Failed.String())
	require.Equal(t, "DeadlineExceeded", DeadlineExceeded.String())
	require.Equal(t, "Outcome(42)", Outcome(42).String())
	require.Equal(t, Running, Outcome(0), "the zero Outcome is Running")
}

// TestDisruptedO2: only the pod failure policy's reason is a disruption.
func TestDisruptedO2(t *testing.T) {
	cond := func(t batchv1.JobConditionType, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason}
	}
	for _, tt := range []struct {
		name  string
		conds []batchv1.JobCondition
		want  bool
	}{
		{"running", nil, false},
		{"failure target", []batchv1.JobCondition{cond(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy)}, true},
		{"failed", []batchv1.JobCondition{cond(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy)}, true},
		{"backoff limit", []batchv1.JobCondition{cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)}, false},
		{"deadline", []batchv1.JobCondition{cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded)}, false},
		{"false", []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionFalse, Reason: batchv1.JobReasonPodFailurePolicy}}, false},
	} {
		require.Equal(t, tt.want, Disrupted(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tt.conds}}), tt.name)
	}
	require.False(t, Disrupted(nil))
}

// TestStoppedByExitCodeO2: which rule of the pod failure policy failed a
// disrupted Job, from the Job controller's message.
func TestStoppedByExitCodeO2(t *testing.T) {
	job := func(reason, msg string) *batchv1.Job {
		return &batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason, Message: msg}}}}
	}
	require.True(t, StoppedByExitCode(job(batchv1.JobReasonPodFailurePolicy, "Container terraform for pod ns/p failed with exit code 143 matching FailJob rule at index 1")))
	require.False(t, StoppedByExitCode(job(batchv1.JobReasonPodFailurePolicy, "Pod ns/p has condition DisruptionTarget matching FailJob rule at index 0")))
	require.False(t, StoppedByExitCode(job(batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit (exit code 1)")), "only a policy's failure")
	require.False(t, StoppedByExitCode(nil))
}
