package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// SPEC O8's CEL on TerraformPlan, without any webhook (none runs in this
// package): targetRef is immutable, approval cannot be withdrawn,
// approvedBy goes with approved, and an approved plan's spec is immutable.
// Also the printer columns (upstream A1-40) as the API server computes them.
func TestPlanCELAndColumns(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "plans", nil)
	plans := e.Captf.InfrastructureV1alpha1().TerraformPlans(ns)
	p, err := plans.Create(ctx, &v1alpha1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-0123456789"},
		Spec: v1alpha1.TerraformPlanSpec{
			TargetRef: v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: "prod"},
			PlanHash:  "p2:0123", Reason: v1alpha1.PlanReasonDestructive,
			Summary: v1alpha1.PlanSummary{Create: 1, Replace: 2},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(body string) error {
		_, err := plans.Patch(ctx, p.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	refused := func(body string, fragment string) {
		t.Helper()
		if err := patch(body); err == nil || !strings.Contains(err.Error(), fragment) {
			t.Fatalf("patch %s: %v, want a refusal with %q", body, err, fragment)
		}
	}
	refused(`{"spec":{"targetRef":{"name":"other"}}}`, "spec.targetRef is immutable")
	refused(`{"spec":{"approvedBy":"alice"}}`, "spec.approvedBy is set exactly on approved plans")
	refused(`{"spec":{"approved":true}}`, "spec.approvedBy is set exactly on approved plans")
	if err := patch(`{"spec":{"summary":{"delete":1}}}`); err != nil {
		t.Fatalf("a pending plan's spec may change: %v", err)
	}
	// No webhook here: the admin approves in its own name (the policy
	// captf-plan-approval allows nothing else, TestPlanApprovalPolicy).
	if err := patch(`{"spec":{"approved":true,"approvedBy":"` + controlplane.Admin + `"}}`); err != nil {
		t.Fatal(err)
	}
	refused(`{"spec":{"approved":false,"approvedBy":null}}`, "spec.approved cannot be withdrawn")
	refused(`{"spec":{"planHash":"p2:other"}}`, "an approved plan's spec is immutable")
	refused(`{"spec":{"approvedBy":"bob"}}`, "an approved plan's spec is immutable")

	p, err = plans.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = v1alpha1.PlanPhaseApproved
	if _, err := plans.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := e.Captf.InfrastructureV1alpha1().RESTClient().Get().Namespace(ns).Resource("terraformplans").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names, cells []string
	for i, col := range table.ColumnDefinitions {
		name := col.Name
		if col.Priority > 0 {
			name = "+" + name
		}
		names = append(names, name)
		if col.Name != "Age" && len(table.Rows) == 1 && i < len(table.Rows[0].Cells) {
			cells = append(cells, fmt.Sprint(table.Rows[0].Cells[i]))
		}
	}
	want := []string{"Name", "Target", "Reason", "Phase", "Create", "Update", "Replace", "Delete", "Approved", "+Approved By", "Age"}
	if !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	wantCells := []string{"prod-0123456789", "prod", "Destructive", "Approved", "1", "0", "2", "1", "true", controlplane.Admin}
	if !slices.Equal(cells, wantCells) {
		t.Errorf("row %v, want %v", cells, wantCells)
	}
}

// SPEC O8 (upstream A5-20) without the manager: the shipped policy
// captf-plan-approval (manifests/policy, which the framework applies; no
// webhook runs in this package) refuses a plan created approved, an
// approval whose approvedBy is not the requester, and an approval by a
// user without the verb approve; the approve verb's holder approves in
// their own name. (Its type checking needs kube-controller-manager:
// test/integration/trust's TestPolicyTypeChecks.)
func TestPlanApprovalPolicy(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "plan-policy", nil)
	// alice may write plans, bob also approve them (the shipped role is
	// not applied in this package: the same rules, by hand).
	rules := func(verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.SchemeGroupVersion.Group}, Resources: []string{"terraformplans"}, Verbs: verbs}}
	}
	grant(t, ns, "alice", rules("get", "create", "update", "patch"))
	grant(t, ns, "bob", rules("get", "create", "update", "patch", "approve"))

	plan := &v1alpha1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-9876543210"},
		Spec: v1alpha1.TerraformPlanSpec{TargetRef: v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: "prod"},
			PlanHash: "p2:9876", Reason: v1alpha1.PlanReasonManual, Approved: true, ApprovedBy: controlplane.Admin},
	}
	// The API server loads policies from informers: wait until it enforces
	// this one (a plan created approved is refused).
	framework.Eventually(t, 60*time.Second, func() (bool, string) {
		_, err := e.Captf.InfrastructureV1alpha1().TerraformPlans(ns).Create(ctx, plan, metav1.CreateOptions{})
		if err == nil {
			_ = e.Captf.InfrastructureV1alpha1().TerraformPlans(ns).Delete(ctx, plan.Name, metav1.DeleteOptions{})
			return false, "a plan created approved was admitted: the policy is not active yet"
		}
		return strings.Contains(err.Error(), "is created unapproved"), err.Error()
	})
	plan.Spec.Approved, plan.Spec.ApprovedBy = false, ""
	if _, err := e.Captf.InfrastructureV1alpha1().TerraformPlans(ns).Create(ctx, plan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	approve := func(user, approvedBy string) error {
		_, err := e.CaptfAs(t, user).InfrastructureV1alpha1().TerraformPlans(ns).Patch(ctx, plan.Name, types.MergePatchType,
			[]byte(`{"spec":{"approved":true,"approvedBy":"`+approvedBy+`"}}`), metav1.PatchOptions{})
		return err
	}
	if err := approve("bob", "alice"); err == nil || !strings.Contains(err.Error(), "spec.approvedBy must be the approving user, bob") {
		t.Fatalf("bob approving in alice's name: %v", err)
	}
	if err := approve("alice", "alice"); err == nil || !strings.Contains(err.Error(), "user alice may not approve TerraformPlan "+ns+"/"+plan.Name) {
		t.Fatalf("alice approving without the verb approve: %v", err)
	}
	if err := approve("bob", "bob"); err != nil {
		t.Fatalf("bob approving in his own name: %v", err)
	}
}

// grant binds a new Role with rules to user in ns and waits until RBAC
// allows the first rule's last verb.
func grant(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	e := framework.Get(t)
	ctx := framework.Context(t)
	name := framework.Name(user)
	if _, err := e.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	verb := rules[0].Verbs[len(rules[0].Verbs)-1]
	framework.Eventually(t, 30*time.Second, func() (bool, string) {
		sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: v1alpha1.SchemeGroupVersion.Group, Resource: "terraformplans", Namespace: ns, Verb: verb}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, fmt.Sprintf("%s may %s plans in %s: %v", user, verb, ns, err)
	})
}
