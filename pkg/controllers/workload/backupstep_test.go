package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// finishedAt sets the time of j's finishing conditions (its record's
// finishTime, which orders the runs, T7).
func finishedAt(j *batchv1.Job, at time.Time) *batchv1.Job {
	for i := range j.Status.Conditions {
		j.Status.Conditions[i].LastTransitionTime = metav1.NewTime(at)
	}
	return j
}

// O5: a drift check (apply -refresh-only) and a failed apply can write a
// new serial too: after each such finished Job the state is read once,
// the new serial copied (the read, the copy's GET, the backup, the
// retention's LIST, as after a successful apply) and status.stateBackupJob
// names the Job; a second pass reads nothing. Fails without backupStep:
// only the successful apply's serial is backed up.
func TestO5BackupAfterDriftAndFailedApply(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t, withStateBackups(5))
	obj := f.applied(kind, 1)
	suffix := jobs.StateSuffix(kind, "obj")
	get := "get " + testNS + "/" + tfstate.SecretName(suffix)
	list := "list " + testNS + "/ " + statebackup.Selector(suffix).String()
	put := func(serial int64) {
		data := tfstatetest.Gzip(tfstatetest.StateSerial(serial, "", map[string]string{"id": `"x"`}))
		f.putState(stateSecretOf(kind, obj, "", data))
	}
	put(3)
	calls := f.countStateCalls()
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Equal(t, []int64{3}, serialsOf(f.lastStatus()), "the successful apply's serial (outputsStep)")
	require.Empty(t, f.lastStatus().StateBackupJob, "a successful apply is outputsSource's")
	calls.take()

	for i, step := range []struct {
		job    *batchv1.Job
		serial int64
	}{
		{newJob(kind, obj, v1alpha1.JobActionDrift, 1, jobSucceeded), 4},
		{newJob(kind, obj, v1alpha1.JobActionApply, 2, jobFailed), 5},
	} {
		t.Run(string(jobs.ActionOf(step.job)), func(t *testing.T) {
			f.Clock.Step(time.Minute)
			if jobs.ActionOf(step.job) == v1alpha1.JobActionApply {
				f.newGeneration(kind, obj, 2, jobFailed) // recorded as finished now
			} else {
				require.NoError(t, f.Kube.Tracker().Add(finishedAt(step.job, f.Clock.Now())))
			}
			put(step.serial)
			f.catchUp()
			require.NoError(t, f.sync(kind, "obj"))
			require.Equal(t, []string{get, get, "create " + testNS + "/" + statebackup.Name(suffix, step.serial), list}, calls.take(),
				"one read after the Job, its copy")
			st := f.lastStatus()
			require.Equal(t, step.job.Name, st.StateBackupJob)
			require.Len(t, st.StateBackups, i+2)
			require.Equal(t, step.serial, st.StateBackups[0].Serial)

			f.catchUp()
			require.NoError(t, f.sync(kind, "obj"))
			require.Empty(t, calls.take(), "read once per Job: a second pass reads no state")
		})
	}
}

// O5: a failed destroy can leave a new serial (what it destroyed before
// failing): it is backed up while the object waits in its deletion.
// Fails without backupStep.
func TestO5BackupAfterFailedDestroy(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t, withStateBackups(5))
	c1 := newCluster("c1", deleting)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(kind, c1)),
		newJob(kind, c1, v1alpha1.JobActionApply, 1, jobSucceeded),
		finishedAt(newJob(kind, c1, v1alpha1.JobActionDestroy, 1, jobFailed), epoch))
	suffix := jobs.StateSuffix(kind, "c1")
	f.putState(stateSecretOf(kind, c1, "", tfstatetest.Gzip(tfstatetest.StateSerial(7, "", nil))))
	f.catchUp()

	require.NoError(t, f.sync(kind, "c1"))
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed)
	require.Equal(t, []int64{7}, serialsOf(st))
	require.Equal(t, statebackup.Name(suffix, 7), st.StateBackups[0].SecretName)
	require.Equal(t, jobs.Name(kind, "c1", c1.UID, v1alpha1.JobActionDestroy, 1), st.StateBackupJob)
}

// O5: --state-backups=0 turns backups off: no state read after a drift
// check.
func TestO5NoBackupReadWhenOff(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t, withStateBackups(0))
	obj := f.applied(kind, 1)
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	calls := f.countStateCalls()
	f.Clock.Step(time.Minute)
	require.NoError(t, f.Kube.Tracker().Add(finishedAt(newJob(kind, obj, v1alpha1.JobActionDrift, 1, jobSucceeded), f.Clock.Now())))
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, calls.take())
	require.Empty(t, f.lastStatus().StateBackupJob)
}
