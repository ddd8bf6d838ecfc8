package workload

import (
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	basemetrics "k8s.io/component-base/metrics"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/metrics"
)

// Tests of the T7 metrics: captf_job_runs_total, captf_job_retries_total
// and captf_jobs_pruned_total move by exactly what a pass did, and a pass
// that finds what an earlier one (or an earlier process) recorded moves
// nothing. The counters are process-wide, so each test compares deltas.

// jobCounters is a reading of every series of the three Job counters.
type jobCounters map[string]float64

var (
	metricActions  = []string{metrics.ActionApply, metrics.ActionDestroy, "unknown"}
	metricOutcomes = []string{metrics.OutcomeSucceeded, metrics.OutcomeFailed, metrics.OutcomeDeadlineExceeded, metrics.OutcomeInterrupted, metrics.OutcomePlanChanged, metrics.OutcomeDestructive}
	metricTriggers = []string{metrics.TriggerBackoff, metrics.TriggerAnnotation, metrics.TriggerInterrupt}
)

// readJobCounters reads the counters; keys are "runs <action> <outcome>",
// "retries <action> <trigger>" and "pruned <action>".
func readJobCounters(t *testing.T) jobCounters {
	t.Helper()
	out := jobCounters{}
	read := func(key string, m basemetrics.CounterMetric) {
		pb := &dto.Metric{}
		mm, ok := m.(basemetrics.Metric)
		require.True(t, ok, "%s: not registered (%T)", key, m)
		require.NoError(t, mm.Write(pb), key)
		out[key] = pb.GetCounter().GetValue()
	}
	for _, a := range metricActions {
		for _, o := range metricOutcomes {
			read("runs "+a+" "+o, metrics.JobRuns.WithLabelValues(a, o))
		}
		for _, tr := range metricTriggers {
			read("retries "+a+" "+tr, metrics.JobRetries.WithLabelValues(a, tr))
		}
		read("pruned "+a, metrics.JobsPruned.WithLabelValues(a))
	}
	return out
}

// requireMoved checks that since the reading from, exactly the series in
// want moved, each by its amount, and no other.
func requireMoved(t *testing.T, from jobCounters, want map[string]float64, msg string) {
	t.Helper()
	got := map[string]float64{}
	for k, v := range readJobCounters(t) {
		if d := v - from[k]; d != 0 {
			got[k] = d
		}
	}
	if want == nil {
		want = map[string]float64{}
	}
	require.Equal(t, want, got, msg)
}

// T7: each newly recorded run counts once, by action and outcome, when the
// status write that records it succeeds; passes that find it again (the
// cache behind the write, or caught up) count nothing.
func TestSyncT7MetricsRunRecordedOnce(t *testing.T) {
	for _, tc := range []struct {
		outcome jobOutcome
		label   string
	}{
		{jobSucceeded, metrics.OutcomeSucceeded},
		{jobFailed, metrics.OutcomeFailed},
		{jobDeadlineExceeded, metrics.OutcomeDeadlineExceeded},
	} {
		t.Run(tc.label, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, tc.outcome, epoch.Add(-time.Minute), epoch))
			from := readJobCounters(t)

			require.NoError(t, f.sync(kindCluster, "c1"))
			require.NotNil(t, f.lastStatus().LastApply)
			want := map[string]float64{"runs apply " + tc.label: 1}
			requireMoved(t, from, want, "the recorded run counts once")

			// The cache has not seen the write yet: the pass records the
			// run again in memory, but it is what this process wrote.
			require.NoError(t, f.sync(kindCluster, "c1"))
			requireMoved(t, from, want, "a pass behind the cache counts nothing more")

			f.catchUp()
			require.NoError(t, f.sync(kindCluster, "c1"))
			f.Clock.Step(retryBackoff(1) / 2) // within a failure's backoff: no retry
			f.catchUp()
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs())
			requireMoved(t, from, want, "steady passes over the record count nothing")
		})
	}
}

