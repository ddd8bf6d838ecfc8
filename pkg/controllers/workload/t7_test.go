package workload

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
)

// Tests of SPEC T7: outcomes are recorded, not inferred from Jobs.

const kindCluster = v1alpha1.KindTerraformCluster

var clustersGVR = v1alpha1.SchemeGroupVersion.WithResource("terraformclusters")

// attemptJob is newJob for attempt n (named and annotated as the manager
// builds it), created at created and, unless running, finished at finish
// (the time of its terminal conditions, as the Job controller sets it).
func attemptJob(o metav1.Object, action v1alpha1.JobAction, gen int64, n int, outcome jobOutcome, created, finish time.Time) *batchv1.Job {
	j := newJob(kindCluster, o, action, gen, outcome)
	if n > 1 {
		j.Name = jobs.AttemptName(kindCluster, o.GetName(), o.GetUID(), action, gen, n)
		j.UID = types.UID("uid-job-" + j.Name)
		j.Annotations[v1alpha1.AnnotationJobAttempt] = strconv.Itoa(n)
	}
	j.CreationTimestamp = metav1.NewTime(created)
	for i := range j.Status.Conditions {
		j.Status.Conditions[i].LastTransitionTime = metav1.NewTime(finish)
	}
	return j
}

// finishAt sets outcome's conditions on the stored Job name, timed at the
// fake clock's now, as the Job controller does.
func (f *fixture) finishAt(name string, outcome jobOutcome) {
	f.t.Helper()
	o, err := f.Kube.Tracker().Get(jobsGVR, testNS, name)
	require.NoError(f.t, err)
	j := o.(*batchv1.Job).DeepCopy()
	j.Status.Conditions = attemptJob(newCluster("x"), v1alpha1.JobActionApply, 1, 1, outcome, f.Clock.Now(), f.Clock.Now()).Status.Conditions
	require.NoError(f.t, f.Kube.Tracker().Update(jobsGVR, j, testNS))
}

// editCluster changes the stored cluster name and lets the caches see it.
func (f *fixture) editCluster(name string, edit func(*v1alpha1.TerraformCluster)) {
	f.t.Helper()
	o, err := f.Captf.Tracker().Get(clustersGVR, testNS, name)
	require.NoError(f.t, err)
	c := o.(*v1alpha1.TerraformCluster).DeepCopy()
	edit(c)
	require.NoError(f.t, f.Captf.Tracker().Update(clustersGVR, c, testNS))
	f.catchUp()
}

func retryAnnotation(v string) func(metav1.Object) {
	return func(o metav1.Object) {
		a := o.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AnnotationRetry] = v
		o.SetAnnotations(a)
	}
}

// storedCluster returns the cluster as the fake API server holds it.
func (f *fixture) storedCluster(name string) *v1alpha1.TerraformCluster {
	f.t.Helper()
	o, err := f.Captf.Tracker().Get(clustersGVR, testNS, name)
	require.NoError(f.t, err)
	return o.(*v1alpha1.TerraformCluster)
}

// seedReady seeds what a cluster needs for its Jobs to start: the source,
// an identity allowing testNS, and a current mirror, plus objs.
func (f *fixture) seedReady(c *v1alpha1.TerraformCluster, objs ...any) {
	f.t.Helper()
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c,
		newMirror(identityName, testNS, sourceData(), refOf(kindCluster, c)))
	for _, o := range objs {
		j := o.(*batchv1.Job)
		f.seed(j)
	}
}

// T7: the backoff doubles from one minute and stops at thirty.
func TestRetryBackoffT7(t *testing.T) {
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	for i, d := range want {
		require.Equal(t, d, retryBackoff(int32(i+1)), "attempt %d", i+1)
	}
	require.Equal(t, 30*time.Minute, retryBackoff(1000))
	require.Equal(t, time.Minute, retryBackoff(0))
}

