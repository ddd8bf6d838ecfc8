package engine

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/integration/framework"
)

// TestPlanFlowO8 proves SPEC O8's plan flow on the API server, with the
// real Job controller, the manager's shipped RBAC and the shipped
// plan-approval policy: a TerraformCluster under applyPolicy Manual
// applies its first generation at once (A3-63); a spec change then starts
// a plan Job (`captf runner plan`), and its result becomes a TerraformPlan
// <cluster>-<10 hex> controlled by the cluster, labelled, with the
// summary and fingerprint (A1-137..A1-147), while the cluster reports
// PlanAwaitingApproval and status.pendingPlanRef; no apply Job starts for
// several sync periods. A user without the verb approve cannot approve; a
// user with captf-plan-approver can, and the apply Job then runs with
// --expect-plan=<fingerprint>. When that apply finds another plan
// (plan-changed), the plan is Superseded/PlanChanged, the cluster says
// PlanChanged, and a new plan Job starts without the failure backoff
// (A3-69); its plan, approved, is applied and marked Applied.
func TestPlanFlowO8(t *testing.T) {
	f := setup(t)
	// A3-63: the first apply is not gated.
	ns, c, first := appliedOnce(f, "o8", v1alpha1.ApplyManual)

	// A spec change: a plan Job, not an apply Job.
	setClusterVariables(f, ns, c.Name, `{"size":"large"}`)
	pj := f.WaitJob(ns, v1alpha1.JobActionPlan)
	if cmd := strings.Join(pj.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "captf runner plan ") {
		t.Fatalf("O8: the plan Job runs %q", cmd)
	}
	hash1 := "sha256:" + strings.Repeat("1", 64)
	endPod(f, ns, pj, 0, planDoc(t, hash1), "")
	plan1 := waitPlan(f, ns, "", v1alpha1.PlanPhasePending)
	if !regexp.MustCompile(`^o8-[0-9a-f]{10}$`).MatchString(plan1.Name) || plan1.Spec.PlanHash != hash1 ||
		plan1.Spec.TargetRef != (v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: c.Name}) ||
		plan1.Spec.Reason != v1alpha1.PlanReasonManual || plan1.Spec.Summary.Update != 1 || len(plan1.Spec.Summary.Resources) != 1 ||
		plan1.Spec.Summary.Resources[0] != (v1alpha1.PlanResourceChange{Address: "terraform_data.size", Action: "update"}) {
		t.Fatalf("O8: plan %s: %+v", plan1.Name, plan1.Spec)
	}
	if ref := metav1.GetControllerOf(plan1); ref == nil || ref.UID != c.UID || plan1.Labels["captf.io/plan-phase"] != "Pending" ||
		plan1.Labels["captf.io/plan-reason"] != "Manual" {
		t.Fatalf("O8: plan %s owner %+v labels %v", plan1.Name, ref, plan1.Labels)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonPlanAwaitingApproval)
	if ref := f.GetCluster(ns, c.Name).Status.PendingPlanRef; ref == nil || ref.Name != plan1.Name {
		t.Fatalf("O8: status.pendingPlanRef %+v, want %s", ref, plan1.Name)
	}
	// No apply Job while the plan waits (sampled over several passes).
	for end := time.Now().Add(3 * syncPeriod); time.Now().Before(end); time.Sleep(syncPeriod / 2) {
		if js := f.Jobs(ns, v1alpha1.JobActionApply); len(js) != 1 {
			t.Fatalf("O8: %d apply Jobs before the plan's approval", len(js))
		}
	}

	approve(f, ns, plan1.Name)
	apply2 := waitJobNamed(f, ns, v1alpha1.JobActionApply, first.Name)
	if cmd := strings.Join(apply2.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--expect-plan="+hash1) ||
		apply2.Annotations[v1alpha1.AnnotationPlan] != plan1.Name {
		t.Fatalf("O8: the approved apply runs %q with annotations %v", cmd, apply2.Annotations)
	}

	// The apply finds another plan: nothing applied, a new plan at once.
	changed := &runresult.Result{Operation: runresult.OperationApply, Steps: []runresult.Step{{Name: "init"}, {Name: "plan"}, {Name: "show"}},
		Error: &runresult.Error{Kind: runresult.KindPlanChanged, Step: runresult.StepApply, Tail: "the plan changed"}}
	endPod(f, ns, apply2, 3, resultDoc(t, changed), "")
	superseded := waitPlan(f, ns, plan1.Name, v1alpha1.PlanPhaseSuperseded)
	if r := meta.FindStatusCondition(superseded.Status.Conditions, string(v1alpha1.ConditionReady)); r == nil || r.Reason != string(v1alpha1.ReasonPlanChanged) {
		t.Fatalf("O8: the changed plan's Ready: %+v", r)
	}
	var pj2 batchv1.Job
	f.WaitFor("a second plan Job", func() (bool, string) {
		js := f.Jobs(ns, v1alpha1.JobActionPlan)
		for _, j := range js {
			if j.Name != pj.Name {
				pj2 = j
			}
		}
		return pj2.Name != "", fmt.Sprintf("%d plan Jobs", len(js))
	})
	finished := f.GetCluster(ns, c.Name).Status.LastApply.FinishTime.Time
	if d := pj2.CreationTimestamp.Sub(finished); d >= time.Minute {
		t.Fatalf("O8: the new plan Job came %s after the plan-changed apply, as after a failure's backoff (A3-69)", d)
	}

	hash2 := "sha256:" + strings.Repeat("2", 64)
	endPod(f, ns, pj2, 0, planDoc(t, hash2), "")
	plan2 := waitPlan(f, ns, "", v1alpha1.PlanPhasePending)
	if plan2.Name == plan1.Name || plan2.Spec.PlanHash != hash2 {
		t.Fatalf("O8: the new plan %s has hash %s", plan2.Name, plan2.Spec.PlanHash)
	}
	// The new plan waits, and the cluster says why there is a new one.
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonPlanChanged)
	approve(f, ns, plan2.Name)
	apply3 := waitJobNamed(f, ns, v1alpha1.JobActionApply, first.Name, apply2.Name)
	if cmd := strings.Join(apply3.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "--expect-plan="+hash2) {
		t.Fatalf("O8: the second approved apply runs %q", cmd)
	}
	endPod(f, ns, apply3, 0, resultDoc(t, &runresult.Result{Operation: runresult.OperationApply}), "")
	waitPlan(f, ns, plan2.Name, v1alpha1.PlanPhaseApplied)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if st := f.GetCluster(ns, c.Name).Status; st.LastApply.JobName != apply3.Name || st.PendingPlanRef != nil {
		t.Fatalf("O8: after the applied plan: lastApply %+v pendingPlanRef %+v", st.LastApply, st.PendingPlanRef)
	}
}

