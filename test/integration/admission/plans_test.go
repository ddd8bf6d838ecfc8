package admission

import (
	"context"
	"fmt"
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

// SPEC O8 (A3-67) on the real API server, through the deployed mutating
// webhook over TLS and the RBAC authorizer: only the manager creates a
// plan; a user can neither approve by writing another's name in
// approvedBy (their own is accepted, A1-143) nor approve
// without the verb approve (the shipped ClusterRole captf-plan-approver),
// nor change a plan's spec; with the role, approving sets approvedBy to
// the approver; an approved plan cannot be edited or unapproved.
func TestPlanApproval(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "plans", nil)
	// Every caller below may create, update and patch plans by RBAC, so a
	// refusal the test asserts is admission's (the shipped manager role
	// grants no update on plans).
	plansRW := []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.SchemeGroupVersion.Group}, Resources: []string{"terraformplans"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}
	for _, user := range []string{controlplane.Manager, "alice", "bob"} {
		f.clusterRole(framework.Name("plans-rw"), user, plansRW)
		f.waitAllowed(user, ns, "create")
	}
	asManager := f.e.CaptfAs(t, controlplane.Manager).InfrastructureV1alpha1().TerraformPlans(ns)
	asAlice := f.e.CaptfAs(t, "alice").InfrastructureV1alpha1().TerraformPlans(ns)
	asBob := f.e.CaptfAs(t, "bob").InfrastructureV1alpha1().TerraformPlans(ns)

	plan := &v1alpha1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-0123456789"},
		Spec: v1alpha1.TerraformPlanSpec{
			TargetRef: v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: "prod"},
			PlanHash:  "p2:0123", Reason: v1alpha1.PlanReasonDestructive,
			Summary: v1alpha1.PlanSummary{Replace: 1, Resources: []v1alpha1.PlanResourceChange{{Address: "aws_lb.api", Action: "replace"}}},
		},
	}
	_, err := asAlice.Create(f.ctx, plan, metav1.CreateOptions{})
	requireRefused(t, err, `user "alice" may not create TerraformPlans`)
	if _, err := asManager.Create(f.ctx, plan, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the manager creates plans: %v", err)
	}

	merge := func(c interface {
		Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*v1alpha1.TerraformPlan, error)
	}, patch string) (*v1alpha1.TerraformPlan, error) {
		return c.Patch(f.ctx, plan.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	// Writing approvedBy as anyone but oneself is refused.
	_, err = merge(asAlice, `{"spec":{"approved":true,"approvedBy":"bob"}}`)
	requireRefused(t, err, "spec.approvedBy", "may not be written otherwise")
	// Approving without the verb approve is refused, naming the role.
	_, err = merge(asAlice, `{"spec":{"approved":true}}`)
	requireRefused(t, err, `user "alice" may not approve TerraformPlan `+ns+"/"+plan.Name, "captf-plan-approver")
	// A user changes nothing else of the spec.
	_, err = merge(asAlice, `{"spec":{"planHash":"p2:forged"}}`)
	requireRefused(t, err, `user "alice" may change only spec.approved`)

	// Bob gets the shipped approver role in this namespace, and approves.
	f.roleBinding(ns, "captf-plan-approver", "bob")
	f.waitAllowed("bob", ns, "approve")
	approved, err := merge(asBob, `{"spec":{"approved":true}}`)
	if err != nil {
		t.Fatalf("bob, with captf-plan-approver, approves: %v", err)
	}
	if !approved.Spec.Approved || approved.Spec.ApprovedBy != "bob" {
		t.Fatalf("after bob's approval: approved=%v approvedBy=%q, want true and bob", approved.Spec.Approved, approved.Spec.ApprovedBy)
	}

	// A1-143, A3-67: an approval whose approvedBy equals the requester is
	// accepted (through the webhook and the policy captf-plan-approval),
	// and the stored approvedBy is the requester's.
	second := plan.DeepCopy()
	second.Name = "prod-9876543210"
	if _, err := asManager.Create(f.ctx, second, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the manager creates a second plan: %v", err)
	}
	self, err := asBob.Patch(f.ctx, second.Name, types.MergePatchType, []byte(`{"spec":{"approved":true,"approvedBy":"bob"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("bob approves with approvedBy bob: %v", err)
	}
	if !self.Spec.Approved || self.Spec.ApprovedBy != "bob" {
		t.Fatalf("after bob's approval in his own name: approved=%v approvedBy=%q", self.Spec.Approved, self.Spec.ApprovedBy)
	}

	// An approved plan's spec is immutable, for the manager too, and the
	// approval stays.
	_, err = merge(asManager, `{"spec":{"planHash":"p2:other"}}`)
	requireRefused(t, err, "immutable")
	_, err = merge(asBob, `{"spec":{"approved":false}}`)
	requireRefused(t, err, "cannot be withdrawn")
	_, err = merge(asBob, `{"spec":{"approvedBy":"alice"}}`)
	requireRefused(t, err, "spec.approvedBy")
	// Its metadata is not.
	if _, err := merge(asAlice, `{"metadata":{"labels":{"reviewed":"yes"}}}`); err != nil {
		t.Fatalf("a label on an approved plan: %v", err)
	}
	got, err := asManager.Get(f.ctx, plan.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ApprovedBy != "bob" || got.Spec.PlanHash != "p2:0123" {
		t.Fatalf("stored plan: approvedBy=%q planHash=%q", got.Spec.ApprovedBy, got.Spec.PlanHash)
	}
}

// roleBinding binds ClusterRole role to user in ns.
func (f *fixture) roleBinding(ns, role, user string) {
	f.t.Helper()
	if _, err := f.e.Kube.RbacV1().RoleBindings(ns).Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: framework.Name(role)},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// waitAllowed waits until the API server's RBAC cache allows user verb on
// plans in ns, so a refusal the test asserts is admission's.
func (f *fixture) waitAllowed(user, ns, verb string) {
	f.t.Helper()
	framework.Eventually(f.t, 30*time.Second, func() (bool, string) {
		sar, err := f.e.Kube.AuthorizationV1().SubjectAccessReviews().Create(f.ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &authorizationv1.ResourceAttributes{
				Group: v1alpha1.SchemeGroupVersion.Group, Resource: "terraformplans", Namespace: ns, Verb: verb}}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, fmt.Sprintf("%s may %s plans in %s: %v", user, verb, ns, err)
	})
}
