package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/drift"
	"github.com/captf/captf/pkg/runresult"
)

// Tests of SPEC O7 in the reconcile: the drift Job after the interval,
// DriftDetected from its result document, and nothing in between.

const driftInterval = 30 * time.Minute

func withDriftDefault(d time.Duration) func(*Options) {
	return func(o *Options) { o.DriftDefaultInterval = d }
}

// driftDoc is the runner's document of a drift check that found found.
func driftDoc(t *testing.T, found *runresult.Drift) string {
	t.Helper()
	b, err := (&runresult.Result{
		Version: runresult.Version, Operation: runresult.OperationDrift, Image: moduleImage,
		Steps: []runresult.Step{{Name: "init"}, {Name: "refresh"}, {Name: "plan", ExitCode: 2}},
		Drift: found,
	}).Marshal()
	require.NoError(t, err)
	return string(b)
}

// appliedCluster seeds c1, applied (its apply Job succeeded at finish),
// and syncs the pass that records it; the caches then catch up.
func (f *fixture) appliedCluster(finish time.Time, mods ...any) *v1alpha1.TerraformCluster {
	f.t.Helper()
	c1 := newCluster("c1", append([]any{withFinalizer}, mods...)...)
	f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish))
	require.NoError(f.t, f.sync(kindCluster, "c1"))
	require.Empty(f.t, f.createdJobs(), "no Job: the apply has just finished")
	f.catchUp()
	f.PopEvents()
	return c1
}

// driftDue is when c1's first check is due after an apply at finish.
func driftDue(c1 *v1alpha1.TerraformCluster, finish time.Time, interval time.Duration) time.Time {
	return finish.Add(interval + drift.Jitter(string(c1.UID), interval))
}

// finishDrift finishes the created drift Job with a pod whose message is
// doc, as the Job controller and the kubelet would, and lets the caches
// see it.
func (f *fixture) finishDrift(j *batchv1.Job, outcome jobOutcome, doc string) {
	f.t.Helper()
	f.finishAt(j.Name, outcome)
	o, err := f.Kube.Tracker().Get(jobsGVR, testNS, j.Name)
	require.NoError(f.t, err)
	stored := o.(*batchv1.Job)
	if stored.UID == "" {
		stored = stored.DeepCopy()
		stored.UID = types.UID("uid-job-" + j.Name)
		require.NoError(f.t, f.Kube.Tracker().Update(jobsGVR, stored, testNS))
	}
	exit := int32(0)
	if outcome != jobSucceeded {
		exit = 1
	}
	f.seed(runPod(stored, j.Name+"-pod", true, exit, doc))
	f.catchUp()
}

// O7: no drift Job before the interval (and its jitter) has passed since
// the apply, and those passes write nothing; then one drift Job, at
// Background priority, running `captf runner drift`; ApplyJobSucceeded
// stays as the apply left it while it runs.
func TestSyncO7DriftJobAfterInterval(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval))
	f.stampJobCreation()
	finish := epoch.Add(-time.Minute)
	c1 := f.appliedCluster(finish)
	key := cache.ObjectName{Namespace: testNS, Name: "c1"}
	due := driftDue(c1, finish, driftInterval)

	// The recording pass requeued the key for the time it is due.
	controllertest.RequireRequeuedAfter(t, f.c.queues[kindCluster], f.Clock, key, due.Sub(epoch))
	f.Clock.SetTime(due.Add(-time.Second))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.writes(), "not due: no Job, no write")

	f.Clock.SetTime(due)
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "actions: %v", f.allActions())
	j := created[0]
	require.Equal(t, v1alpha1.JobActionDrift, jobs.ActionOf(j))
	require.Equal(t, jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionDrift, 1, 1), j.Name)
	require.Contains(t, strings.Join(j.Spec.Template.Spec.Containers[0].Command, " "), "runner drift")
	require.Equal(t, &v1alpha1.JobReference{Name: j.Name, Action: v1alpha1.JobActionDrift, Generation: 1}, f.lastStatus().LastJob)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// While it runs: one Job at a time, the apply's condition unchanged.
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "one drift Job at a time")
	require.Empty(t, f.writes(), "a running drift Job changes no condition")
}