// planDoc is a plan Job's result document: one update, fingerprint hash.
func planDoc(t *testing.T, hash string) string {
	return resultDoc(t, &runresult.Result{Operation: runresult.OperationPlan,
		Steps: []runresult.Step{{Name: "init"}, {Name: "plan"}, {Name: "show"}},
		Plan: &runresult.Plan{Changes: runresult.Changes{Update: 1}, Hash: hash,
			Resources: []runresult.PlanResource{{Address: "terraform_data.size", Action: "update"}}}})
}

// waitPlan waits for the plan name (any plan when "") of ns in phase.
func waitPlan(f *framework.Fixture, ns, name string, phase v1alpha1.PlanPhase) *v1alpha1.TerraformPlan {
	f.T.Helper()
	var found *v1alpha1.TerraformPlan
	f.WaitFor(fmt.Sprintf("plan %q %s", name, phase), func() (bool, string) {
		l, err := f.Env.Captf.InfrastructureV1alpha1().TerraformPlans(ns).List(f.Ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for i := range l.Items {
			p := &l.Items[i]
			seen = append(seen, p.Name+"="+string(p.Status.Phase))
			if (name == "" || p.Name == name) && p.Status.Phase == phase {
				found = p
				return true, ""
			}
		}
		return false, strings.Join(seen, ",")
	})
	return found
}

// waitJobNamed waits for a Job of action other than those named.
func waitJobNamed(f *framework.Fixture, ns string, action v1alpha1.JobAction, not ...string) batchv1.Job {
	f.T.Helper()
	var j batchv1.Job
	f.WaitFor("a new "+string(action)+" Job", func() (bool, string) {
		for _, x := range f.Jobs(ns, action) {
			known := false
			for _, n := range not {
				known = known || x.Name == n
			}
			if !known {
				j = x
				return true, ""
			}
		}
		return false, "none"
	})
	return j
}

// approve approves plan as a user with the shipped captf-plan-approver
// role, after a user without it is refused by the plan-approval policy.
func approve(f *framework.Fixture, ns, plan string) {
	f.T.Helper()
	patch := func(user string) error {
		_, err := f.Env.CaptfAs(f.T, user).InfrastructureV1alpha1().TerraformPlans(ns).Patch(f.Ctx, plan, types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"approved":true,"approvedBy":%q}}`, user), metav1.PatchOptions{})
		return err
	}
	rw := "o8-plans-rw-" + ns
	_, err := f.Env.Kube.RbacV1().Roles(ns).Create(f.Ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: rw},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.SchemeGroupVersion.Group}, Resources: []string{"terraformplans"}, Verbs: []string{"get", "patch"}}}},
		metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		f.T.Fatal(err)
	}
	for _, b := range []struct{ name, role, kind, user string }{
		{"o8-rw-dave", rw, "Role", "dave"}, {"o8-rw-carol", rw, "Role", "carol"}, {"o8-approver-carol", "captf-plan-approver", "ClusterRole", "carol"},
	} {
		_, err := f.Env.Kube.RbacV1().RoleBindings(ns).Create(f.Ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: b.name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: b.kind, Name: b.role},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: b.user}}}, metav1.CreateOptions{})
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			f.T.Fatal(err)
		}
	}
	for _, user := range []string{"dave", "carol"} {
		f.WaitFor(user+" may patch plans", func() (bool, string) {
			sar, err := f.Env.Kube.AuthorizationV1().SubjectAccessReviews().Create(f.Ctx, &authorizationv1.SubjectAccessReview{
				Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: ns, Group: v1alpha1.SchemeGroupVersion.Group, Resource: "terraformplans", Verb: "patch"}}}, metav1.CreateOptions{})
			return err == nil && sar.Status.Allowed, fmt.Sprintf("%v", err)
		})
	}
	if err := patch("dave"); err == nil || !strings.Contains(err.Error(), "approve") {
		f.T.Fatalf("O8: dave, without the verb approve, approved plan %s: %v", plan, err)
	}
	f.WaitFor("carol approves "+plan, func() (bool, string) {
		err := patch("carol")
		return err == nil, fmt.Sprintf("%v", err)
	})
}
