package workload

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/pkg/statebackup"
)

// Tests of SPEC O5's restore in the reconcile: captf.io/restore-state
// runs one restore Job per value, refuses a serial that is not kept, and
// waits for a running Job.

// restoreCount reads captf_state_restores_total{result}.
func restoreCount(t *testing.T, result string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() != "captf_state_restores_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			if m.GetLabel()[0].GetValue() == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("captf_state_restores_total{result=%q} is not registered", result)
	return 0
}

// withBackups lists serials as the cluster's kept backups, the second
// one split in two parts.
func withBackups(serials ...int64) func(*v1alpha1.TerraformCluster) {
	return func(c *v1alpha1.TerraformCluster) {
		for i, s := range serials {
			b := v1alpha1.StateBackup{Serial: s, SecretName: statebackup.Name(jobs.StateSuffix(kindCluster, c.Name), s), TakenAt: metav1.NewTime(epoch)}
			if i == 1 {
				b.Parts = 2
			}
			c.Status.StateBackups = append(c.Status.StateBackups, b)
		}
	}
}

func (f *fixture) annotateRestore(v string) {
	f.editCluster("c1", func(c *v1alpha1.TerraformCluster) {
		a := c.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AnnotationRestoreState] = v
		c.SetAnnotations(a)
	})
}

func restoreDoc(t *testing.T) string {
	t.Helper()
	b, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationRestore, Image: moduleImage,
		Steps: []runresult.Step{{Name: "init"}, {Name: "state-push"}, {Name: "state-list"}}}).Marshal()
	require.NoError(t, err)
	return string(b)
}

// O5 (A3-44): a new captf.io/restore-state value naming a kept backup
// starts one restore Job, `captf runner restore` with the backup's
// Secrets mounted (every part of a split state, named, never copied into
// the Job); while it runs no second Job starts; its success is recorded
// (status.lastRestore, RestoreJobSucceeded True, a StateRestored event
// naming the serial, the metric) and starts no apply; later passes for
// the same value start nothing.
func TestSyncO5RestoreOncePerSerial(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	finish := epoch.Add(-time.Minute)
	c1 := f.appliedCluster(finish, withBackups(5, 4, 3))
	succeeded := restoreCount(t, "succeeded")

	f.annotateRestore("4")
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "actions: %v", f.allActions())
	j := created[0]
	require.Equal(t, v1alpha1.JobActionRestore, jobs.ActionOf(j))
	require.Equal(t, jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionRestore, 1, 1), j.Name)
	require.Equal(t, "4", j.Annotations[v1alpha1.AnnotationJobRestoreSerial])
	cmd := strings.Join(j.Spec.Template.Spec.Containers[0].Command, " ")
	require.Contains(t, cmd, "runner restore")
	require.Contains(t, cmd, "--restore-chunks="+jobs.RestoreDir)
	var names []string
	for _, v := range j.Spec.Template.Spec.Volumes {
		if v.Name == jobs.RestoreVolumeName {
			for i, src := range v.Projected.Sources {
				names = append(names, src.Secret.Name)
				require.Equal(t, []string{"tfstate", string(rune('0' + i))}, []string{src.Secret.Items[0].Key, src.Secret.Items[0].Path})
			}
		}
	}
	require.Equal(t, []string{"captf-state-backup-c1-cluster-4", "captf-state-backup-c1-cluster-4-part-1"}, names)
	st := f.lastStatus()
	require.Equal(t, "4", st.ObservedRestore)
	require.Equal(t, int64(4), *st.LastRestoredSerial)
	requireCondition(t, st, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreRunning)
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// Running: one Job at a time.
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "one restore Job at a time")
	f.PopEvents()

	f.finishDrift(j, jobSucceeded, restoreDoc(t))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "a restore starts no apply by itself")
	st = f.lastStatus()
	require.Equal(t, j.Name, st.LastRestore.JobName)
	require.Empty(t, st.LastRestore.SourceHash, "X1: only an apply's record keeps the source hash (C6)")
	require.Equal(t, v1alpha1.JobActionRestore, st.LastRun.Operation)
	cond := requireCondition(t, st, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonStateRestored)
	require.Contains(t, cond.Message, "serial 4")
	events := strings.Join(f.PopEvents(), "\n")
	require.Contains(t, events, "Normal "+v1alpha1.EventStateRestored)
	require.Contains(t, events, "state backup serial 4")
	require.Equal(t, succeeded+1, restoreCount(t, "succeeded"))

	// Steady, and a resync: nothing starts, nothing is written.
	f.catchUp()
	for range 2 {
		require.NoError(t, f.sync(kindCluster, "c1"))
		require.Empty(t, f.createdJobs())
		require.Empty(t, f.writes(), "steady: no write")
	}
	require.Equal(t, succeeded+1, restoreCount(t, "succeeded"), "counted once")
	f.checkNoSecretLeak()
}