// T7: a record already in the stored status when the manager starts (a new
// process, its cache read afresh) is not counted again, even on a pass that
// writes the status.
func TestSyncT7MetricsRecordInStatusAtStart(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	rec := recordOf(j, epoch)
	c1.Status.LastApply = rec
	f.seedReady(c1, j)
	from := readJobCounters(t)

	require.NoError(t, f.sync(kindCluster, "c1"))

	require.NotEmpty(t, f.statusWrites(), "the pass wrote status (its conditions)")
	require.Equal(t, rec.JobName, f.lastStatus().LastApply.JobName)
	requireMoved(t, from, nil, "a run recorded by an earlier process is not counted")

	// The same after this process's own write is forgotten (a restart).
	f.catchUp()
	f.c.written = loop.NewWritten[v1alpha1.WorkloadStatus]()
	f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Status.Conditions = nil }) // so the pass writes again
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.NotEmpty(t, f.statusWrites())
	requireMoved(t, from, nil, "nor after a restart")
}

// T7: a status write that fails records nothing and counts nothing; the
// pass that then writes the record counts it, once.
func TestSyncT7MetricsRunCountedOnWrite(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch))
	conflicts := 1
	f.Captf.PrependReactor("update", "terraformclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" || conflicts == 0 {
			return false, nil, nil
		}
		conflicts--
		return true, nil, apierrors.NewConflict(v1alpha1.Resource("terraformclusters"), "c1", fmt.Errorf("the object has been modified"))
	})
	from := readJobCounters(t)

	err := f.sync(kindCluster, "c1")
	require.True(t, apierrors.IsConflict(err), "%v", err)
	requireMoved(t, from, nil, "nothing is recorded yet")

	require.NoError(t, f.sync(kindCluster, "c1"))
	requireMoved(t, from, map[string]float64{"runs apply failed": 1}, "the write that records the run counts it")
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	requireMoved(t, from, map[string]float64{"runs apply failed": 1}, "once")
}

// T7: a failed apply retried after its backoff counts one backoff retry,
// on the creation of the retry Job; a new value of captf.io/retry counts
// one annotation retry; a new generation's first apply is no retry.
func TestSyncT7MetricsApplyRetries(t *testing.T) {
	t.Run("backoff", func(t *testing.T) {
		f := newFixture(t)
		f.stampJobCreation()
		c1 := newCluster("c1", withFinalizer)
		f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch))
		from := readJobCounters(t)
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		f.catchUp()
		f.Clock.Step(retryBackoff(1) - time.Second)
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		requireMoved(t, from, map[string]float64{"runs apply failed": 1}, "no retry during the backoff")

		f.Clock.Step(time.Second)
		require.NoError(t, f.sync(kindCluster, "c1"))
		attempt2 := jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, 2)
		require.Equal(t, []string{attempt2}, f.createdJobNames())
		want := map[string]float64{"runs apply failed": 1, "retries apply backoff": 1}
		requireMoved(t, from, want, "one retry Job, one backoff retry")

		// The cache has not seen the Job: the pass finds it in the API
		// server and starts nothing.
		f.resetActions()
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		requireMoved(t, from, want, "the same retry is not counted again")

		// Attempt 2 fails too; a new generation then runs at once, as its
		// attempt 1: not a retry.
		f.catchUp()
		f.finishAt(attempt2, jobFailed)
		f.catchUp()
		require.NoError(t, f.sync(kindCluster, "c1"))
		want["runs apply failed"]++
		requireMoved(t, from, want, "attempt 2's failure is recorded")
		f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Generation = 2 })
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Equal(t, []string{jobs.Name(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 2)}, f.createdJobNames())
		requireMoved(t, from, want, "a new generation's first apply is no retry")
	})

	for _, outcome := range []jobOutcome{jobSucceeded, jobFailed} {
		label := map[jobOutcome]string{jobSucceeded: metrics.OutcomeSucceeded, jobFailed: metrics.OutcomeFailed}[outcome]
		t.Run("annotation after "+label, func(t *testing.T) {
			f := newFixture(t)
			f.stampJobCreation()
			c1 := newCluster("c1", withFinalizer)
			f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, outcome, epoch.Add(-time.Minute), epoch))
			from := readJobCounters(t)
			require.NoError(t, f.sync(kindCluster, "c1"))
			f.catchUp()

			f.editCluster("c1", func(c *v1alpha1.TerraformCluster) { retryAnnotation("once")(c) })
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Len(t, f.createdJobs(), 1)
			want := map[string]float64{"runs apply " + label: 1, "retries apply annotation": 1}
			requireMoved(t, from, want, "one annotation retry")

			f.resetActions()
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs(), "found running uncached")
			f.catchUp()
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs())
			requireMoved(t, from, want, "the value acted on counts once")
		})
	}
}

