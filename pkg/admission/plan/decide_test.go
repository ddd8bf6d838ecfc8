package plan

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

const (
	managerUser = "system:serviceaccount:captf-system:captf-manager"
	alice       = "alice"
)

func pending() *v1alpha1.TerraformPlanSpec {
	return &v1alpha1.TerraformPlanSpec{
		TargetRef: v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: "prod"},
		PlanHash:  "p2:abc", Reason: v1alpha1.PlanReasonManual,
		Summary: v1alpha1.PlanSummary{Replace: 1, Resources: []v1alpha1.PlanResourceChange{{Address: "aws_lb.api", Action: "replace"}}},
	}
}

func approvedBy(who string) *v1alpha1.TerraformPlanSpec {
	s := pending()
	s.Approved, s.ApprovedBy = true, who
	return s
}

func with(s *v1alpha1.TerraformPlanSpec, edit func(*v1alpha1.TerraformPlanSpec)) *v1alpha1.TerraformPlanSpec {
	edit(s)
	return s
}

// SPEC O8 (A3-67, A5-19): each row is one request; want lists the refused
// field paths in order (none: allowed), approving whether the request
// needs the approve permission and gets approvedBy set.
func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name      string
		op        admissionv1.Operation
		user      string
		old, new  *v1alpha1.TerraformPlanSpec
		want      []string
		approving bool
		message   string
	}{
		{name: "manager creates a pending plan", op: admissionv1.Create, user: managerUser, new: pending()},
		{name: "a user cannot create a plan", op: admissionv1.Create, user: alice, new: pending(),
			want: []string{"spec"}, message: `user "alice" may not create TerraformPlans`},
		{name: "a user cannot create an approved plan (create would equal approve)", op: admissionv1.Create, user: alice, new: approvedBy(alice),
			want: []string{"spec", "spec.approved", "spec.approvedBy"}},
		{name: "even the manager creates plans unapproved", op: admissionv1.Create, user: managerUser, new: approvedBy("bob"),
			want: []string{"spec.approved", "spec.approvedBy"}},

		{name: "approving sets approvedBy", op: admissionv1.Update, user: alice, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved = true }), approving: true},
		{name: "approving with approvedBy naming the requester (A1-143, A3-67)", op: admissionv1.Update, user: alice, old: pending(),
			new: approvedBy(alice), approving: true},
		{name: "approving with approvedBy naming someone else", op: admissionv1.Update, user: alice, old: pending(),
			new: approvedBy("bob"), want: []string{"spec.approvedBy"}, message: "may not be written otherwise"},
		{name: "the manager approving in its own name", op: admissionv1.Update, user: managerUser, old: pending(),
			new: approvedBy(managerUser), want: []string{"spec.approved"}},
		{name: "anonymous approving in the empty name", op: admissionv1.Update, user: "", old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved = true }), want: []string{"spec.approved"}},
		{name: "naming oneself without approving", op: admissionv1.Update, user: alice, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.ApprovedBy = alice }), want: []string{"spec.approvedBy"}},
		{name: "renaming the approver of an approved plan to oneself", op: admissionv1.Update, user: "bob", old: approvedBy(alice),
			new: approvedBy("bob"), want: []string{"spec.approvedBy"}},
		{name: "writing approvedBy without approving", op: admissionv1.Update, user: alice, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.ApprovedBy = "bob" }), want: []string{"spec.approvedBy"}},
		{name: "changing approvedBy of an approved plan", op: admissionv1.Update, user: "bob", old: approvedBy(alice),
			new: approvedBy("bob"), want: []string{"spec.approvedBy"}},
		{name: "the manager cannot approve", op: admissionv1.Update, user: managerUser, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved = true }), want: []string{"spec.approved"}},
		{name: "anonymous cannot approve", op: admissionv1.Update, user: "", old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved = true }), want: []string{"spec.approved"}},
		{name: "approval cannot be withdrawn", op: admissionv1.Update, user: alice, old: approvedBy(alice),
			new: pending(), want: []string{"spec.approvedBy", "spec.approved"}},

		{name: "the manager updates a pending plan's summary", op: admissionv1.Update, user: managerUser, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Summary.Delete = 2 })},
		{name: "a user cannot change a plan's hash", op: admissionv1.Update, user: alice, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.PlanHash = "p2:forged" }), want: []string{"spec"}},
		{name: "a user cannot approve and change the summary at once", op: admissionv1.Update, user: alice, old: pending(),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved, s.Summary.Replace = true, 0 }), want: []string{"spec"}},
		{name: "nobody edits an approved plan, the manager neither", op: admissionv1.Update, user: managerUser, old: approvedBy(alice),
			new: with(approvedBy(alice), func(s *v1alpha1.TerraformPlanSpec) { s.PlanHash = "p2:other" }), want: []string{"spec"}, message: "immutable"},
		{name: "a metadata-only update of an approved plan", op: admissionv1.Update, user: "bob", old: approvedBy(alice), new: approvedBy(alice)},
		{name: "nil and empty resources are the same spec", op: admissionv1.Update, user: alice,
			old: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Summary.Resources = nil }),
			new: with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Summary.Resources = []v1alpha1.PlanResourceChange{} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.op, tc.user, managerUser, tc.old, tc.new)
			var got []string
			for _, e := range d.Errors {
				got = append(got, e.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("refused fields %v, want %v (%v)", got, tc.want, d.Errors)
			}
			if d.Approving != tc.approving {
				t.Fatalf("approving = %v, want %v", d.Approving, tc.approving)
			}
			if tc.message != "" && !strings.Contains(d.Errors.ToAggregate().Error(), tc.message) {
				t.Fatalf("message %q lacks %q", d.Errors.ToAggregate().Error(), tc.message)
			}
		})
	}
}
