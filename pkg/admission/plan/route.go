package plan

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Path is the URL path manifests/webhook's mutating configuration names.
const Path = "/mutate-terraformplan"

// VerbApprove is the RBAC verb an approver needs on terraformplans.
const VerbApprove = "approve"

// Resource is the plans' resource name.
const Resource = "terraformplans"

// Validator serves the plan route.
type Validator struct {
	// SAR creates SubjectAccessReviews for the approve permission.
	SAR authorizationv1client.SubjectAccessReviewInterface
	// Manager returns the manager's username (see SelfUser).
	Manager func(context.Context) (string, error)
}

// Route returns the mutating route of TerraformPlans.
func (v *Validator) Route() admission.Route {
	group := v1alpha1.SchemeGroupVersion
	return admission.Route{
		Path:     Path,
		Resource: group.WithResource(Resource),
		Kind:     group.WithKind(v1alpha1.KindTerraformPlan),
		Validate: v.admit,
	}
}

func (v *Validator) admit(ctx context.Context, req *admissionv1.AdmissionRequest) admission.Result {
	oldObj, obj, err := admission.DecodeObjects[v1alpha1.TerraformPlan](req)
	if err != nil {
		return admission.InternalError(err)
	}
	if obj == nil || (req.Operation == admissionv1.Update && oldObj == nil) {
		return admission.Allow()
	}
	if v.Manager == nil {
		return admission.InternalError(errors.New("the manager's username is not configured"))
	}
	manager, err := v.Manager(ctx)
	if err != nil {
		return admission.InternalError(err)
	}
	var oldSpec *v1alpha1.TerraformPlanSpec
	if oldObj != nil {
		oldSpec = &oldObj.Spec
	}
	user := req.UserInfo
	d := Decide(req.Operation, user.Username, manager, oldSpec, &obj.Spec)
	if len(d.Errors) > 0 {
		logRefusal(ctx, d.Errors)
		return admission.Deny(d.Errors)
	}
	if !d.Approving {
		return admission.Allow()
	}
	if errs, err := v.reviewApprove(ctx, user, req.Namespace, req.Name); err != nil {
		return admission.InternalError(err)
	} else if len(errs) > 0 {
		logRefusal(ctx, errs)
		return admission.Deny(errs)
	}
	patch, err := approvedByPatch(user.Username)
	if err != nil {
		return admission.InternalError(err)
	}
	klog.FromContext(ctx).Info("Plan approved", "approvedBy", admission.ClipName(user.Username))
	return admission.AllowWithPatch(patch)
}

// reviewApprove asks whether user may approve the plan ns/name: the verb
// approve on terraformplans, an RBAC decision (SPEC O8).
func (v *Validator) reviewApprove(ctx context.Context, user authenticationv1.UserInfo, ns, name string) (field.ErrorList, error) {
	if v.SAR == nil {
		return nil, errors.New("no SubjectAccessReview client configured")
	}
	sar := admission.SubjectAccessReviewFor(user)
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Verb: VerbApprove, Group: v1alpha1.SchemeGroupVersion.Group, Version: v1alpha1.SchemeGroupVersion.Version,
		Resource: Resource, Namespace: ns, Name: name,
	}
	resp, err := v.SAR.Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a SubjectAccessReview for user %q to approve TerraformPlan %s/%s: %w", admission.ClipName(user.Username), ns, name, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("SubjectAccessReview for user %q to approve TerraformPlan %s/%s returned no status", admission.ClipName(user.Username), ns, name)
	}
	if resp.Status.Allowed {
		return nil, nil
	}
	admission.RecordSARDenial()
	return field.ErrorList{field.Forbidden(approvedPath, fmt.Sprintf(
		"user %q may not approve TerraformPlan %s/%s: approving needs the verb %q on %s.%s (the ClusterRole captf-plan-approver, O8)",
		admission.ClipName(user.Username), ns, name, VerbApprove, Resource, v1alpha1.SchemeGroupVersion.Group))}, nil
}

// approvedByPatch sets spec.approvedBy to user.
func approvedByPatch(user string) ([]byte, error) {
	return json.Marshal([]map[string]any{{"op": "add", "path": "/spec/approvedBy", "value": user}})
}

// logRefusal logs the refused fields by path and type (the request's
// logger already names the user, operation and object).
func logRefusal(ctx context.Context, errs field.ErrorList) {
	fields := make([]string, 0, len(errs))
	for _, e := range errs {
		fields = append(fields, e.Field+": "+e.Type.String())
	}
	klog.FromContext(ctx).Info("Refused TerraformPlan request", "fields", fields)
}

// SelfUser returns a func that asks the API server who reviews' client
// authenticates as (a SelfSubjectReview) and, once that succeeds,
// remembers the answer: the webhook's client has the manager's
// credentials, so this is the user the manager's writes carry.
func SelfUser(reviews authenticationv1client.SelfSubjectReviewInterface) func(context.Context) (string, error) {
	var mu sync.Mutex
	var name string
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if name != "" {
			return name, nil
		}
		r, err := reviews.Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("asking the API server for the manager's own username (SelfSubjectReview): %w", err)
		}
		if r.Status.UserInfo.Username == "" {
			return "", errors.New("the SelfSubjectReview returned no username for the manager")
		}
		name = r.Status.UserInfo.Username
		return name, nil
	}
}
