package plan

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

var (
	specPath       = field.NewPath("spec")
	approvedPath   = specPath.Child("approved")
	approvedByPath = specPath.Child("approvedBy")
)

// Decision is what Decide concludes before any authorization check:
// refusals, or whether the request approves the plan (and so needs the
// approve permission and the approvedBy patch).
type Decision struct {
	Errors    field.ErrorList
	Approving bool
}

// Decide judges a CREATE or UPDATE of a plan by user, where manager is
// the manager's username; oldSpec is nil on CREATE. Pure: the approve
// permission is checked by the caller when Approving.
func Decide(op admissionv1.Operation, user, manager string, oldSpec, newSpec *v1alpha1.TerraformPlanSpec) Decision {
	switch op {
	case admissionv1.Create:
		return Decision{Errors: decideCreate(user, manager, newSpec)}
	case admissionv1.Update:
		return decideUpdate(user, manager, oldSpec, newSpec)
	}
	return Decision{}
}

func decideCreate(user, manager string, spec *v1alpha1.TerraformPlanSpec) field.ErrorList {
	var errs field.ErrorList
	if user != manager {
		errs = append(errs, field.Forbidden(specPath, fmt.Sprintf(
			"user %q may not create TerraformPlans: only the captf manager (%s) makes plans (O8)", admission.ClipName(user), manager)))
	}
	if spec.Approved {
		errs = append(errs, field.Forbidden(approvedPath, "a plan is created unapproved; an approver approves it afterwards (O8)"))
	}
	if spec.ApprovedBy != "" {
		errs = append(errs, forbidApprovedBy())
	}
	return errs
}

func decideUpdate(user, manager string, oldSpec, newSpec *v1alpha1.TerraformPlanSpec) Decision {
	var d Decision
	if newSpec.ApprovedBy != oldSpec.ApprovedBy && !namesApprover(user, oldSpec, newSpec) {
		d.Errors = append(d.Errors, forbidApprovedBy())
	}
	if otherSpecChanged(oldSpec, newSpec) {
		switch {
		case oldSpec.Approved:
			d.Errors = append(d.Errors, field.Forbidden(specPath, "an approved plan's spec is immutable (O8)"))
		case user != manager:
			d.Errors = append(d.Errors, field.Forbidden(specPath, fmt.Sprintf(
				"user %q may change only spec.approved: the rest of a plan's spec is the captf manager's (%s) (O8)", admission.ClipName(user), manager)))
		}
	}
	switch {
	case oldSpec.Approved && !newSpec.Approved:
		d.Errors = append(d.Errors, field.Forbidden(approvedPath, "approval cannot be withdrawn: delete the plan instead (O8)"))
	case !oldSpec.Approved && newSpec.Approved:
		switch {
		case user == "":
			d.Errors = append(d.Errors, field.Forbidden(approvedPath, "an anonymous request cannot approve a plan (O8)"))
		case user == manager:
			d.Errors = append(d.Errors, field.Forbidden(approvedPath, "the captf manager never approves its own plans: a person does (O8)"))
		default:
			d.Approving = true
		}
	}
	if len(d.Errors) > 0 {
		d.Approving = false
	}
	return d
}

// otherSpecChanged reports whether the specs differ in anything but
// approved and approvedBy.
func otherSpecChanged(oldSpec, newSpec *v1alpha1.TerraformPlanSpec) bool {
	a, b := *oldSpec, *newSpec
	a.Approved, a.ApprovedBy, b.Approved, b.ApprovedBy = false, "", false, ""
	return !equality.Semantic.DeepEqual(a, b)
}

// namesApprover reports whether the update approves the plan and its
// approvedBy is the requesting user's own name: upstream (A1-143, A3-67)
// lets an approval carry approvedBy when it equals the requester. The
// stored value is still the one admission writes (the patch sets it from
// the request's user), so accepting it changes nothing that is stored.
func namesApprover(user string, oldSpec, newSpec *v1alpha1.TerraformPlanSpec) bool {
	return user != "" && !oldSpec.Approved && newSpec.Approved && oldSpec.ApprovedBy == "" && newSpec.ApprovedBy == user
}

func forbidApprovedBy() *field.Error {
	return field.Forbidden(approvedByPath,
		"is set by admission to the user who approves the plan and may not be written otherwise: set spec.approved: true, with approvedBy unset or your own username (O8)")
}
