package runclass

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/runresult"
)

func job(condType batchv1.JobConditionType, reason string) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Annotations: map[string]string{v1alpha1.AnnotationJobGeneration: "3"}}}
	if condType != "" {
		j.Status.Conditions = []batchv1.JobCondition{{Type: condType, Status: corev1.ConditionTrue, Reason: reason, Message: "msg of " + reason}}
	}
	return j
}

func doc(t *testing.T, r runresult.Result) []byte {
	t.Helper()
	r.Version = runresult.Version
	if r.Operation == "" {
		r.Operation = runresult.OperationApply
	}
	b, err := r.Marshal()
	require.NoError(t, err)
	return b
}

// TestFinishedO2 is the classification table of SPEC O1 and O2, row by row.
func TestFinishedO2(t *testing.T) {
	failed := job(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded)
	stepDoc := doc(t, runresult.Result{
		Steps: []runresult.Step{{Name: "init"}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 900}},
		Error: &runresult.Error{Kind: runresult.KindStep, Step: "apply", Tail: "Error: boom\n\nmore"},
	})
	terminated := &Terminated{ExitCode: 1, Reason: "Error"}
	stoppedJob := job(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy)
	stoppedJob.Status.Conditions[0].Message = "Container terraform for pod ns/p failed with exit code 143 matching FailJob rule at index 1"
	pull := &PullFailure{Container: "terraform", Image: "registry.example/nope:1", Reason: "ImagePullBackOff"}
	for _, tt := range []struct {
		name     string
		job      *batchv1.Job
		pod      Pod
		outcome  Outcome
		kind     ErrorKind
		cause    Cause
		document Document
		step     string
		exit     *int32
		summary  string // a part of it
	}{
		{name: "complete", job: job(batchv1.JobComplete, "CompletionsReached"), pod: Pod{Claims: 1, Message: doc(t, runresult.Result{})},
			outcome: Succeeded, document: DocumentRead},
		{name: "complete without a document", job: job(batchv1.JobComplete, "CompletionsReached"), pod: Pod{Claims: 1},
			outcome: Succeeded, document: DocumentNone},
		{name: "deadline", job: job(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded),
			pod:     Pod{Claims: 1, Deleted: true, Message: doc(t, runresult.Result{Error: &runresult.Error{Kind: runresult.KindInterrupted, Step: "apply"}})},
			outcome: DeadlineExceeded, kind: ErrorDeadline, document: DocumentRead, step: "apply", summary: "activeDeadlineSeconds (msg of DeadlineExceeded)"},
		{name: "disrupted, pod gone", job: job(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy), pod: Pod{},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CauseDisruption, document: DocumentUnread, summary: "evicted, preempted, or its node was lost"},
		{name: "disrupted, pod read", job: job(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy), pod: Pod{Claims: 1, Disruption: "EvictionByEvictionAPI"},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CauseDisruption, document: DocumentNone, summary: "(EvictionByEvictionAPI)"},
		{name: "stopped by the exit-code rule, pod gone (kubectl delete pod on a node)", job: stoppedJob, pod: Pod{},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CausePodDeleted, document: DocumentUnread, summary: "stopped while it ran (deleted, or its node shut down): Container terraform for pod ns/p failed with exit code 143"},
		{name: "stopped by the exit-code rule, pod read", job: stoppedJob,
			pod:     Pod{Claims: 1, Terminated: &Terminated{ExitCode: 143}, Message: doc(t, runresult.Result{Error: &runresult.Error{Kind: runresult.KindInterrupted, Step: "apply", Tail: "stopped by SIGTERM while apply ran"}})},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CauseStopped, document: DocumentRead, step: "apply", summary: "SIGTERM"},
		{name: "stopped by the exit-code rule, pod being deleted", job: stoppedJob, pod: Pod{Claims: 1, Deleted: true, Terminated: &Terminated{ExitCode: 143}},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CausePodDeleted, document: DocumentNone, summary: "deleted while it ran"},
		{name: "pods unreadable", job: failed, pod: Pod{Unread: true},
			outcome: Failed, kind: ErrorUnknown, document: DocumentUnread, summary: "could not be read"},
		{name: "two pods claim the Job: none trusted", job: failed, pod: Pod{Claims: 2, Disruption: "x", Message: stepDoc},
			outcome: Failed, kind: ErrorUnknown, document: DocumentUnread, summary: "2 pods claim the Job"},
		{name: "pod gone: never an interruption (a pruned or collected pod of a finished Job)", job: failed, pod: Pod{},
			outcome: Failed, kind: ErrorUnknown, document: DocumentUnread, summary: "pod is gone (pruned, or collected), so no result document was read; the Job says: msg of BackoffLimitExceeded"},
		{name: "pod gone after a success", job: job(batchv1.JobComplete, "CompletionsReached"), pod: Pod{},
			outcome: Succeeded, document: DocumentUnread},
		{name: "pod disrupted, Job by backoff", job: failed, pod: Pod{Claims: 1, Disruption: "DeletionByTaintManager", Message: stepDoc},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CauseDisruption, document: DocumentRead, summary: "DeletionByTaintManager"},
		{name: "pod deleted", job: failed, pod: Pod{Claims: 1, Deleted: true, Terminated: terminated},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CausePodDeleted, document: DocumentNone, summary: "deleted while it ran"},
		{name: "runner stopped by a signal", job: failed,
			pod:     Pod{Claims: 1, Terminated: terminated, Message: doc(t, runresult.Result{Error: &runresult.Error{Kind: runresult.KindInterrupted, Step: "init", Tail: "stopped by SIGTERM while init ran"}})},
			outcome: Interrupted, kind: ErrorInterrupted, cause: CauseStopped, document: DocumentRead, step: "init", summary: "SIGTERM"},
		{name: "image pull", job: failed, pod: Pod{Claims: 1, PullFailure: pull},
			outcome: Failed, kind: ErrorImagePull, document: DocumentNone, summary: `module image "registry.example/nope:1" cannot be pulled (ImagePullBackOff)`},
		{name: "a step failed", job: failed, pod: Pod{Claims: 1, Terminated: terminated, Message: stepDoc},
			outcome: Failed, kind: ErrorStep, document: DocumentRead, step: "apply", exit: ptr.To[int32](1), summary: "Error: boom\n\nmore"},
		{name: "image layout", job: failed,
			pod:     Pod{Claims: 1, Terminated: &Terminated{ExitCode: 125}, Message: doc(t, runresult.Result{Error: &runresult.Error{Kind: runresult.KindImageLayout, Step: "setup", Tail: "no configuration"}})},
			outcome: Failed, kind: ErrorImageLayout, document: DocumentRead, step: "setup", summary: "no configuration"},
		{name: "runner", job: failed,
			pod:     Pod{Claims: 1, Message: doc(t, runresult.Result{Error: &runresult.Error{Kind: runresult.KindRunner, Step: "setup", Tail: "bad variables"}})},
			outcome: Failed, kind: ErrorRunner, document: DocumentRead, step: "setup", summary: "bad variables"},
		{name: "out of memory, no document", job: failed, pod: Pod{Claims: 1, Terminated: &Terminated{ExitCode: 137, Reason: "OOMKilled"}},
			outcome: Failed, kind: ErrorUnknown, document: DocumentNone, exit: ptr.To[int32](137),
			summary: "no result document; container terraform terminated: OOMKilled, exit code 137"},
		{name: "a log tail instead of a document", job: failed, pod: Pod{Claims: 1, Terminated: terminated, Message: []byte("Error: s3cr3t")},
			outcome: Failed, kind: ErrorUnknown, document: DocumentInvalid, exit: ptr.To[int32](1), summary: "the result document is not readable"},
		{name: "the init container failed", job: failed, pod: Pod{Claims: 1, InitTerminated: &Terminated{ExitCode: 125, Reason: "Error"}},
			outcome: Failed, kind: ErrorUnknown, document: DocumentNone, summary: "init container install-runner failed: Error, exit code 125"},
		{name: "a document that says success on a failed Job", job: failed, pod: Pod{Claims: 1, Terminated: terminated, Message: doc(t, runresult.Result{})},
			outcome: Failed, kind: ErrorUnknown, document: DocumentRead, exit: ptr.To[int32](1), summary: "container terraform terminated: Error, exit code 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Finished(tt.job, tt.pod)
			require.Equal(t, tt.outcome, got.Outcome)
			require.Equal(t, tt.kind, got.Kind)
			require.Equal(t, tt.cause, got.Cause)
			require.Equal(t, tt.document, got.Document)
			require.Equal(t, tt.step, got.Step)
			require.Equal(t, tt.exit, got.ExitCode)
			require.Contains(t, got.Summary, tt.summary)
			require.NotContains(t, got.Summary, "s3cr3t", "an invalid document is never quoted")
			require.LessOrEqual(t, len(got.Summary), MaxSummary)
			if tt.outcome == Succeeded {
				require.Empty(t, got.Summary)
			}
		})
	}
}