// T7: status.lastApply records the newest finished apply: generation,
// source hash, Job name, outcome, finish time and attempt.
func TestSyncT7RecordsLastApply(t *testing.T) {
	hash := credentials.SourceHash(sourceData())
	for _, tc := range []struct {
		outcome jobOutcome
		want    v1alpha1.RunOutcome
		reason  v1alpha1.ConditionReason
	}{
		{jobSucceeded, v1alpha1.RunSucceeded, v1alpha1.ReasonApplySucceeded},
		{jobFailed, v1alpha1.RunFailed, v1alpha1.ReasonApplyFailed},
		{jobDeadlineExceeded, v1alpha1.RunDeadlineExceeded, v1alpha1.ReasonJobDeadlineExceeded},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer, generation(4))
			finish := epoch.Add(-30 * time.Second)
			older := attemptJob(c1, v1alpha1.JobActionApply, 3, 1, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-50*time.Minute))
			j := attemptJob(c1, v1alpha1.JobActionApply, 4, 2, tc.outcome, epoch.Add(-time.Minute), finish)
			j.Annotations[v1alpha1.AnnotationSourceHash] = hash
			f.seedReady(c1, older, j)

			require.NoError(t, f.sync(kindCluster, "c1"))

			require.Empty(t, f.createdJobs(), "finished just now: no retry yet")
			st := f.lastStatus()
			require.Equal(t, &v1alpha1.RunRecord{
				Generation: 4, SourceHash: hash, JobName: j.Name, Outcome: tc.want,
				FinishTime: metav1.NewTime(finish.UTC()), Attempt: 2,
			}, st.LastApply)
			require.Nil(t, st.LastDestroy)
			c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[tc.outcome == jobSucceeded], tc.reason)
			require.Contains(t, c.Message, "attempt 2")
			require.NotContains(t, c.Message, "delete the Job", "T7: deleting a Job no longer retries")
			if tc.outcome != jobSucceeded {
				require.Contains(t, c.Message, finish.Add(retryBackoff(2)).UTC().Format(time.RFC3339), "says when the retry happens")
				require.Contains(t, c.Message, v1alpha1.AnnotationRetry, "and how to retry now")
			}
		})
	}
}

// T7: a finished apply Job that disappears (TTL, kubectl delete, pruning)
// never runs its generation again: the record in status decides. A failed
// one is retried only after its backoff, with a new attempt.
func TestSyncT7NoRerunAfterFinishedJobDeleted(t *testing.T) {
	for _, outcome := range []jobOutcome{jobSucceeded, jobFailed} {
		t.Run(map[jobOutcome]string{jobSucceeded: "succeeded", jobFailed: "failed"}[outcome], func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, outcome, epoch.Add(-time.Minute), epoch)
			f.seedReady(c1, j)
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.NotNil(t, f.lastStatus().LastApply)
			f.catchUp()

			// The Job goes; only the stored status remembers it.
			require.NoError(t, f.Kube.Tracker().Delete(jobsGVR, testNS, j.Name))
			f.catchUp()
			require.NotNil(t, f.storedCluster("c1").Status.LastApply, "the record is in the stored status")

			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs(), "T7: the generation is not run again")
			for _, w := range f.writes() {
				require.Equal(t, "update terraformclusters/status "+testNS+"/c1", w, "no Job request")
			}
			if outcome == jobSucceeded {
				controllertest.RequireNothingQueued(t, f.c.queues[kindCluster], f.Clock, "a succeeded generation is never retried")
				require.NoError(t, f.sync(kindCluster, "c1"))
				require.Empty(t, f.createdJobs(), "not even a day later")
				return
			}
			f.Clock.Step(retryBackoff(1))
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Equal(t, []string{jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, 2)}, f.createdJobNames(),
				"after the backoff, attempt 2: never attempt 1 again")
		})
	}
}

