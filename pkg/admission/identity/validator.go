package identity

import (
	"context"
	"errors"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/credentials"
)

// Path is the webhook path.
const Path = "/validate-terraformclusteridentity"

var (
	// identityResource is the resource the webhook configuration sends to Path.
	identityResource = v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")
	// identityKind is the kind of the objects of identityResource.
	identityKind = v1alpha1.SchemeGroupVersion.WithKind("TerraformClusterIdentity")
)

const (
	// maxNamedNamespaces bounds the namespaces an A4 refusal lists
	// (status.namespaces holds up to 1000); the rest are counted.
	maxNamedNamespaces = 10
	// maxEvaluationErrorLen bounds the authorizer's reason and evaluation
	// error in a log line.
	maxEvaluationErrorLen = 256
)

// Reasons logged with a refusal (the "reason" key), one per rule.
const (
	reasonInvalidSelector = "InvalidSelector"    // A1
	reasonSARDenied       = "SecretAccessDenied" // A2, A3, B9
	reasonInUse           = "IdentityInUse"      // A4
	reasonMirrorsRemain   = "MirrorsRemain"      // A4
)

var (
	secretRefPath         = field.NewPath("spec", "secretRef")
	allowedNamespacesPath = field.NewPath("spec", "allowedNamespaces")
	selectorPath          = allowedNamespacesPath.Child("selector")
	requiredKeysPath      = field.NewPath("spec", "requiredKeys")
	namePath              = field.NewPath("metadata", "name")
	statusNamespacesPath  = field.NewPath("status", "namespaces")
)

// Validator validates TerraformClusterIdentity requests.
type Validator struct {
	// SAR creates SubjectAccessReviews (kube.AuthorizationV1().SubjectAccessReviews()).
	SAR authorizationv1client.SubjectAccessReviewInterface
	// Users finds workload objects that resolve to an identity (index.Resolver.Users).
	Users func(identity string) ([]index.Ref, error)
	// Mirrors, when set, returns the namespaces that hold a mirror of an
	// identity as the manager's mirror informer sees it now. A4 refuses on
	// these as well as on status.namespaces, which lags them by the
	// identity controller's next pass.
	Mirrors func(identity string) ([]string, error)
}

// Validate returns field errors to refuse, an error for an internal failure (A5), or neither to allow.
func (v *Validator) Validate(ctx context.Context, user authenticationv1.UserInfo, op admissionv1.Operation, oldObj, newObj *v1alpha1.TerraformClusterIdentity) (field.ErrorList, error) {
	switch op {
	case admissionv1.Create:
		if newObj == nil {
			return nil, errors.New("CREATE request carries no TerraformClusterIdentity")
		}
		return v.validateCreate(ctx, user, newObj)
	case admissionv1.Update:
		if oldObj == nil || newObj == nil {
			return nil, errors.New("UPDATE request lacks the old or the new TerraformClusterIdentity")
		}
		return v.validateUpdate(ctx, user, oldObj, newObj)
	case admissionv1.Delete:
		if oldObj == nil {
			// Only API servers older than 1.15 send DELETE without the old
			// object; without it there is nothing to check, so refuse (A4
			// runs with failurePolicy Fail for the same reason).
			return nil, errors.New("DELETE request carries no oldObject: cannot check whether the TerraformClusterIdentity is in use")
		}
		return v.validateDelete(ctx, user, oldObj)
	}
	// CONNECT, and operations Kubernetes may add: nothing to check.
	return nil, nil
}

// validateCreate applies A1 and A2.
func (v *Validator) validateCreate(ctx context.Context, user authenticationv1.UserInfo, obj *v1alpha1.TerraformClusterIdentity) (field.ErrorList, error) {
	if errs := validateSelector(obj.Spec.AllowedNamespaces); len(errs) > 0 {
		logRefusal(ctx, user, admissionv1.Create, obj.Name, reasonInvalidSelector, errs)
		return errs, nil
	}
	return v.reviewSecretAccess(ctx, user, admissionv1.Create, obj, secretRefPath,
		"creating an identity, changing spec.secretRef or widening spec.allowedNamespaces requires get access to the Secret it names")
}

