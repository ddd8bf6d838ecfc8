package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// runSecretDeletes counts the DELETEs of Job name's run Secret so far.
func (f *fixture) runSecretDeletes(name string) int {
	n := 0
	for _, w := range f.writes() {
		if w == "delete secrets "+testNS+"/"+jobs.RunSecretName(name) {
			n++
		}
	}
	return n
}

// K5: bootstrap data reaches the pod through a Secret of the run, deleted
// when the run finishes, whatever the Job's class: a drift check, a plan
// and a restore mount the run Secret too (their inputs include the saved
// bootstrap_data). Each finished Job's Secret is deleted once, on the
// pass that sees it finished, and never again: not once its record
// covers it, nor while no record does (a plan Job with no TerraformPlan
// is never recorded in status.lastPlan here: the memory of the deletion
// holds).
func TestK5EveryFinishedRunSecretDeleted(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action v1alpha1.JobAction
		mods   []any
	}{
		{"drift", v1alpha1.JobActionDrift, nil},
		{"plan", v1alpha1.JobActionPlan, nil},
		{"restore", v1alpha1.JobActionRestore, nil},
		{"drift of a paused object", v1alpha1.JobActionDrift, []any{pausedCluster}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			finish := epoch.Add(-30 * time.Minute)
			c1 := f.appliedCluster(finish, tc.mods...)
			apply := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish)
			f.showRuns = true
			f.resetActions()

			j := attemptJob(c1, tc.action, 1, 1, jobSucceeded, finish.Add(time.Minute), finish.Add(2*time.Minute))
			f.seed(j)
			require.NoError(t, f.sync(kindCluster, "c1"))
			require.Equal(t, 1, f.runSecretDeletes(j.Name), "the finished %s Job's run Secret is deleted", tc.action)
			require.Zero(t, f.runSecretDeletes(apply.Name), "the recorded apply's Secret went when it was recorded")

			for i := 0; i < 3; i++ {
				f.catchUp() // resets the actions
				f.Clock.Step(syncPeriod)
				require.NoError(t, f.sync(kindCluster, "c1"))
				require.Zero(t, f.runSecretDeletes(j.Name), "deleted once, not on every pass")
			}
		})
	}
}

// K5: after a restart (nothing in memory), a Job its record covers costs
// no request: the pass that recorded it deleted its Secret.
func TestK5RecordedRunSecretNotDeletedAgain(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := newJob(kindCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded)
	old := attemptJob(c1, v1alpha1.JobActionDrift, 1, 1, jobSucceeded, epoch.Add(-2*time.Hour), epoch.Add(-2*time.Hour))
	newer := attemptJob(c1, v1alpha1.JobActionDrift, 1, 2, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-time.Hour))
	c1.Status.LastApply = recordOf(j, epoch)
	c1.Status.LastDriftCheck = recordOf(newer, epoch)
	f.seedReady(c1, j, old, newer)
	f.showRuns = true

	require.NoError(t, f.sync(kindCluster, "c1"))
	for _, name := range []string{j.Name, old.Name, newer.Name} {
		require.Zero(t, f.runSecretDeletes(name), name)
	}
}

// K5: the memory of deleted run Secrets is the kind's and the object's: a
// TerraformCluster and a TerraformMachine of one name in one namespace
// (one controller serves both) do not overwrite each other's, which made
// every pass delete again.
func TestK5RunSecretsGoneKeptPerKind(t *testing.T) {
	var g runSecretsGone
	key := cache.ObjectName{Namespace: testNS, Name: "same"}
	g.set(kindCluster, key, []string{"cluster-job"})
	g.set(kindMachine, key, []string{"machine-job"})
	require.Equal(t, []string{"cluster-job"}, g.get(kindCluster, key))
	require.Equal(t, []string{"machine-job"}, g.get(kindMachine, key))
	g.set(kindMachine, key, nil)
	require.Equal(t, []string{"cluster-job"}, g.get(kindCluster, key), "forgetting the machine keeps the cluster's")
	require.Nil(t, g.get(kindMachine, key))
}