// O7: the drift Job's result document becomes status.lastDriftCheck,
// status.lastRun.drift and DriftDetected (True with the resources named,
// then False/NoDrift and DriftResolved); the next check is an interval
// after the check; steady passes write nothing.
func TestSyncO7DriftDetectedFromResult(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval))
	f.stampJobCreation()
	finish := epoch.Add(-time.Minute)
	c1 := f.appliedCluster(finish)
	f.Clock.SetTime(driftDue(c1, finish, driftInterval))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Len(t, f.createdJobs(), 1)
	j := f.createdJobs()[0]
	f.catchUp()

	found := &runresult.Drift{Changes: runresult.Changes{Update: 1, Delete: 1}, Resources: []string{"terraform_data.server", "aws_instance.b"}}
	f.finishDrift(j, jobSucceeded, driftDoc(t, found))
	require.NoError(t, f.sync(kindCluster, "c1"))
	st := f.lastStatus()
	require.NotNil(t, st.LastDriftCheck)
	require.Equal(t, j.Name, st.LastDriftCheck.JobName)
	require.Equal(t, v1alpha1.JobActionDrift, st.LastRun.Operation)
	require.Equal(t, &v1alpha1.RunDrift{RunChanges: v1alpha1.RunChanges{Update: 1, Delete: 1}, Resources: []string{"terraform_data.server", "aws_instance.b"}}, st.LastRun.Drift)
	cond := requireCondition(t, st, v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported)
	require.Contains(t, cond.Message, "0 to create, 1 to update, 0 to replace, 1 to delete (terraform_data.server, aws_instance.b)")
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	events := f.PopEvents()
	require.Contains(t, eventReasons(events), "Warning "+v1alpha1.EventDriftDetected)

	// Steady: nothing due, nothing written, no event.
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.writes(), "steady: no write")
	require.Empty(t, f.PopEvents())

	// The next check is due an interval after this one finished.
	checked := st.LastDriftCheck.FinishTime.Time
	next := driftDue(c1, checked, driftInterval)
	f.Clock.SetTime(next.Add(-time.Second))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs())
	f.Clock.SetTime(next)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Len(t, f.createdJobs(), 1)
	j2 := f.createdJobs()[0]
	require.Equal(t, jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionDrift, 1, 2), j2.Name)
	f.catchUp()
	f.finishDrift(j2, jobSucceeded, driftDoc(t, &runresult.Drift{}))
	require.NoError(t, f.sync(kindCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDriftDetected, metav1.ConditionFalse, v1alpha1.ReasonNoDrift)
	require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventDriftResolved)
}

// O7: a drift Job that fails says DriftDetected=Unknown/DriftNotChecked,
// never touches ApplyJobSucceeded, and is not retried before the next
// interval.
func TestSyncO7FailedDriftCheck(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval))
	f.stampJobCreation()
	finish := epoch.Add(-time.Minute)
	c1 := f.appliedCluster(finish)
	f.Clock.SetTime(driftDue(c1, finish, driftInterval))
	require.NoError(t, f.sync(kindCluster, "c1"))
	j := f.createdJobs()[0]
	f.catchUp()
	doc, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationDrift,
		Steps: []runresult.Step{{Name: "init"}, {Name: "refresh", ExitCode: 1}},
		Error: &runresult.Error{Kind: runresult.KindStep, Step: "refresh", Tail: "Error: provider unreachable"}}).Marshal()
	require.NoError(t, err)
	f.finishDrift(j, jobFailed, string(doc))
	require.NoError(t, f.sync(kindCluster, "c1"))
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionDriftDetected, metav1.ConditionUnknown, v1alpha1.ReasonDriftNotChecked)
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	f.catchUp()
	f.Clock.Step(time.Minute)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "a failed check waits for the next interval")
}