// C6: a re-apply on rotation is not a retry (nor a new record).
func TestSyncT7MetricsReapplyIsNoRetry(t *testing.T) {
	f := newFixture(t)
	old := oldData(f)
	c1 := reapplyCluster(true, func(c *v1alpha1.TerraformCluster) {
		c.Status.LastApply = &v1alpha1.RunRecord{Generation: 1, SourceHash: credentials.SourceHash(old), JobName: "gone", Outcome: v1alpha1.RunFailed, FinishTime: metav1.NewTime(epoch), Attempt: 1}
	})
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(kindCluster, c1)))
	from := readJobCounters(t)

	require.NoError(t, f.sync(kindCluster, "c1"))

	require.Equal(t, []string{jobs.ReapplyName(kindCluster, "c1", c1.UID, 1, 1)}, f.createdJobNames())
	requireMoved(t, from, nil, "C6 re-applies during a backoff, and that is not a retry")
}

// T7: a failed destroy counts its outcome; its retry counts once, as
// backoff after its backoff or annotation on a new captf.io/retry value;
// the successful destroy counts once.
func TestSyncT7MetricsDestroy(t *testing.T) {
	apply := func(c *v1alpha1.TerraformCluster) *batchv1.Job {
		return attemptJob(c, v1alpha1.JobActionApply, 1, 1, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-time.Hour))
	}
	failed := func(c *v1alpha1.TerraformCluster) *batchv1.Job {
		return attemptJob(c, v1alpha1.JobActionDestroy, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	}

	t.Run("backoff", func(t *testing.T) {
		f := newFixture(t)
		f.stampJobCreation()
		c1 := newCluster("c1", deleting)
		f.seedReady(c1, apply(c1), failed(c1))
		from := readJobCounters(t)

		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		want := map[string]float64{"runs apply succeeded": 1, "runs destroy failed": 1}
		requireMoved(t, from, want, "both records are new to status")

		f.catchUp()
		f.Clock.Step(retryBackoff(1))
		require.NoError(t, f.sync(kindCluster, "c1"))
		attempt2 := jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1, 2)
		require.Equal(t, []string{attempt2}, f.createdJobNames())
		want["retries destroy backoff"] = 1
		requireMoved(t, from, want, "one destroy retry")
		f.resetActions()
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		requireMoved(t, from, want, "found running uncached: nothing more")

		f.catchUp()
		f.finishAt(attempt2, jobSucceeded)
		f.catchUp()
		require.NoError(t, f.sync(kindCluster, "c1"))
		want["runs destroy succeeded"] = 1
		requireMoved(t, from, want, "the successful destroy counts once")
	})

	t.Run("annotation", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting, retryAnnotation("now"))
		f.seedReady(c1, apply(c1), failed(c1))
		from := readJobCounters(t)

		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Len(t, f.createdJobs(), 1)
		want := map[string]float64{"runs apply succeeded": 1, "runs destroy failed": 1, "retries destroy annotation": 1}
		requireMoved(t, from, want, "the pending destroy runs at once, an annotation retry")
		require.NoError(t, f.sync(kindCluster, "c1"))
		requireMoved(t, from, want, "once")
	})
}

