package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/integration/framework"
)

// TestDestructiveGuardO8 proves SPEC O8's destructive guard (upstream
// A3-64) on the API server, with the real Job controller, the shipped RBAC
// and the plan-approval policy: a TerraformCluster under applyPolicy
// Automatic applies its first generation unguarded; the apply of its next
// generation runs with --guard-deletes, and when its runner reports a plan
// that replaces a resource (error kind destructive, nothing applied) the
// manager makes a TerraformPlan with reason Destructive from it at once
// (not a failure: no backoff, A3-69), the cluster says
// DestructivePlanBlocked and names it in status.pendingPlanRef, and no
// apply Job starts over several sync periods. Approved by a user with
// captf-plan-approver, the apply Job runs exactly that plan
// (--expect-plan, captf.io/plan, no guard), and the plan is Applied.
func TestDestructiveGuardO8(t *testing.T) {
	f := setup(t)
	ns, c, first := appliedOnce(f, "guarded", v1alpha1.ApplyAutomatic)
	if cmd := strings.Join(first.Spec.Template.Spec.Containers[0].Command, " "); strings.Contains(cmd, "--guard-deletes") {
		t.Fatalf("O8: the first apply is guarded: %q", cmd)
	}
	setClusterVariables(f, ns, c.Name, `{"lb_name":"renamed"}`)
	guarded := waitJobNamed(f, ns, v1alpha1.JobActionApply, first.Name)
	if cmd := strings.Join(guarded.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--guard-deletes") {
		t.Fatalf("O8: the second apply is not guarded: %q", cmd)
	}
	hash := "sha256:" + strings.Repeat("d", 64)
	stopped := &runresult.Result{Operation: runresult.OperationApply, Steps: []runresult.Step{{Name: "init"}, {Name: "plan"}, {Name: "show"}},
		Plan: &runresult.Plan{Changes: runresult.Changes{Replace: 1}, Hash: hash,
			Resources: []runresult.PlanResource{{Address: "terraform_data.lb", Action: "replace"}}},
		Error: &runresult.Error{Kind: runresult.KindDestructive, Step: runresult.StepApply, Tail: "the plan deletes 0 and replaces 1 resources"}}
	endPod(f, ns, guarded, 4, resultDoc(t, stopped), "")
	plan := waitPlan(f, ns, "", v1alpha1.PlanPhasePending)
	if plan.Spec.Reason != v1alpha1.PlanReasonDestructive || plan.Spec.PlanHash != hash || plan.Spec.Summary.Replace != 1 ||
		plan.Labels["captf.io/plan-reason"] != "Destructive" || plan.Labels["captf.io/destructive"] != "true" ||
		plan.Annotations["captf.io/plan-job"] != guarded.Name {
		t.Fatalf("O8: the Destructive plan %s: spec %+v labels %v annotations %v", plan.Name, plan.Spec, plan.Labels, plan.Annotations)
	}
	finished := f.GetCluster(ns, c.Name).Status.LastApply.FinishTime.Time
	if d := plan.CreationTimestamp.Sub(finished); d >= time.Minute {
		t.Fatalf("O8: the plan came %s after the stopped apply, as after a failure's backoff (A3-69)", d)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonDestructivePlanBlocked)
	if ref := f.GetCluster(ns, c.Name).Status.PendingPlanRef; ref == nil || ref.Name != plan.Name {
		t.Fatalf("O8: status.pendingPlanRef %+v, want %s", ref, plan.Name)
	}
	for end := time.Now().Add(3 * syncPeriod); time.Now().Before(end); time.Sleep(syncPeriod / 2) {
		if js := f.Jobs(ns, v1alpha1.JobActionApply); len(js) != 2 {
			t.Fatalf("O8: %d apply Jobs before the Destructive plan's approval, want the two so far", len(js))
		}
	}

	approve(f, ns, plan.Name)
	apply := waitJobNamed(f, ns, v1alpha1.JobActionApply, first.Name, guarded.Name)
	cmd := strings.Join(apply.Spec.Template.Spec.Containers[0].Command, " ")
	if !strings.Contains(cmd, "--expect-plan="+hash) || strings.Contains(cmd, "--guard-deletes") || apply.Annotations[v1alpha1.AnnotationPlan] != plan.Name {
		t.Fatalf("O8: the approved apply runs %q with annotations %v", cmd, apply.Annotations)
	}
	endPod(f, ns, apply, 0, resultDoc(t, &runresult.Result{Operation: runresult.OperationApply}), "")
	waitPlan(f, ns, plan.Name, v1alpha1.PlanPhaseApplied)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if st := f.GetCluster(ns, c.Name).Status; st.PendingPlanRef != nil {
		t.Fatalf("O8: pendingPlanRef %+v after the applied plan", st.PendingPlanRef)
	}
}

// appliedOnce creates the standalone TerraformCluster name under policy,
// drift off, in a new namespace with an identity for it, and completes its
// first apply Job; it returns the namespace, the cluster and that Job.
func appliedOnce(f *framework.Fixture, name string, policy v1alpha1.ApplyPolicy) (string, *v1alpha1.TerraformCluster, batchv1.Job) {
	f.T.Helper()
	ns := f.Env.CreateNamespace(f.T, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"},
			ApplyPolicy: policy, Drift: &v1alpha1.DriftSpec{IntervalSeconds: new(int32)}}}
	c, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	first := f.WaitJob(ns, v1alpha1.JobActionApply)
	endPod(f, ns, first, 0, resultDoc(f.T, &runresult.Result{Operation: runresult.OperationApply}), "")
	f.WaitFor("the first apply recorded", func() (bool, string) {
		st := f.GetCluster(ns, c.Name).Status
		return st.LastApply != nil && st.LastApply.Outcome == v1alpha1.RunSucceeded, fmt.Sprintf("%+v", st.LastApply)
	})
	return ns, c, first
}

// setClusterVariables sets the cluster's spec.variables to the JSON vars:
// a new generation.
func setClusterVariables(f *framework.Fixture, ns, name, vars string) {
	f.T.Helper()
	f.EditCluster(ns, name, func(cur *v1alpha1.TerraformCluster) {
		cur.Spec.Variables = &runtime.RawExtension{Raw: []byte(vars)}
	})
}