// validateUpdate applies A1 (ratcheting), A3 and B9.
func (v *Validator) validateUpdate(ctx context.Context, user authenticationv1.UserInfo, oldObj, newObj *v1alpha1.TerraformClusterIdentity) (field.ErrorList, error) {
	if equality.Semantic.DeepEqual(oldObj.Spec, newObj.Spec) {
		// Metadata, labels, annotations (status never reaches this webhook).
		return nil, nil
	}
	// A selector stored before the webhook checked it is not re-checked while
	// unchanged: refusing it would block the narrowing edits that revoke.
	if !equality.Semantic.DeepEqual(selectorOf(oldObj.Spec.AllowedNamespaces), selectorOf(newObj.Spec.AllowedNamespaces)) {
		if errs := validateSelector(newObj.Spec.AllowedNamespaces); len(errs) > 0 {
			logRefusal(ctx, user, admissionv1.Update, newObj.Name, reasonInvalidSelector, errs)
			return errs, nil
		}
	}
	switch {
	case oldObj.Spec.SecretRef != newObj.Spec.SecretRef:
		// One review of the new Secret covers a widening in the same update.
		return v.reviewSecretAccess(ctx, user, admissionv1.Update, newObj, secretRefPath,
			"creating an identity, changing spec.secretRef or widening spec.allowedNamespaces requires get access to the Secret it names")
	case requiredKeysChanged(oldObj.Spec.RequiredKeys, newObj.Spec.RequiredKeys):
		// B9: CredentialsIncomplete names the required keys the Secret
		// lacks, so choosing the keys probes the Secret's key names. Any
		// change counts, removing a key too (the condition then flips). One
		// review covers a widening in the same update.
		return v.reviewSecretAccess(ctx, user, admissionv1.Update, newObj, requiredKeysPath,
			"changing spec.requiredKeys requires get access to the Secret the identity names (CredentialsIncomplete reveals which keys it lacks)")
	case credentials.Widens(oldObj.Spec.AllowedNamespaces, newObj.Spec.AllowedNamespaces):
		return v.reviewSecretAccess(ctx, user, admissionv1.Update, newObj, allowedNamespacesPath,
			"widening spec.allowedNamespaces requires get access to the Secret the identity names (narrowing does not)")
	}
	// Narrowing: anyone who may edit the identity may revoke.
	return nil, nil
}

// requiredKeysChanged reports whether the set of required keys changed
// (B9). spec.requiredKeys is a set (listType=set): a reordering reveals
// nothing and needs no review.
func requiredKeysChanged(oldKeys, newKeys []string) bool {
	return !sets.New(oldKeys...).Equal(sets.New(newKeys...))
}

// validateDelete applies A4.
func (v *Validator) validateDelete(ctx context.Context, user authenticationv1.UserInfo, obj *v1alpha1.TerraformClusterIdentity) (field.ErrorList, error) {
	name := obj.Name
	if name == "" {
		return nil, errors.New("DELETE request's oldObject has no name")
	}
	if v.Users == nil {
		return nil, errors.New("no lookup of identity users configured")
	}
	refs, err := v.Users(name)
	if err != nil {
		return nil, fmt.Errorf("looking up the users of TerraformClusterIdentity %s: %w", name, err)
	}

	var errs field.ErrorList
	var reasons []string
	if len(refs) > 0 {
		// One user, as A4 says, and not how many: the count of objects
		// using the identity across every namespace is not the requester's
		// to learn (B14). The log has it.
		first := refs[0].String()
		if refs[0].Deleting {
			first += " (being deleted: its destroy needs the credentials)"
		}
		errs = append(errs, field.Forbidden(namePath, fmt.Sprintf("TerraformClusterIdentity %s is in use by %s; delete or re-point its users first",
			name, first)))
		reasons = append(reasons, reasonInUse)
	}
	nss := obj.Status.Namespaces
	if v.Mirrors != nil {
		live, err := v.Mirrors(name)
		if err != nil {
			return nil, fmt.Errorf("looking up the mirrors of TerraformClusterIdentity %s: %w", name, err)
		}
		nss = sets.List(sets.New(nss...).Insert(live...))
	}
	if len(nss) > 0 {
		shown := nss[:min(len(nss), maxNamedNamespaces)]
		errs = append(errs, field.Forbidden(statusNamespacesPath, fmt.Sprintf(
			"mirrors of TerraformClusterIdentity %s remain in namespaces %s%s: the manager removes a mirror once no user there needs it; delete when status.namespaces is empty",
			name, strings.Join(shown, ", "), andMore(len(nss)-len(shown)))))
		reasons = append(reasons, reasonMirrorsRemain)
	}
	if len(errs) > 0 {
		logRefusal(ctx, user, admissionv1.Delete, name, strings.Join(reasons, ","), errs, "users", len(refs), "mirrorNamespaces", len(nss))
		return errs, nil
	}
	return nil, nil
}