// O7: interval 0 (the flag, or spec.drift.intervalSeconds) starts no
// drift Job however long the object stays applied; a spec interval wins
// over the flag.
func TestSyncO7DriftOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag time.Duration
		spec *int32
		want bool
	}{
		{"flag 0", 0, nil, false},
		{"spec 0 over the flag", driftInterval, ptr.To[int32](0), false},
		{"spec interval over flag 0", 0, ptr.To[int32](600), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withDriftDefault(tc.flag))
			f.appliedCluster(epoch.Add(-time.Minute), func(c *v1alpha1.TerraformCluster) {
				if tc.spec != nil {
					c.Spec.Drift = &v1alpha1.DriftSpec{IntervalSeconds: tc.spec}
				}
			})
			f.Clock.Step(24 * time.Hour)
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Equal(t, tc.want, len(f.createdJobs()) == 1, "actions: %v", f.allActions())
		})
	}
}

// O7, O4: a due drift check starts only below 80% of a cap, and waits
// without a condition or a write.
func TestSyncO7DriftBelowEightyPercent(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval), func(o *Options) { o.MaxActiveJobs = 5 })
	f.stampJobCreation()
	finish := epoch.Add(-time.Minute)
	// Four Jobs of four other clusters run (a slot counts a Job whose
	// controller exists, B2).
	var others []any
	for _, n := range []string{"b1", "b2", "b3", "b4"} {
		b := newCluster(n)
		f.seed(b)
		others = append(others, newJob(kindCluster, b, v1alpha1.JobActionApply, 1, jobRunning))
	}
	c1 := newCluster("c1", withFinalizer)
	f.seedReady(c1, append(others, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish))...)
	require.NoError(t, f.sync(kindCluster, "c1"))
	f.catchUp()
	f.Clock.SetTime(driftDue(c1, finish, driftInterval))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "4 of 5 slots taken: a Background Job waits")
	require.Empty(t, f.writes(), "the wait writes nothing")
	cond := meta.FindStatusCondition(f.statusOf(t, "c1").Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
	require.Equal(t, string(v1alpha1.ReasonApplySucceeded), cond.Reason)
}

// statusOf is the stored status of cluster name.
func (f *fixture) statusOf(t *testing.T, name string) *v1alpha1.WorkloadStatus {
	t.Helper()
	o, err := f.Captf.Tracker().Get(clustersGVR, testNS, name)
	require.NoError(t, err)
	return &o.(*v1alpha1.TerraformCluster).Status
}