func TestVanishedA3_89(t *testing.T) {
	got := Vanished(v1alpha1.JobActionApply)
	require.Equal(t, Interrupted, got.Outcome)
	require.Equal(t, CauseJobDeleted, got.Cause)
	require.Equal(t, ErrorInterrupted, got.Kind)
	require.Contains(t, got.Summary, "its apply stays due")
}

func TestStopForPullO2(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	j := job("", "")
	j.CreationTimestamp = metav1.NewTime(start.Add(-time.Hour))
	j.Status.StartTime = ptr.To(metav1.NewTime(start))
	pf := &PullFailure{Reason: "ErrImagePull"}
	for _, tt := range []struct {
		name       string
		pf         *PullFailure
		generation int64
		now        time.Time
		want       bool
	}{
		{"no failure", nil, 9, start.Add(time.Hour), false},
		{"within the grace", pf, 3, start.Add(PullGrace - time.Second), false},
		{"past the grace", pf, 3, start.Add(PullGrace), true},
		{"a newer generation ends it at once", pf, 4, start, true},
	} {
		require.Equal(t, tt.want, StopForPull(j, tt.pf, tt.generation, tt.now), tt.name)
	}
	// Without a start time, from its creation.
	j.Status.StartTime = nil
	require.True(t, StopForPull(j, pf, 3, start))
}