// O5: a restore Job whose status write was lost (a restart before the
// write) is not started again for the value: the Job's serial counts as
// acted on, and status.observedRestore heals.
func TestSyncO5RestoreJobHealsLostWrite(t *testing.T) {
	f := newFixture(t)
	finish := epoch.Add(-time.Minute)
	c1 := newCluster("c1", withFinalizer, withBackups(5, 4), func(c *v1alpha1.TerraformCluster) {
		c.Annotations = map[string]string{v1alpha1.AnnotationRestoreState: "5"}
	})
	restore := attemptJob(c1, v1alpha1.JobActionRestore, 1, 1, jobFailed, finish, finish)
	restore.Annotations[v1alpha1.AnnotationJobRestoreSerial] = "5"
	f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Hour), finish.Add(-time.Hour)), restore)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "a failed restore is not retried for the same serial")
	st := f.lastStatus()
	require.Equal(t, "5", st.ObservedRestore)
	requireCondition(t, st, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRestoreFailed)
	require.Contains(t, strings.Join(f.PopEvents(), "\n"), "Warning "+v1alpha1.EventStateRestoreFailed)
}

// O5: a value that names no kept backup, or no serial, is refused once
// (RestoreJobSucceeded False/RestoreBackupNotFound, a Warning, the metric)
// with no Job; the refusal is not repeated on later passes.
func TestSyncO5RestoreRefused(t *testing.T) {
	for _, v := range []string{"9", "latest"} {
		t.Run(v, func(t *testing.T) {
			f := newFixture(t)
			f.appliedCluster(epoch.Add(-time.Minute), withBackups(5, 4))
			refused := restoreCount(t, "refused")
			f.annotateRestore(v)
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs())
			st := f.lastStatus()
			require.Equal(t, v, st.ObservedRestore)
			cond := requireCondition(t, st, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRestoreBackupNotFound)
			require.Contains(t, cond.Message, "[5 4]")
			require.Contains(t, strings.Join(f.PopEvents(), "\n"), "Warning "+v1alpha1.EventStateRestoreFailed)
			require.Equal(t, refused+1, restoreCount(t, "refused"))

			f.catchUp()
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Empty(t, f.createdJobs())
			require.Empty(t, f.writes())
			require.Empty(t, f.PopEvents())
		})
	}
}

// O5, J1: a restore waits for a running Job of the object (never two Jobs
// on one state), then starts.
func TestSyncO5RestoreWaitsForRunningJob(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	c1 := newCluster("c1", withFinalizer, withBackups(3), func(c *v1alpha1.TerraformCluster) {
		c.Annotations = map[string]string{v1alpha1.AnnotationRestoreState: "3"}
	})
	running := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobRunning, epoch, epoch)
	f.seedReady(c1, running)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "waits for the apply")
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreWaiting)
	require.Empty(t, f.lastStatus().ObservedRestore, "not acted on yet")

	f.catchUp()
	f.finishAt(running.Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "actions: %v", f.allActions())
	require.Equal(t, v1alpha1.JobActionRestore, jobs.ActionOf(created[0]))
}

// O5: before any apply has finished the object's backups are not known
// (an adoption lists them on the first apply): the value waits, neither
// refused nor acted on.
func TestSyncO5RestoreWaitsForFirstApply(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) {
		c.Annotations = map[string]string{v1alpha1.AnnotationRestoreState: "3"}
	})
	f.seedReady(c1)
	require.NoError(t, f.sync(kindCluster, "c1"))
	for _, j := range f.createdJobs() {
		require.NotEqual(t, v1alpha1.JobActionRestore, jobs.ActionOf(j))
	}
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreWaiting)
	require.Empty(t, st.ObservedRestore)
	require.NotContains(t, strings.Join(f.PopEvents(), "\n"), v1alpha1.EventStateRestoreFailed)
}
