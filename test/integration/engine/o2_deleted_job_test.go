package engine

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestDeletedApplyJobLeavesTheApplyDue covers O2's last clause (A3-89):
// an apply Job deleted while it runs (by hand, or by a clean-up that
// reached too far) is not a failed run. The apply stays due: a new apply
// Job starts for the same generation with no backoff to wait, nothing is
// recorded as failed, and once that Job succeeds the cluster is applied.
func TestDeletedApplyJobLeavesTheApplyDue(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	f.Cluster(ns, "demo", id)
	first := f.WaitJob(ns, v1alpha1.JobActionApply)

	background := metav1.DeletePropagationBackground
	if err := f.Env.Kube.BatchV1().Jobs(ns).Delete(f.Ctx, first.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	var next string
	f.WaitFor("a new apply Job", func() (bool, string) {
		js := f.Jobs(ns, v1alpha1.JobActionApply)
		for _, j := range js {
			if j.UID != first.UID && j.DeletionTimestamp == nil {
				next = j.Name
				if g := j.Annotations[v1alpha1.AnnotationJobGeneration]; g != "1" {
					return false, fmt.Sprintf("the new Job is for generation %s, want 1", g)
				}
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d apply Jobs, none new", len(js))
	})
	c := f.GetCluster(ns, "demo")
	if c.Status.LastApply != nil {
		t.Errorf("O2: a deleted Job was recorded as a run: lastApply %+v", *c.Status.LastApply)
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded)); cond != nil && cond.Status == metav1.ConditionFalse {
		t.Errorf("O2: a deleted Job made ApplyJobSucceeded False/%s: %s", cond.Reason, cond.Message)
	}

	if err := f.Env.FinishJob(f.Ctx, ns, next, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("demo", f.ClusterConds(ns, "demo"), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if c := f.GetCluster(ns, "demo"); c.Status.LastApply == nil || c.Status.LastApply.Outcome != v1alpha1.RunSucceeded || c.Status.LastApply.Generation != 1 {
		t.Errorf("O2: after the second Job, lastApply %+v", c.Status.LastApply)
	}
}