func TestNewRecordAndWordsO1(t *testing.T) {
	rec := &v1alpha1.RunRecord{JobName: "c-apply-1", Generation: 2, Attempt: 3, Outcome: v1alpha1.RunFailed, FinishTime: metav1.NewTime(time.Unix(100, 0))}
	run := Finished(job(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded), Pod{Claims: 1, Message: doc(t, runresult.Result{
		Image: "registry.example/m:1", Runtime: "OpenTofu v1.12.6",
		Steps:   []runresult.Step{{Name: "init", DurationMilliseconds: 1500}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 2500}},
		Changes: &runresult.Changes{Create: 1, Replace: 2},
		Error:   &runresult.Error{Kind: runresult.KindStep, Step: "apply", Tail: "\nError: local-exec provisioner error\n\nwith terraform_data.r"},
	})})
	l := NewRecord(v1alpha1.JobActionApply, rec, run)
	require.Equal(t, &Record{
		Job: "c-apply-1", Operation: v1alpha1.JobActionApply, Generation: 2, Attempt: 3, Outcome: v1alpha1.RunFailed, FinishTime: rec.FinishTime,
		Image: "registry.example/m:1", RuntimeVersion: "OpenTofu v1.12.6",
		Steps:   []Step{{Name: "init", DurationMilliseconds: 1500}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 2500}},
		Changes: &Changes{Create: 1, Replace: 2},
		Error:   &Error{Kind: ErrorStep, Step: "apply", ExitCode: ptr.To[int32](1), Summary: "\nError: local-exec provisioner error\n\nwith terraform_data.r"},
	}, l)
	require.Equal(t, "step apply failed with exit code 1: Error: local-exec provisioner error", Headline(l))
	require.Equal(t, "apply Job c-apply-1 (generation 2, attempt 3) failed after 4s; planned 1 to create, 0 to update, 2 to replace, 0 to delete; "+
		"step apply failed with exit code 1: Error: local-exec provisioner error", Summary(l))

	ok := NewRecord(v1alpha1.JobActionDestroy, &v1alpha1.RunRecord{JobName: "d", Outcome: v1alpha1.RunSucceeded, Attempt: 1}, Run{Outcome: Succeeded})
	require.Nil(t, ok.Error)
	require.Empty(t, Headline(ok))
	require.Equal(t, "destroy Job d (generation 0, attempt 1) succeeded", Summary(ok))

	pulled := NewRecord(v1alpha1.JobActionApply, rec, Pulled(&PullFailure{Container: "install-runner", Image: "captf:dev", Reason: "ErrImagePull", Message: strings.Repeat("m", 1000)}))
	require.Equal(t, "captf:dev", pulled.Image)
	require.Contains(t, Headline(pulled), `an image cannot be pulled: the runner image (--runner-image) "captf:dev" cannot be pulled (ErrImagePull): mmm`)
	require.LessOrEqual(t, len(Headline(pulled)), 300)
}

