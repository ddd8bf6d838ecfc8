package jobs

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// T7: Job names are deterministic from the object, action, generation and
// attempt. Attempt 1 keeps the name Jobs had before retries existed (so
// existing Jobs and golden files stay valid); every later attempt has its
// own valid name.
func TestAttemptNameT7(t *testing.T) {
	for _, owner := range []string{"demo", strings.Repeat("a", 253), "prod.eu-west-1"} {
		for _, action := range []v1alpha1.JobAction{v1alpha1.JobActionApply, v1alpha1.JobActionDestroy} {
			first := Name(kindCluster, owner, uidA, action, 3)
			require.Equal(t, first, AttemptName(kindCluster, owner, uidA, action, 3, 1), "attempt 1 keeps today's name")
			require.Equal(t, first, AttemptName(kindCluster, owner, uidA, action, 3, 0))
			seen := map[string]bool{first: true}
			for n := 2; n <= 40; n++ {
				a := AttemptName(kindCluster, owner, uidA, action, 3, n)
				require.Equal(t, a, AttemptName(kindCluster, owner, uidA, action, 3, n), "deterministic")
				requireValidJobName(t, a)
				require.False(t, seen[a], "attempt %d collides: %s", n, a)
				seen[a] = true
				require.Contains(t, a, "-"+string(action)+"-3-a")
			}
			// Nothing else than the attempt changes the other parts' hash.
			require.NotEqual(t, AttemptName(kindCluster, owner, uidA, action, 3, 2), AttemptName(kindCluster, owner, uidB, action, 3, 2))
			require.NotEqual(t, AttemptName(kindCluster, owner, uidA, action, 3, 2), AttemptName(kindCluster, owner, uidA, action, 4, 2))
		}
		// An attempt and a re-apply (C6) of the same number never share a name.
		require.NotEqual(t, AttemptName(kindCluster, owner, uidA, v1alpha1.JobActionApply, 3, 2), ReapplyName(kindCluster, owner, uidA, 3, 2))
	}
	require.Regexp(t, `^demo-apply-3-a2-[0-9a-f]{8}$`, AttemptName(kindCluster, "demo", uidA, v1alpha1.JobActionApply, 3, 2))
}

// T7: Build names and annotates a later attempt and the retry value it
// acts on; a first attempt carries neither (the golden Jobs are unchanged).
func TestBuildAttemptAndRetryT7(t *testing.T) {
	p := params(v1alpha1.JobActionDestroy)
	first := Build(p)
	require.NotContains(t, first.Annotations, v1alpha1.AnnotationJobAttempt)
	require.NotContains(t, first.Annotations, v1alpha1.AnnotationRetry)
	require.Equal(t, 1, AttemptOf(first))
	p.Attempt = 1
	require.Equal(t, first, Build(p), "attempt 1 is the first Job")

	p.Attempt, p.Retry = 4, "now"
	j := Build(p)
	require.Equal(t, AttemptName(p.OwnerKind, p.OwnerName, p.OwnerUID, p.Action, p.Generation, 4), j.Name)
	require.Equal(t, "4", j.Annotations[v1alpha1.AnnotationJobAttempt])
	require.Equal(t, 4, AttemptOf(j), "read back")
	require.Equal(t, "now", RetryOf(j))
	require.Equal(t, j, Build(p), "deterministic")

	// A re-apply (C6) keeps its name and records its attempt.
	p = params(v1alpha1.JobActionApply)
	p.Reapply, p.Attempt = 1, 2
	j = Build(p)
	require.Equal(t, ReapplyName(p.OwnerKind, p.OwnerName, p.OwnerUID, p.Generation, 1), j.Name)
	require.Equal(t, 2, AttemptOf(j))
}

// T7: Jobs created before attempts were recorded read as attempt 1, or
// 1 + their re-apply number; bad values fall back the same way.
func TestAttemptOfLegacyT7(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{}}}
	require.Equal(t, 1, AttemptOf(j))
	j.Annotations[v1alpha1.AnnotationJobReapply] = "2"
	require.Equal(t, 3, AttemptOf(j))
	for _, bad := range []string{"0", "-1", "x", ""} {
		j.Annotations[v1alpha1.AnnotationJobAttempt] = bad
		require.Equal(t, 3, AttemptOf(j), bad)
	}
	require.Equal(t, 0, AttemptOf(nil))
	require.Equal(t, "", RetryOf(nil))
}

// T7: the finish time is the terminal condition's, else completionTime;
// a Job still running has none.
func TestFinishTimeT7(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	j := &batchv1.Job{}
	_, ok := FinishTime(j)
	require.False(t, ok, "running")
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(-time.Minute))}}
	_, ok = FinishTime(j)
	require.False(t, ok, "decided but not finished")
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	got, ok := FinishTime(j)
	require.True(t, ok)
	require.Equal(t, at, got.UTC())

	done := metav1.NewTime(at.Add(time.Hour))
	j = &batchv1.Job{Status: batchv1.JobStatus{CompletionTime: &done, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	got, ok = FinishTime(j)
	require.True(t, ok)
	require.Equal(t, done.Time, got)
	j.Status.CompletionTime = nil
	_, ok = FinishTime(j)
	require.False(t, ok, "no time recorded")
}

// T7: an attempt number someone else wrote is bounded, so a record of it
// always fits status.lastApply.attempt.
func TestAttemptOfBoundedT7(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationJobAttempt: "99999999999"}}}
	require.Equal(t, 1, AttemptOf(j))
	j.Annotations[v1alpha1.AnnotationJobAttempt] = "1000000"
	require.Equal(t, MaxAttempt, AttemptOf(j))
	j.Annotations = map[string]string{v1alpha1.AnnotationJobReapply: "5000000"}
	require.Equal(t, MaxAttempt, AttemptOf(j))
}

func TestAttemptOfHugeReapplyT7(t *testing.T) {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationJobReapply: "9223372036854775807"}}}
	require.Equal(t, MaxAttempt, AttemptOf(j))
}