// T7: a failed apply is retried with a new Job after 1m, 2m, 4m, ...
// at most 30m, each measured from the failed Job's finish time, and the
// key is requeued for that time; a new generation restarts the count.
func TestSyncT7FailedApplyBackoff(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	c1 := newCluster("c1", withFinalizer)
	f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch))
	key := cache.ObjectName{Namespace: testNS, Name: "c1"}
	want := []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 30 * time.Minute, 30 * time.Minute}
	for i, d := range want {
		attempt := i + 1
		finished := f.Clock.Now()
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs(), "attempt %d: no retry before its backoff", attempt)
		st := f.lastStatus()
		require.Equal(t, int32(attempt), st.LastApply.Attempt)
		c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
		require.Contains(t, c.Message, finished.Add(d).UTC().Format(time.RFC3339))
		f.catchUp()
		if i == 0 {
			// The key comes back when the backoff ends, on the clock.
			controllertest.RequireRequeuedAfter(t, f.c.queues[kindCluster], f.Clock, key, d)
		} else {
			f.Clock.Step(d - time.Second)
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs(), "attempt %d: one second before its backoff of %s ends", attempt, d)
			f.Clock.Step(time.Second)
		}
		require.NoError(t, f.sync(kindCluster, "c1"))
		name := jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, attempt+1)
		require.Equal(t, []string{name}, f.createdJobNames(), "attempt %d after %s", attempt+1, d)
		require.Equal(t, strconv.Itoa(attempt+1), f.createdJobs()[0].Annotations[v1alpha1.AnnotationJobAttempt])
		requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
		f.catchUp()
		f.Clock.Step(time.Minute) // the run takes a while
		f.finishAt(name, jobFailed)
		f.catchUp()
	}

	// A new generation starts at once, as attempt 1, and its failure
	// backs off one minute again.
	f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Generation = 2 })
	require.NoError(t, f.sync(kindCluster, "c1"))
	gen2 := jobs.Name(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 2)
	require.Equal(t, []string{gen2}, f.createdJobNames(), "a new generation runs at once")
	f.catchUp()
	f.finishAt(gen2, jobFailed)
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs())
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	require.Contains(t, c.Message, f.Clock.Now().Add(time.Minute).UTC().Format(time.RFC3339), "the count restarted")
	f.catchUp()
	f.Clock.Step(time.Minute)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, []string{jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 2, 2)}, f.createdJobNames())
}

// T7: a new value of captf.io/retry runs the apply once more at once,
// whatever the last outcome; the value acted on is kept in status and on
// the Job, and the same value never runs again.
func TestSyncT7RetryAnnotationApply(t *testing.T) {
	for _, outcome := range []jobOutcome{jobSucceeded, jobFailed} {
		t.Run(map[jobOutcome]string{jobSucceeded: "after success", jobFailed: "during backoff"}[outcome], func(t *testing.T) {
			f := newFixture(t)
			f.stampJobCreation()
			c1 := newCluster("c1", withFinalizer)
			f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, outcome, epoch.Add(-time.Minute), epoch))
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs())
			f.catchUp()

			f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { retryAnnotation("2026-12-01T10:00")(c) })
			require.NoError(t, f.sync(kindCluster, "c1"))
			name := jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, 2)
			require.Equal(t, []string{name}, f.createdJobNames(), "the retry runs at once")
			require.Equal(t, "2026-12-01T10:00", f.createdJobs()[0].Annotations[v1alpha1.AnnotationRetry])
			require.Equal(t, "2026-12-01T10:00", f.lastStatus().ObservedRetry)
			f.catchUp()
			f.finishAt(name, jobSucceeded)
			f.catchUp()

			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs(), "the value was acted on")
			require.Equal(t, int32(2), f.lastStatus().LastApply.Attempt)
			f.catchUp()

			f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { retryAnnotation("again")(c) })
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Equal(t, []string{jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, 3)}, f.createdJobNames())
		})
	}
}

// T7: the retry value a Job was started for counts as acted on even when
// the status write that recorded it was lost; a long value is kept hashed.
func TestSyncT7RetryRecordHeals(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, v := range []string{"one", long} {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer, retryAnnotation(v))
		j := attemptJob(c1, v1alpha1.JobActionApply, 1, 2, jobSucceeded, epoch.Add(-time.Minute), epoch)
		j.Annotations[v1alpha1.AnnotationRetry] = retryToken(v)
		f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-time.Hour)), j)

		require.NoError(t, f.sync(kindCluster, "c1"))

		require.Empty(t, f.createdJobs())
		got := f.lastStatus().ObservedRetry
		require.Equal(t, retryToken(v), got)
		require.LessOrEqual(t, len(got), maxRetryToken)
	}
	require.True(t, strings.HasPrefix(retryToken(long), "sha256:"))
	require.NotEqual(t, retryToken(long), retryToken(long+"y"))
}