// TestRecordOutcomeIsTheRecordsO1: status.lastRun says why, never another
// outcome than the record the manager decides from (T7; O2 is not wired).
func TestRecordOutcomeIsTheRecordsO1(t *testing.T) {
	rec := &v1alpha1.RunRecord{JobName: "c-apply-2", Generation: 1, Attempt: 2, Outcome: v1alpha1.RunFailed}
	evicted := NewRecord(v1alpha1.JobActionApply, rec, Finished(job(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded), Pod{Claims: 1, Disruption: "EvictionByEvictionAPI"}))
	require.Equal(t, v1alpha1.RunFailed, evicted.Outcome)
	require.Equal(t, ErrorInterrupted, evicted.Error.Kind, "the kind still says why")
	require.Equal(t, "apply Job c-apply-2 (generation 1, attempt 2) failed; interrupted: the Job's pod was disrupted (EvictionByEvictionAPI)", Summary(evicted))

	ok := NewRecord(v1alpha1.JobActionApply, &v1alpha1.RunRecord{JobName: "c-apply-3", Outcome: v1alpha1.RunSucceeded}, Run{Outcome: Failed, Kind: ErrorUnknown, Summary: "x"})
	require.Nil(t, ok.Error, "a succeeded record carries no error")
}

// TestGoneO1: a recorded run whose Job is gone is recorded from the record
// alone, with no steps, and never as an interruption.
func TestGoneO1(t *testing.T) {
	for _, tt := range []struct {
		outcome v1alpha1.RunOutcome
		kind    ErrorKind
		summary string
	}{
		{v1alpha1.RunSucceeded, "", ""},
		{v1alpha1.RunFailed, ErrorUnknown, "the Job is gone"},
		{v1alpha1.RunDeadlineExceeded, ErrorDeadline, "activeDeadlineSeconds"},
	} {
		rec := &v1alpha1.RunRecord{JobName: "j", Outcome: tt.outcome, Attempt: 1}
		l := NewRecord(v1alpha1.JobActionDestroy, rec, Gone(rec))
		require.Equal(t, tt.outcome, l.Outcome)
		require.Empty(t, l.Steps)
		if tt.kind == "" {
			require.Nil(t, l.Error)
			continue
		}
		require.Equal(t, tt.kind, l.Error.Kind)
		require.Contains(t, l.Error.Summary, tt.summary)
		require.NotEqual(t, ErrorInterrupted, l.Error.Kind)
	}
}

// TestKindOfA1_80: the runner's document kinds become upstream's
// status.lastRun.error.kind (A1-80): the destructive guard's stop is
// blocked, and Headline words blocked and the destructive an earlier
// captf stored alike (SPEC O8).
func TestKindOfA1_80(t *testing.T) {
	for in, want := range map[runresult.Kind]ErrorKind{
		runresult.KindStep:        ErrorStep,
		runresult.KindImageLayout: ErrorImageLayout,
		runresult.KindInterrupted: ErrorInterrupted,
		runresult.KindPlanChanged: ErrorPlanChanged,
		runresult.KindDestructive: v1alpha1.RunErrorBlocked,
	} {
		if got := kindOf(in); got != want {
			t.Errorf("kindOf(%q) = %q, want %q", in, got, want)
		}
	}
	for _, k := range []ErrorKind{v1alpha1.RunErrorBlocked, v1alpha1.RunErrorDestructive} {
		if h := Headline(&Record{Error: &Error{Kind: k}}); h != "applied nothing: the plan deletes or replaces resources" {
			t.Errorf("Headline of kind %q = %q", k, h)
		}
	}
}