// driftCycle runs one drift check of c1 that finds found: the clock to
// when it is due, the pass that starts it, its end, and the pass that
// records it. It returns the drift Job.
func (f *fixture) driftCycle(c1 *v1alpha1.TerraformCluster, found *runresult.Drift) *batchv1.Job {
	f.t.Helper()
	st := f.statusOf(f.t, "c1")
	last := st.LastApply.FinishTime.Time
	if chk := st.LastDriftCheck; chk != nil && chk.FinishTime.After(last) {
		last = chk.FinishTime.Time
	}
	f.Clock.SetTime(driftDue(c1, last, driftInterval))
	require.NoError(f.t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(f.t, created, 1, "actions: %v", f.allActions())
	j := created[0]
	require.Equal(f.t, v1alpha1.JobActionDrift, jobs.ActionOf(j))
	f.catchUp()
	f.Clock.Step(time.Minute)
	f.finishDrift(j, jobSucceeded, driftDoc(f.t, found))
	require.NoError(f.t, f.sync(kindCluster, "c1"))
	f.catchUp()
	return j
}

// finishApply ends the created apply Job j successfully a minute later.
func (f *fixture) finishApply(j *batchv1.Job) {
	f.t.Helper()
	f.catchUp()
	f.Clock.Step(time.Minute)
	f.finishAt(j.Name, jobSucceeded)
	f.catchUp()
	require.NoError(f.t, f.sync(kindCluster, "c1"))
	f.catchUp()
	f.PopEvents()
}

// O7 (A3-59): under Remediate, drift found starts an apply of the
// current generation (the next attempt, DriftRemediationStarted,
// DriftDetected=True/DriftRemediating); at most 3 in a row: the fourth
// drift is reported, not applied. A check that finds none ends the row.
func TestSyncO7RemediateAtMostThreeInARow(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval))
	f.stampJobCreation()
	c1 := f.appliedCluster(epoch.Add(-time.Minute), func(c *v1alpha1.TerraformCluster) {
		c.Spec.Drift = &v1alpha1.DriftSpec{Action: v1alpha1.DriftRemediate}
	})
	found := &runresult.Drift{Changes: runresult.Changes{Update: 1}, Resources: []string{"terraform_data.server"}}
	for n := 1; n <= 3; n++ {
		chk := f.driftCycle(c1, found)
		require.Equal(t, n-1, jobs.DriftRemediationOf(chk), "the drift Job carries the row so far")
		requireCondition(t, f.statusOf(t, "c1"), v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftRemediating)
		f.PopEvents()
		require.NoError(t, f.sync(kindCluster, "c1"))
		created := f.createdJobs()
		require.Len(t, created, 1, "remediation %d: actions %v", n, f.allActions())
		apply := created[0]
		require.Equal(t, v1alpha1.JobActionApply, jobs.ActionOf(apply))
		require.Equal(t, n, jobs.DriftRemediationOf(apply))
		require.Equal(t, n+1, jobs.AttemptOf(apply), "the next attempt of generation 1")
		require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventDriftRemediationStarted)
		f.finishApply(apply)
		require.Equal(t, int32(n), f.statusOf(t, "c1").LastApply.DriftRemediation, "%+v", f.statusOf(t, "c1").LastApply)
	}
	// The fourth: reported, not applied.
	f.driftCycle(c1, found)
	cond := requireCondition(t, f.statusOf(t, "c1"), v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported)
	require.Contains(t, cond.Message, "3 applies in a row did not remove it")
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "the cap holds")
	require.Empty(t, f.writes())

	// A clean check ends the row: the next drift starts from 0 again.
	f.driftCycle(c1, &runresult.Drift{})
	requireCondition(t, f.statusOf(t, "c1"), v1alpha1.ConditionDriftDetected, metav1.ConditionFalse, v1alpha1.ReasonNoDrift)
	chk := f.driftCycle(c1, found)
	require.Zero(t, jobs.DriftRemediationOf(chk))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Len(t, f.createdJobs(), 1, "remediation again after a clean check")
	require.Equal(t, 1, jobs.DriftRemediationOf(f.createdJobs()[0]))
}

// O7: Report (the default) never applies on drift.
func TestSyncO7ReportNeverApplies(t *testing.T) {
	f := newFixture(t, withDriftDefault(driftInterval))
	f.stampJobCreation()
	c1 := f.appliedCluster(epoch.Add(-time.Minute))
	f.driftCycle(c1, &runresult.Drift{Changes: runresult.Changes{Delete: 1}, Resources: []string{"aws_instance.a"}})
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs())
	requireCondition(t, f.statusOf(t, "c1"), v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported)
}

// K11, O7: a recorded drift Job that is gone from the cache is not taken
// for one starting: the block-move mark can go.
func TestJobActiveO7RecordedDriftJob(t *testing.T) {
	w := wrapCluster(newCluster("c1"))
	w.status.LastJob = &v1alpha1.JobReference{Name: "c1-drift-1-x", Action: v1alpha1.JobActionDrift, Generation: 1}
	require.True(t, jobActive(w, jobSet{}), "not cached, not recorded: may be starting")
	w.status.LastDriftCheck = &v1alpha1.RunRecord{Generation: 1, JobName: "c1-drift-1-x", Outcome: v1alpha1.RunSucceeded, Attempt: 1}
	require.False(t, jobActive(w, jobSet{}), "recorded: finished")
}