// T7: a failed destroy is retried with a new destroy Job after its
// backoff, and at once on a new captf.io/retry value; its record in
// status.lastDestroy keeps the backoff when the Job is gone.
func TestSyncT7DestroyRetry(t *testing.T) {
	destroyJob := func(c *v1alpha1.TerraformCluster, n int) *batchv1.Job {
		return attemptJob(c, v1alpha1.JobActionDestroy, 1, n, jobFailed, epoch.Add(-time.Minute), epoch)
	}
	apply := func(c *v1alpha1.TerraformCluster) *batchv1.Job {
		return attemptJob(c, v1alpha1.JobActionApply, 1, 1, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-time.Hour))
	}
	attempt2 := func(c *v1alpha1.TerraformCluster) string {
		return jobs.AttemptName(kindCluster, "c1", c.UID, v1alpha1.JobActionDestroy, 1, 2)
	}

	t.Run("backoff", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		f.seedReady(c1, apply(c1), destroyJob(c1, 1))
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes(), "no destroy Job before the backoff")
		st := f.lastStatus()
		require.Equal(t, v1alpha1.RunFailed, st.LastDestroy.Outcome)
		c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed)
		require.Contains(t, c.Message, epoch.Add(time.Minute).UTC().Format(time.RFC3339))
		f.catchUp()
		controllertest.RequireRequeuedAfter(t, f.c.queues[kindCluster], f.Clock, cache.ObjectName{Namespace: testNS, Name: "c1"}, time.Minute)
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Equal(t, []string{attempt2(c1)}, f.createdJobNames())
		require.Equal(t, "destroy", f.createdJobs()[0].Annotations[v1alpha1.AnnotationJobAction])
	})

	t.Run("retry annotation", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting, retryAnnotation("now"))
		f.seedReady(c1, apply(c1), destroyJob(c1, 1))
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Equal(t, []string{attempt2(c1)}, f.createdJobNames(), "the pending destroy runs at once")
		require.Equal(t, "now", f.lastStatus().ObservedRetry)
	})

	t.Run("job gone", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting, func(c *v1alpha1.TerraformCluster) {
			c.Status.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "a", Outcome: v1alpha1.RunSucceeded, FinishTime: metav1.NewTime(epoch.Add(-time.Hour)), Attempt: 1}
			c.Status.LastDestroy = &v1alpha1.RunRecord{Generation: 1, JobName: "d", Outcome: v1alpha1.RunFailed, FinishTime: metav1.NewTime(epoch), Attempt: 3}
		})
		f.seedReady(c1)
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs(), "T7: a failed destroy whose Job is gone still backs off")
		f.Clock.Step(retryBackoff(3))
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Equal(t, []string{jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1, 4)}, f.createdJobNames())
	})
}

// T7: finished Jobs are pruned to the newest 3 succeeded and 3 failed per
// object and action, with background propagation; the decision comes
// from the cache, so a pass with nothing to prune makes no Job request.
func TestSyncT7PrunesFinishedJobs(t *testing.T) {
	t.Run("apply", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer, generation(10))
		var seeded []any
		var want []string
		for g := int64(1); g <= 10; g++ {
			outcome := jobFailed
			if g > 5 {
				outcome = jobSucceeded
			}
			j := attemptJob(c1, v1alpha1.JobActionApply, g, 1, outcome, epoch.Add(time.Duration(g-20)*time.Minute), epoch.Add(time.Duration(g-19)*time.Minute))
			seeded = append(seeded, j)
			if g == 1 || g == 2 || g == 6 || g == 7 {
				want = append(want, j.Name)
			}
		}
		f.seedReady(c1, seeded...)

		require.NoError(t, f.sync(kindCluster, "c1"))

		require.Empty(t, f.createdJobs())
		requirePruned(t, f, want)
		require.Equal(t, int64(10), f.lastStatus().LastApply.Generation, "the newest is recorded and kept")
		f.catchUp()
		require.Len(t, f.inf.Jobs.Informer().GetIndexer().List(), 6)

		f.Kube.ClearActions()
		require.NoError(t, f.sync(kindCluster, "c1"))
		requireNoJobRequest(t, f)
	})

	t.Run("per action", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		seeded := []any{}
		var want []string
		for n := 1; n <= 4; n++ {
			a := attemptJob(c1, v1alpha1.JobActionApply, 1, n, jobSucceeded, epoch.Add(time.Duration(n-60)*time.Minute), epoch.Add(time.Duration(n-60)*time.Minute))
			d := attemptJob(c1, v1alpha1.JobActionDestroy, 1, n, jobFailed, epoch.Add(time.Duration(n-10)*time.Minute), epoch.Add(time.Duration(n-4)*time.Minute))
			seeded = append(seeded, a, d)
			if n == 1 {
				want = append(want, a.Name, d.Name)
			}
		}
		f.seedReady(c1, seeded...)

		require.NoError(t, f.sync(kindCluster, "c1"))

		require.Empty(t, f.createdJobs(), "destroy attempt 4 is in its backoff")
		requirePruned(t, f, want)
		f.catchUp()
		f.Kube.ClearActions()
		require.NoError(t, f.sync(kindCluster, "c1"))
		requireNoJobRequest(t, f)
	})
}