// reviewSecretAccess asks whether user may get the Secret obj.spec.secretRef
// names (A2, A3) and refuses at fldPath with why when not.
func (v *Validator) reviewSecretAccess(ctx context.Context, user authenticationv1.UserInfo, op admissionv1.Operation,
	obj *v1alpha1.TerraformClusterIdentity, fldPath *field.Path, why string) (field.ErrorList, error) {
	ns, name := obj.Spec.SecretRef.Namespace, obj.Spec.SecretRef.Name
	if v.SAR == nil {
		return nil, errors.New("no SubjectAccessReview client configured")
	}
	resp, err := v.SAR.Create(ctx, subjectAccessReview(user, ns, name), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating a SubjectAccessReview for user %q on Secret %s/%s: %w", admission.ClipName(user.Username), ns, name, err)
	}
	if resp == nil {
		return nil, fmt.Errorf("SubjectAccessReview for user %q on Secret %s/%s returned no status", admission.ClipName(user.Username), ns, name)
	}
	if resp.Status.Allowed {
		return nil, nil
	}

	// Denied, or no authorizer had an opinion: either way not allowed.
	// status.reason and status.evaluationError stay out of the message
	// (see doc.go); the operator's log has them.
	msg := fmt.Sprintf("user %q may not get Secret %s/%s: %s", admission.ClipName(user.Username), ns, name, why)
	errs := field.ErrorList{field.Forbidden(fldPath, msg)}
	admission.RecordSARDenial()
	logRefusal(ctx, user, op, obj.Name, reasonSARDenied, errs,
		"secret", klog.KRef(ns, name), "sarReason", clip(resp.Status.Reason, maxEvaluationErrorLen),
		"evaluationError", clip(resp.Status.EvaluationError, maxEvaluationErrorLen))
	return errs, nil
}

// subjectAccessReview asks whether user may get Secret ns/name (A2).
func subjectAccessReview(user authenticationv1.UserInfo, ns, name string) *authorizationv1.SubjectAccessReview {
	sar := admission.SubjectAccessReviewFor(user)
	sar.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
		Verb: "get", Group: "", Version: "v1", Resource: "secrets", Namespace: ns, Name: name,
	}
	return sar
}

// validateSelector checks the label keys and values of the selector (A1; the
// CRD's CEL already checks operators and value counts).
func validateSelector(allowed *v1alpha1.AllowedNamespaces) field.ErrorList {
	return metav1validation.ValidateLabelSelector(selectorOf(allowed), metav1validation.LabelSelectorValidationOptions{}, selectorPath)
}

func selectorOf(allowed *v1alpha1.AllowedNamespaces) *metav1.LabelSelector {
	if allowed == nil {
		return nil
	}
	return allowed.Selector
}

// logRefusal logs who was refused what and why. Field errors are logged by
// path and type only: an A1 error quotes the value the user supplied.
func logRefusal(ctx context.Context, user authenticationv1.UserInfo, op admissionv1.Operation, identity, reason string, errs field.ErrorList, kv ...any) {
	fields := make([]string, 0, len(errs))
	for _, e := range errs {
		fields = append(fields, e.Field+": "+e.Type.String())
	}
	klog.FromContext(ctx).Info("Refused TerraformClusterIdentity request",
		append([]any{"user", admission.ClipName(user.Username), "operation", op, "identity", admission.ClipName(identity), "reason", reason, "fields", fields}, kv...)...)
}

// andMore says how many more there are, "" for none.
func andMore(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// clip bounds authorizer text quoted in a message or a log line.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "...(truncated)"
}

// Route returns the admission.Route for path "/validate-terraformclusteridentity" (resource infrastructure.cluster.x-k8s.io/v1alpha1 terraformclusteridentities, kind TerraformClusterIdentity) that decodes the objects with admission.DecodeObjects and calls Validate, mapping field errors to admission.Deny and errors to admission.InternalError.
func (v *Validator) Route() admission.Route {
	return admission.Route{
		Path:     Path,
		Resource: identityResource,
		Kind:     identityKind,
		Validate: func(ctx context.Context, req *admissionv1.AdmissionRequest) admission.Result {
			oldObj, obj, err := admission.DecodeObjects[v1alpha1.TerraformClusterIdentity](req)
			if err != nil {
				return admission.InternalError(err)
			}
			errs, err := v.Validate(ctx, req.UserInfo, req.Operation, oldObj, obj)
			switch {
			case err != nil:
				return admission.InternalError(err)
			case len(errs) > 0:
				return admission.Deny(errs)
			}
			return admission.Allow()
		},
	}
}