// T7: each pruned Job counts once by action; a Job already gone or
// replaced (NotFound, Conflict) was not pruned by this manager, and a
// steady pass prunes and counts nothing.
func TestSyncT7MetricsPruned(t *testing.T) {
	t.Run("apply", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer, generation(10))
		var seeded []any
		for g := int64(1); g <= 10; g++ {
			outcome := jobFailed
			if g > 5 {
				outcome = jobSucceeded
			}
			seeded = append(seeded, attemptJob(c1, v1alpha1.JobActionApply, g, 1, outcome, epoch.Add(time.Duration(g-20)*time.Minute), epoch.Add(time.Duration(g-19)*time.Minute)))
		}
		f.seedReady(c1, seeded...)
		from := readJobCounters(t)

		require.NoError(t, f.sync(kindCluster, "c1"))
		want := map[string]float64{"pruned apply": 4, "runs apply succeeded": 1}
		requireMoved(t, from, want, "4 pruned (2 succeeded, 2 failed beyond 3 each); the newest recorded")

		f.catchUp()
		require.NoError(t, f.sync(kindCluster, "c1"))
		requireMoved(t, from, want, "a steady pass prunes nothing")
	})

	t.Run("per action", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		var seeded []any
		for n := 1; n <= 4; n++ {
			seeded = append(seeded,
				attemptJob(c1, v1alpha1.JobActionApply, 1, n, jobSucceeded, epoch.Add(time.Duration(n-60)*time.Minute), epoch.Add(time.Duration(n-60)*time.Minute)),
				attemptJob(c1, v1alpha1.JobActionDestroy, 1, n, jobFailed, epoch.Add(time.Duration(n-10)*time.Minute), epoch.Add(time.Duration(n-4)*time.Minute)))
		}
		f.seedReady(c1, seeded...)
		from := readJobCounters(t)

		require.NoError(t, f.sync(kindCluster, "c1"))
		requireMoved(t, from, map[string]float64{"pruned apply": 1, "pruned destroy": 1, "runs apply succeeded": 1, "runs destroy failed": 1}, "one of each action")
	})

	t.Run("already gone", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer, generation(4))
		var seeded []any
		for g := int64(1); g <= 4; g++ {
			seeded = append(seeded, attemptJob(c1, v1alpha1.JobActionApply, g, 1, jobSucceeded, epoch.Add(time.Duration(g-20)*time.Minute), epoch.Add(time.Duration(g-19)*time.Minute)))
		}
		f.seedReady(c1, seeded...)
		f.prependKubeReactor("delete", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(batchv1.Resource("jobs"), a.(k8stesting.DeleteAction).GetName())
		})
		from := readJobCounters(t)

		require.NoError(t, f.sync(kindCluster, "c1"))
		_, deleted := f.find("delete", "jobs", "")
		require.True(t, deleted, "the oldest was to be pruned")
		requireMoved(t, from, map[string]float64{"runs apply succeeded": 1}, "a Job already gone is not counted as pruned")
	})
}

// The action label is one of a fixed set, whatever a Job's annotation says.
func TestActionLabel(t *testing.T) {
	require.Equal(t, metrics.ActionApply, actionLabel(v1alpha1.JobActionApply))
	require.Equal(t, metrics.ActionDestroy, actionLabel(v1alpha1.JobActionDestroy))
	require.Equal(t, "unknown", actionLabel("tenant-controlled"))
	require.Equal(t, metrics.OutcomeDeadlineExceeded, outcomeLabel(v1alpha1.RunDeadlineExceeded))
	require.Equal(t, metrics.OutcomeFailed, outcomeLabel(v1alpha1.RunFailed))
	require.Equal(t, metrics.OutcomeSucceeded, outcomeLabel(v1alpha1.RunSucceeded))
}