// requirePruned checks exactly the Jobs named were deleted, each with
// background propagation and its UID as precondition.
func requirePruned(t *testing.T, f *fixture, names []string) {
	t.Helper()
	var got []string
	for _, a := range f.allActions() {
		if a.verb != "delete" || a.resource != "jobs" {
			continue
		}
		got = append(got, a.name)
		opts := a.raw.(k8stesting.DeleteActionImpl).DeleteOptions
		require.NotNil(t, opts.PropagationPolicy)
		require.Equal(t, metav1.DeletePropagationBackground, *opts.PropagationPolicy)
		require.NotNil(t, opts.Preconditions)
		require.Equal(t, types.UID("uid-job-"+a.name), *opts.Preconditions.UID)
	}
	require.ElementsMatch(t, names, got)
}

// requireNoJobRequest checks the fake clientset saw no Job request at all
// (not even a list).
func requireNoJobRequest(t *testing.T, f *fixture) {
	t.Helper()
	var jobRequests []string
	for _, a := range f.Kube.Actions() {
		if a.GetResource().Resource == "jobs" {
			jobRequests = append(jobRequests, a.GetVerb())
		}
	}
	require.Empty(t, jobRequests, "a steady pass makes no Job request")
}

// T7, J1: a destroy retry is confirmed from the API server before it
// starts: a retry Job the cache has not seen yet is found there, and no
// second Job starts.
func TestSyncT7DestroyRetryConfirmedUncached(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting, func(c *v1alpha1.TerraformCluster) {
		c.Status.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "a", Outcome: v1alpha1.RunSucceeded, FinishTime: metav1.NewTime(epoch.Add(-2 * time.Hour)), Attempt: 1}
		c.Status.LastDestroy = &v1alpha1.RunRecord{Generation: 1, JobName: "d", Outcome: v1alpha1.RunFailed, FinishTime: metav1.NewTime(epoch.Add(-time.Hour)), Attempt: 1}
	})
	f.seedReady(c1)
	running := attemptJob(c1, v1alpha1.JobActionDestroy, 1, 2, jobRunning, epoch, epoch)
	require.NoError(t, f.Kube.Tracker().Add(running), "in the API server only")

	require.NoError(t, f.sync(kindCluster, "c1"))

	require.Empty(t, f.createdJobs(), "the running retry was found uncached")
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
}

// T7, C6: the re-apply on rotation decides from status.lastApply, so it
// works when the apply Job is gone; an unchanged hash re-runs nothing.
func TestSyncT7C6FromRecord(t *testing.T) {
	for _, rotated := range []bool{true, false} {
		f := newFixture(t)
		old := oldData(f)
		recorded := credentials.SourceHash(old)
		if !rotated {
			recorded = credentials.SourceHash(sourceData())
		}
		c1 := reapplyCluster(true, func(c *v1alpha1.TerraformCluster) {
			c.Status.LastApply = &v1alpha1.RunRecord{Generation: 1, SourceHash: recorded, JobName: "gone", Outcome: v1alpha1.RunSucceeded, FinishTime: metav1.NewTime(epoch.Add(-time.Hour)), Attempt: 1}
		})
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(kindCluster, c1)))

		require.NoError(t, f.sync(kindCluster, "c1"))

		if !rotated {
			require.Empty(t, f.createdJobs(), "same credentials: the recorded generation does not run again")
			continue
		}
		js := f.createdJobs()
		require.Len(t, js, 1)
		require.Equal(t, jobs.ReapplyName(kindCluster, "c1", c1.UID, 1, 1), js[0].Name)
		require.Equal(t, "2", js[0].Annotations[v1alpha1.AnnotationJobAttempt], "a re-apply is the next attempt")
		require.Equal(t, credentials.SourceHash(sourceData()), js[0].Annotations[v1alpha1.AnnotationSourceHash])
	}
}
