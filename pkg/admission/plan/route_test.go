package plan

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func planRequest(t *testing.T, op admissionv1.Operation, user string, oldSpec, newSpec *v1alpha1.TerraformPlanSpec) *admissionv1.AdmissionRequest {
	t.Helper()
	raw := func(s *v1alpha1.TerraformPlanSpec) runtime.RawExtension {
		if s == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(&v1alpha1.TerraformPlan{
			TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindTerraformPlan},
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod-0123456789"}, Spec: *s})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return &admissionv1.AdmissionRequest{
		UID: "u1", Operation: op, Namespace: "team-a", Name: "prod-0123456789",
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: []string{"team-a-leads"}},
		Object:    raw(newSpec),
		OldObject: raw(oldSpec),
	}
}

// sarClient answers SubjectAccessReviews with allowed (or err) and records them.
func sarClient(allowed bool, err error, seen *[]*authorizationv1.SubjectAccessReview) *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		*seen = append(*seen, sar)
		if err != nil {
			return true, nil, err
		}
		sar = sar.DeepCopy()
		sar.Status.Allowed = allowed
		return true, sar, nil
	})
	return c
}

func fixedManager(context.Context) (string, error) { return managerUser, nil }

// O8: approval is an RBAC decision (the verb approve, asked for the
// request's user, groups included), and an allowed approval is answered
// with the patch that sets approvedBy to the requester; a refused review
// refuses, a failed one is an internal error (A5), never an allow.
func TestApproveRoute(t *testing.T) {
	approve := with(pending(), func(s *v1alpha1.TerraformPlanSpec) { s.Approved = true })
	for _, tc := range []struct {
		name    string
		allowed bool
		sarErr  error
		manager func(context.Context) (string, error)
		check   func(t *testing.T, allowed bool, patch []byte, msg string)
	}{
		{name: "allowed", allowed: true, manager: fixedManager, check: func(t *testing.T, allowed bool, patch []byte, _ string) {
			if !allowed || string(patch) != `[{"op":"add","path":"/spec/approvedBy","value":"alice"}]` {
				t.Fatalf("allowed=%v patch=%s", allowed, patch)
			}
		}},
		{name: "denied by RBAC", allowed: false, manager: fixedManager, check: func(t *testing.T, allowed bool, patch []byte, msg string) {
			if allowed || patch != nil || !strings.Contains(msg, `user "alice" may not approve TerraformPlan team-a/prod-0123456789`) || !strings.Contains(msg, "captf-plan-approver") {
				t.Fatalf("allowed=%v patch=%s msg=%s", allowed, patch, msg)
			}
		}},
		{name: "review fails", sarErr: errors.New("connection refused"), manager: fixedManager, check: func(t *testing.T, allowed bool, _ []byte, msg string) {
			if allowed || !strings.Contains(msg, "connection refused") {
				t.Fatalf("allowed=%v msg=%s", allowed, msg)
			}
		}},
		{name: "manager unknown", allowed: true, manager: func(context.Context) (string, error) { return "", errors.New("no SelfSubjectReview") },
			check: func(t *testing.T, allowed bool, _ []byte, msg string) {
				if allowed || !strings.Contains(msg, "no SelfSubjectReview") {
					t.Fatalf("allowed=%v msg=%s", allowed, msg)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			var seen []*authorizationv1.SubjectAccessReview
			v := &Validator{SAR: sarClient(tc.allowed, tc.sarErr, &seen).AuthorizationV1().SubjectAccessReviews(), Manager: tc.manager}
			res := v.Route().Validate(ctx, planRequest(t, admissionv1.Update, alice, pending(), approve))
			text := ""
			if agg := res.Errors().ToAggregate(); agg != nil {
				text = agg.Error()
			} else if err := res.Err(); err != nil {
				text = err.Error()
			}
			tc.check(t, res.Allowed(), res.Patch(), text)
			if tc.name == "manager unknown" {
				return
			}
			if len(seen) != 1 {
				t.Fatalf("%d SubjectAccessReviews, want 1", len(seen))
			}
			ra := seen[0].Spec.ResourceAttributes
			if seen[0].Spec.User != alice || len(seen[0].Spec.Groups) != 1 || ra == nil || ra.Verb != "approve" ||
				ra.Group != v1alpha1.SchemeGroupVersion.Group || ra.Resource != "terraformplans" || ra.Namespace != "team-a" || ra.Name != "prod-0123456789" {
				t.Fatalf("SubjectAccessReview %+v", seen[0].Spec)
			}
		})
	}
}

// A refusal Decide makes asks no SubjectAccessReview; an approval whose
// approvedBy is the requester is reviewed and patched; a plain update is
// allowed without a patch.
func TestRouteRefusesWithoutReviewAndPatchesOnlyApprovals(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var seen []*authorizationv1.SubjectAccessReview
	v := &Validator{SAR: sarClient(true, nil, &seen).AuthorizationV1().SubjectAccessReviews(), Manager: fixedManager}
	res := v.Route().Validate(ctx, planRequest(t, admissionv1.Update, alice, pending(), approvedBy("bob")))
	if res.Allowed() || len(res.Errors()) != 1 || len(seen) != 0 {
		t.Fatalf("writing another's name in approvedBy: allowed=%v errors=%v reviews=%d", res.Allowed(), res.Errors(), len(seen))
	}
	// A1-143, A3-67: an approval naming the requester is an approval like
	// any other: reviewed, and answered with the patch that writes the
	// requester's name (admission's value, not the request's).
	res = v.Route().Validate(ctx, planRequest(t, admissionv1.Update, alice, pending(), approvedBy(alice)))
	if !res.Allowed() || len(seen) != 1 || string(res.Patch()) != `[{"op":"add","path":"/spec/approvedBy","value":"alice"}]` {
		t.Fatalf("approving in one's own name: allowed=%v errors=%v patch=%s reviews=%d", res.Allowed(), res.Errors(), res.Patch(), len(seen))
	}
	seen = nil
	res = v.Route().Validate(ctx, planRequest(t, admissionv1.Create, managerUser, nil, pending()))
	if !res.Allowed() || res.Patch() != nil || len(seen) != 0 {
		t.Fatalf("manager create: allowed=%v patch=%s reviews=%d", res.Allowed(), res.Patch(), len(seen))
	}
}

// SelfUser asks once it has an answer, and again after a failure.
func TestSelfUserRemembersOnlySuccess(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	c := fake.NewClientset()
	calls := 0
	c.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		calls++
		if calls == 1 {
			return true, nil, errors.New("unavailable")
		}
		return true, &authenticationv1.SelfSubjectReview{Status: authenticationv1.SelfSubjectReviewStatus{
			UserInfo: authenticationv1.UserInfo{Username: managerUser}}}, nil
	})
	who := SelfUser(c.AuthenticationV1().SelfSubjectReviews())
	if _, err := who(ctx); err == nil {
		t.Fatal("first call: want the error")
	}
	for range 3 {
		if got, err := who(ctx); err != nil || got != managerUser {
			t.Fatalf("got %q, %v", got, err)
		}
	}
	if calls != 2 {
		t.Fatalf("%d reviews, want 2", calls)
	}
}
