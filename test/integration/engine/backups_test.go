package engine

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// backupSerials returns the serials of status.stateBackups, in order.
func backupSerials(c *v1alpha1.TerraformCluster) []int64 {
	var out []int64
	for _, b := range c.Status.StateBackups {
		out = append(out, b.Serial)
	}
	return out
}

// backupSecrets returns the names of the Secrets labelled as backups of
// suffix, sorted.
func backupSecretNames(f *framework.Fixture, ns, suffix string) []string {
	f.T.Helper()
	list, err := f.Env.Kube.CoreV1().Secrets(ns).List(f.Ctx, metav1.ListOptions{LabelSelector: statebackup.Selector(suffix).String()})
	if err != nil {
		f.T.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// applySerial runs generation gen's apply: waits for its Job, writes the
// state with serial (split into parts of ChunkSize when it is larger),
// finishes the Job and waits for the outputs read after it.
func applySerial(f *framework.Fixture, ns, name, suffix string, gen int64, compressed []byte) *v1alpha1.TerraformCluster {
	f.T.Helper()
	if gen > 1 {
		nextGeneration(f, ns, name, int(gen))
	}
	j := applyJob(f, ns, gen)
	for i := 0; len(compressed) > 0; i++ {
		n := min(tfstate.ChunkSize, len(compressed))
		writeState(f, ns, suffix, tfstate.PartName(suffix, i), compressed[:n])
		compressed = compressed[n:]
	}
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		f.T.Fatal(err)
	}
	return waitOutputs(f, ns, name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
}

func serialState(serial int64) []byte {
	return tfstatetest.Gzip(tfstatetest.StateSerial(serial, sensitiveOutputValue, map[string]string{"serial": strconv.FormatInt(serial, 10)}))
}

// TestStateBackups proves SPEC O5's backups on the real API server: each
// new serial read after a successful apply is copied to
// captf-state-backup-<suffix>-<serial> (owned by the object, labelled for
// a selector), an apply that leaves the serial as it was copies nothing,
// a steady pass writes nothing, the newest --state-backups (5, the
// default) are kept and listed in status.stateBackups, the older ones are
// deleted, a Secret that merely carries the labels is never deleted, and a
// split state is copied part by part; each listed backup has its stored
// size in bytes (upstream A1-88), all parts together.
func TestStateBackups(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "backups", "b")
	secrets := f.Env.Kube.CoreV1().Secrets(ns)

	// A tenant's Secret with the backup labels but not a backup's name.
	decoy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-a-backup", Labels: statebackup.Labels(suffix, 0, 0)}}
	if _, err := secrets.Create(f.Ctx, decoy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	got := applySerial(f, ns, c.Name, suffix, 1, serialState(1))
	f.WaitFor("the backup of serial 1 in status", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		return slices.Equal(backupSerials(got), []int64{1}), fmt.Sprintf("stateBackups %+v", got.Status.StateBackups)
	})
	first := got.Status.StateBackups[0]
	if first.SecretName != statebackup.Name(suffix, 1) || first.TakenAt.IsZero() || first.Parts != 0 {
		t.Fatalf("O5: status.stateBackups[0] = %+v", first)
	}
	backup, err := secrets.Get(f.Ctx, first.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state, err := secrets.Get(f.Ctx, tfstate.SecretName(suffix), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(backup.Data[tfstate.DataKey], state.Data[tfstate.DataKey]) {
		t.Fatal("O5: the backup's data is not the state's")
	}
	if first.Bytes != int64(len(state.Data[tfstate.DataKey])) {
		t.Fatalf("O5, A1-88: status.stateBackups[0].bytes = %d, want the stored state's %d", first.Bytes, len(state.Data[tfstate.DataKey]))
	}
	if len(backup.OwnerReferences) != 1 || backup.OwnerReferences[0].UID != c.UID || backup.Labels[tfstate.LabelState] != "" {
		t.Fatalf("O5: the backup must be owned by the cluster and carry none of the backend's labels: owners %v, labels %v", backup.OwnerReferences, backup.Labels)
	}

	// An apply that leaves the serial as it was: no copy, no write.
	got = applySerial(f, ns, c.Name, suffix, 2, serialState(1))
	// Steady passes: several sync periods (a deadline, not a measured
	// duration) after which nothing was written.
	rv := got.ResourceVersion
	time.Sleep(3 * syncPeriod)
	again, err := secrets.Get(f.Ctx, first.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != backup.ResourceVersion {
		t.Fatalf("O5: the backup of an unchanged serial was written again (resourceVersion %s, was %s)", again.ResourceVersion, backup.ResourceVersion)
	}
	now := f.GetCluster(ns, c.Name)
	if now.ResourceVersion != rv || !slices.Equal(backupSerials(now), []int64{1}) {
		t.Fatalf("O5: steady passes wrote the cluster (resourceVersion %s, was %s) or changed its backups %v", now.ResourceVersion, rv, backupSerials(now))
	}
	if names := backupSecretNames(f, ns, suffix); !slices.Equal(names, []string{statebackup.Name(suffix, 1), "not-a-backup"}) {
		t.Fatalf("O5: backup Secrets after an unchanged serial: %v", names)
	}

	// Serials 2..7: the newest 5 stay.
	for serial := int64(2); serial <= 7; serial++ {
		applySerial(f, ns, c.Name, suffix, serial+1, serialState(serial))
	}
	f.WaitFor("the newest 5 backups", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		return slices.Equal(backupSerials(got), []int64{7, 6, 5, 4, 3}), fmt.Sprintf("stateBackups %v", backupSerials(got))
	})
	want := []string{"not-a-backup"}
	for serial := int64(3); serial <= 7; serial++ {
		want = append(want, statebackup.Name(suffix, serial))
	}
	slices.Sort(want)
	if names := backupSecretNames(f, ns, suffix); !slices.Equal(names, want) {
		t.Fatalf("O5: backup Secrets after pruning: %v, want %v", names, want)
	}

	// A split state: each part copied.
	pad := make([]byte, 0, 4<<20)
	for x := uint32(11); len(pad) < cap(pad); x = x*1664525 + 1013904223 {
		pad = append(pad, "abcdefghijklmnopqrstuvwxyz0123456789"[x>>24%36])
	}
	big := tfstatetest.StateSerial(8, sensitiveOutputValue, map[string]string{"id": `"big"`})
	big = append(big[:len(big)-1], []byte(`,"padding":"`+string(pad)+`"}`)...)
	compressed := tfstatetest.Gzip(big)
	if len(compressed) <= 2*tfstate.ChunkSize {
		t.Fatalf("the state must span three parts, its gzip is %d bytes", len(compressed))
	}
	applySerial(f, ns, c.Name, suffix, 9, compressed)
	f.WaitFor("the split backup of serial 8", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		ok := slices.Equal(backupSerials(got), []int64{8, 7, 6, 5, 4}) && got.Status.StateBackups[0].Parts == 3
		return ok, fmt.Sprintf("stateBackups %+v", got.Status.StateBackups)
	})
	var copied []byte
	for i := 0; i < 3; i++ {
		s, err := secrets.Get(f.Ctx, statebackup.PartName(suffix, 8, i), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("O5: part %d of the split backup: %v", i, err)
		}
		copied = append(copied, s.Data[tfstate.DataKey]...)
	}
	if !bytes.Equal(copied, compressed) {
		t.Fatalf("O5: the split backup holds %d bytes, not the state's %d", len(copied), len(compressed))
	}
	if b := got.Status.StateBackups[0].Bytes; b != int64(len(compressed)) {
		t.Fatalf("O5, A1-88: the split backup's bytes = %d, want all parts' %d", b, len(compressed))
	}
	if _, err := secrets.Get(f.Ctx, "not-a-backup", metav1.GetOptions{}); err != nil {
		t.Fatalf("B15: a Secret that merely carries the backup labels must stay: %v", err)
	}
}

// TestRetainAndAdopt proves SPEC O5's deletionPolicy Retain and
// adoptRetainedState: a Retain deletion runs no destroy Job and leaves the
// state and its backups, disowned (the garbage collector, which runs
// here, keeps them) and labelled captf.io/retained-from-uid; a new object
// of the same name does not use them without adoptRetainedState, and with
// it takes them over.
func TestRetainAndAdopt(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "retain", "r")
	secrets := f.Env.Kube.CoreV1().Secrets(ns)
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)

	applySerial(f, ns, c.Name, suffix, 1, serialState(1))
	f.WaitFor("the backup of serial 1", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		return slices.Equal(backupSerials(got), []int64{1}), fmt.Sprintf("stateBackups %v", backupSerials(got))
	})
	f.WaitFor("the state owned by the cluster", func() (bool, string) {
		s, err := secrets.Get(f.Ctx, tfstate.SecretName(suffix), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(s.OwnerReferences) == 1, fmt.Sprintf("owners %v", s.OwnerReferences)
	})
	// Retain: a change of deletionPolicy is a spec change; its apply (a
	// no-op here) runs before the deletion.
	f.EditCluster(ns, c.Name, func(cur *v1alpha1.TerraformCluster) { cur.Spec.DeletionPolicy = v1alpha1.DeletionPolicyRetain })
	j := applyJob(f, ns, 2)
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	waitOutputs(f, ns, c.Name, j, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	keptNames := []string{tfstate.SecretName(suffix), statebackup.Name(suffix, 1)}
	before := map[string][]byte{}
	for _, n := range keptNames {
		s, err := secrets.Get(f.Ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[n] = s.Data[tfstate.DataKey]
	}

	if err := clusters.Delete(f.Ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the retained cluster gone", func() (bool, string) {
		cur, err := clusters.Get(f.Ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return apierrors.IsNotFound(err), err.Error()
		}
		return false, fmt.Sprintf("deletionPolicy %q, finalizers %v, %s", cur.Spec.DeletionPolicy, cur.Finalizers, framework.Describe(cur.Status.Conditions))
	})
	if n := len(f.Jobs(ns, v1alpha1.JobActionDestroy)); n != 0 {
		t.Fatalf("O5: %d destroy Jobs under deletionPolicy Retain", n)
	}
	checkRetained := func() {
		t.Helper()
		for _, n := range keptNames {
			s, err := secrets.Get(f.Ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("O5: %s after a Retain deletion: %v", n, err)
			}
			if len(s.OwnerReferences) != 0 || s.Labels[statebackup.LabelRetainedFrom] != string(c.UID) || !bytes.Equal(s.Data[tfstate.DataKey], before[n]) {
				t.Fatalf("O5: %s must be disowned, labelled %s=%s and unchanged: owners %v, labels %v", n, statebackup.LabelRetainedFrom, c.UID, s.OwnerReferences, s.Labels)
			}
		}
	}
	checkRetained()

	// A new object of the same name without adoptRetainedState: no apply.
	id := c.Spec.IdentityRef.Name
	c2 := f.Cluster(ns, c.Name, id)
	f.WaitCondition("the retained state refused", func() ([]metav1.Condition, error) {
		got, err := clusters.Get(f.Ctx, c2.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return got.Status.Conditions, nil
	}, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRetainedStateExists)
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		for _, r := range j.OwnerReferences {
			if r.UID == c2.UID {
				t.Fatalf("O5: a retained state must stop the new object's first apply: apply Job %s", j.Name)
			}
		}
	}
	// The garbage collector has had the time of the refusal: still kept.
	checkRetained()

	// With adoptRetainedState the new object takes them over.
	f.EditCluster(ns, c2.Name, func(cur *v1alpha1.TerraformCluster) { cur.Spec.AdoptRetainedState = true })
	f.WaitFor("the retained state adopted", func() (bool, string) {
		for _, n := range keptNames {
			s, err := secrets.Get(f.Ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			owned := len(s.OwnerReferences) == 1 && s.OwnerReferences[0].UID == c2.UID
			if _, marked := s.Labels[statebackup.LabelRetainedFrom]; !owned || marked {
				return false, fmt.Sprintf("%s: owners %v, labels %v", n, s.OwnerReferences, s.Labels)
			}
		}
		got := f.GetCluster(ns, c2.Name)
		cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		return slices.Equal(backupSerials(got), []int64{1}) && (cond == nil || cond.Reason != string(v1alpha1.ReasonRetainedStateExists)),
			fmt.Sprintf("stateBackups %v, %s", backupSerials(got), framework.Describe(got.Status.Conditions))
	})
}
