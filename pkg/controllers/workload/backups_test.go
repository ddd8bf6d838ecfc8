package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

func withStateBackups(n int) func(*Options) { return func(o *Options) { o.StateBackups = n } }

// backupCount reads captf_state_backups_total{result}.
func backupCount(t *testing.T, result string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() != "captf_state_backups_total" {
			continue
		}
		for _, m := range family.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("captf_state_backups_total{result=%q} is not registered", result)
	return 0
}

func serialsOf(st *v1alpha1.WorkloadStatus) []int64 {
	var out []int64
	for _, b := range st.StateBackups {
		out = append(out, b.Serial)
	}
	return out
}

// O5: after a successful apply a new serial is copied (the state's second
// GET, by name, then the backup's create) and listed in
// status.stateBackups; a steady pass reads and writes nothing; an apply
// that leaves the serial as it was reads the state once (for its outputs)
// and copies nothing; past --state-backups the oldest backup is deleted.
// Each part of the count fails without backupState.
func TestO5BackupOncePerNewSerial(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t, withStateBackups(2))
	f.Secrets = append(f.Secrets, sensitiveOutput)
	obj := f.applied(kind, 1)
	suffix := jobs.StateSuffix(kind, "obj")
	stateName := tfstate.SecretName(suffix)
	put := func(serial int64) []byte {
		data := tfstatetest.Gzip(tfstatetest.StateSerial(serial, sensitiveOutput, map[string]string{"id": `"x"`}))
		f.putState(stateSecretOf(kind, obj, "", data))
		return data
	}
	data := put(3)
	calls := f.countStateCalls()
	f.catchUp()
	created0, pruned0 := backupCount(t, metrics.BackupCreated), backupCount(t, metrics.BackupPruned)

	require.NoError(t, f.sync(kind, "obj"))
	get := "get " + testNS + "/" + stateName
	require.Equal(t, []string{get, get, "create " + testNS + "/" + statebackup.Name(suffix, 3), "list " + testNS + "/ " + statebackup.Selector(suffix).String()},
		calls.take(), "the read, the copy's GET, the backup, the retention's LIST")
	st := f.lastStatus()
	require.Equal(t, []int64{3}, serialsOf(st))
	require.Equal(t, statebackup.Name(suffix, 3), st.StateBackups[0].SecretName)
	require.Equal(t, int64(len(data)), st.StateBackups[0].Bytes, "A1-88: bytes is the size of the state as stored")
	backup, err := f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), testNS, statebackup.Name(suffix, 3))
	require.NoError(t, err)
	b := backup.(*corev1.Secret)
	require.Equal(t, data, b.Data[tfstate.DataKey])
	require.Equal(t, statebackup.Labels(suffix, 3, 0), b.Labels)
	require.Len(t, b.OwnerReferences, 1)
	require.Equal(t, obj.GetUID(), b.OwnerReferences[0].UID)
	require.Nil(t, b.OwnerReferences[0].Controller)
	require.Equal(t, created0+1, backupCount(t, metrics.BackupCreated), "captf_state_backups_total{result=created}")

	f.steadyPasses(kind, "obj")
	require.Empty(t, calls.take(), "a steady pass reads no state and copies none")
	require.Empty(t, f.writes())

	// Generation 2 leaves serial 3: one read for the outputs, no copy.
	f.newGeneration(kind, obj, 2, jobSucceeded)
	put(3)
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	require.Equal(t, []string{get}, calls.take(), "an unchanged serial is not copied")
	require.Equal(t, []int64{3}, serialsOf(f.lastStatus()))

	// Serials 4 and 5 with --state-backups=2: serial 3's backup goes.
	for _, step := range []struct{ gen, serial int64 }{{3, 4}, {4, 5}} {
		f.newGeneration(kind, obj, step.gen, jobSucceeded)
		put(step.serial)
		f.catchUp()
		require.NoError(t, f.sync(kind, "obj"))
	}
	got := calls.take()
	require.Contains(t, got, "delete "+testNS+"/"+statebackup.Name(suffix, 3))
	require.Equal(t, []int64{5, 4}, serialsOf(f.lastStatus()))
	for _, b := range f.lastStatus().StateBackups {
		require.Positive(t, b.Bytes, "serial %d: bytes listed again from the backups' annotations", b.Serial)
	}
	_, err = f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), testNS, statebackup.Name(suffix, 3))
	require.Error(t, err, "the backup beyond --state-backups is deleted")
	require.Equal(t, created0+3, backupCount(t, metrics.BackupCreated), "serials 3, 4 and 5 backed up")
	require.Equal(t, pruned0+1, backupCount(t, metrics.BackupPruned), "serial 3's backup pruned")
}

// O5: the state changed between the read and the copy (another write of
// it): nothing is backed up, since the serial read would not be the one
// copied.
func TestO5NoBackupOfAStateThatChanged(t *testing.T) {
	const kind = v1alpha1.KindTerraformMachine
	f := newFixture(t, withStateBackups(5))
	f.Secrets = append(f.Secrets, sensitiveOutput)
	obj := f.applied(kind, 1)
	suffix := jobs.StateSuffix(kind, "obj")
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.StateSerial(3, sensitiveOutput, nil))))
	f.catchUp()
	w, err := f.c.kinds[kind].get(cache.ObjectName{Namespace: testNS, Name: "obj"})
	require.NoError(t, err)
	read := []metav1.PartialObjectMetadata{{ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), ResourceVersion: "stale"}}}
	skipped0 := backupCount(t, metrics.BackupSkipped)
	require.NoError(t, f.c.backupState(f.Ctx, w, 3, true, read))
	require.Equal(t, skipped0+1, backupCount(t, metrics.BackupSkipped), "captf_state_backups_total{result=skipped}")
	require.Empty(t, w.status.StateBackups)
	require.Empty(t, f.writes())
}
