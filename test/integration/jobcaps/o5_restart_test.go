package jobcaps

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// TestO5RestoreNotRerunAfterRestart: a captf.io/restore-state value whose
// restore Job ran, and whose Job is gone since, starts no second restore
// Job when the manager is killed and a new one starts (it reads only the
// stored status.observedRestore), while the new manager does act on a new
// value. (Here, with its own manager, because the engine package shares
// one.)
func TestO5RestoreNotRerunAfterRestart(t *testing.T) {
	f := ownManager(t)
	ns := f.Env.CreateNamespace(t, "restorerestart", nil)
	id := f.Identity(f.Source(framework.DefaultData("o5-restart-secret")), framework.List(ns))
	c := f.Cluster(ns, "r", id)
	suffix := jobs.StateSuffix(v1alpha1.KindTerraformCluster, c.Name)

	// The apply writes serial 4; its backup is listed.
	apply := f.WaitJob(ns, v1alpha1.JobActionApply)
	state := tfstatetest.Secret(ns, tfstate.SecretName(suffix), suffix,
		tfstatetest.Gzip(tfstatetest.StateSerial(4, "o5-restart-sensitive", map[string]string{"serial": "4"})))
	if _, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, state, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, apply.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the backup of serial 4", func() (bool, string) {
		got := f.GetCluster(ns, c.Name)
		return len(got.Status.StateBackups) == 1 && got.Status.StateBackups[0].Serial == 4, fmt.Sprintf("%+v", got.Status.StateBackups)
	})

	annotate := func(v string) {
		t.Helper()
		f.EditCluster(ns, c.Name, func(got *v1alpha1.TerraformCluster) {
			got.Annotations[v1alpha1.AnnotationRestoreState] = v
		})
	}
	restoreCond := func(reason v1alpha1.ConditionReason) {
		t.Helper()
		f.WaitFor("RestoreJobSucceeded "+string(reason), func() (bool, string) {
			got := f.GetCluster(ns, c.Name)
			cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionRestoreJobSucceeded))
			return cond != nil && cond.Reason == string(reason), framework.Describe(got.Status.Conditions)
		})
	}
	annotate("4")
	restore := f.WaitJob(ns, v1alpha1.JobActionRestore)
	if err := f.Env.FinishJob(f.Ctx, ns, restore.Name, ""); err != nil {
		t.Fatal(err)
	}
	restoreCond(v1alpha1.ReasonStateRestored)
	// Background: no orphan finalizer, which only a garbage collector
	// (not run here) would remove.
	background := metav1.DeletePropagationBackground
	if err := f.Env.Kube.BatchV1().Jobs(ns).Delete(f.Ctx, restore.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the restore Job gone", func() (bool, string) {
		n := len(f.Jobs(ns, v1alpha1.JobActionRestore))
		return n == 0, fmt.Sprintf("%d restore Jobs", n)
	})

	// A crash, then a new manager: its first pass over every object.
	f.Manager.Kill()
	if err := f.Manager.Wait(); err == nil {
		t.Fatal("the killed manager exited cleanly")
	}
	f.Manager = f.Env.StartManager(t, capsOptions)
	f.WaitManagerQuiet(3 * time.Second)
	if n := len(f.Jobs(ns, v1alpha1.JobActionRestore)); n != 0 {
		t.Fatalf("O5: after a restart the same captf.io/restore-state value started %d restore Jobs, want 0", n)
	}

	// The new manager acts on a new value (here refused: 9 is not kept).
	annotate("9")
	restoreCond(v1alpha1.ReasonRestoreBackupNotFound)
	if n := len(f.Jobs(ns, v1alpha1.JobActionRestore)); n != 0 {
		t.Fatalf("O5: a refused serial started %d restore Jobs", n)
	}
}
