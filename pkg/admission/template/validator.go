package template

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// DryRunAnnotation is Cluster API's mark on the objects of its topology
// controller's dry-run requests (clusterv1.TopologyDryRunAnnotation).
const DryRunAnnotation = "topology.cluster.x-k8s.io/dry-run"

// Paths of the three routes, as manifests/webhook names them.
const (
	ClusterTemplatePath     = "/validate-terraformclustertemplate"
	MachineTemplatePath     = "/validate-terraformmachinetemplate"
	MachinePoolTemplatePath = "/validate-terraformmachinepooltemplate"
)

// Decision is what Validate decides: field errors refuse, warnings are
// shown to the client.
type Decision struct {
	Errors   field.ErrorList
	Warnings []string
}

// Validate decides a request for a template: newMeta is its
// spec.template.metadata, oldSpec (nil on CREATE) and newSpec its
// spec.template.spec before and after; dryRun and annotations are the
// request's and the new object's (K9).
func Validate[S any](op admissionv1.Operation, dryRun bool, annotations map[string]string, newMeta *v1alpha1.TemplateObjectMeta, oldSpec, newSpec *S) Decision {
	var d Decision
	metaPath := field.NewPath("spec", "template", "metadata")
	if newMeta != nil {
		d.Errors = append(d.Errors, metav1validation.ValidateLabels(newMeta.Labels, metaPath.Child("labels"))...)
		d.Errors = append(d.Errors, apivalidation.ValidateAnnotations(newMeta.Annotations, metaPath.Child("annotations"))...)
	}
	if op == admissionv1.Update && oldSpec != nil && newSpec != nil && !equality.Semantic.DeepEqual(oldSpec, newSpec) {
		if _, marked := annotations[DryRunAnnotation]; !(dryRun && marked) {
			d.Errors = append(d.Errors, field.Forbidden(field.NewPath("spec", "template", "spec"),
				"is immutable (SPEC K9): create a new template and point the ClusterClass, MachineDeployment or MachinePool at it"))
		}
	}
	return d
}

// Validator serves the three template routes.
type Validator struct{}

// Routes returns the routes of the three template kinds.
func (Validator) Routes() []admission.Route {
	group := v1alpha1.SchemeGroupVersion
	return []admission.Route{
		{
			Path:     ClusterTemplatePath,
			Resource: group.WithResource("terraformclustertemplates"),
			Kind:     group.WithKind(v1alpha1.KindTerraformClusterTemplate),
			Validate: route(func(o *v1alpha1.TerraformClusterTemplate) (*v1alpha1.TemplateObjectMeta, *v1alpha1.TerraformClusterSpec) {
				return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
			}, func(o *v1alpha1.TerraformClusterTemplate) []string {
				if o.Spec.Template.Spec.IdentityRef == nil {
					return []string{"spec.template.spec.identityRef is not set: TerraformClusters cloned from this template need one (A6), for example from a ClusterClass patch"}
				}
				return nil
			}),
		},
		{
			Path:     MachineTemplatePath,
			Resource: group.WithResource("terraformmachinetemplates"),
			Kind:     group.WithKind(v1alpha1.KindTerraformMachineTemplate),
			Validate: route(func(o *v1alpha1.TerraformMachineTemplate) (*v1alpha1.TemplateObjectMeta, *v1alpha1.TerraformMachineSpec) {
				return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
			}, nil),
		},
		{
			Path:     MachinePoolTemplatePath,
			Resource: group.WithResource("terraformmachinepooltemplates"),
			Kind:     group.WithKind(v1alpha1.KindTerraformMachinePoolTemplate),
			Validate: route(func(o *v1alpha1.TerraformMachinePoolTemplate) (*v1alpha1.TemplateObjectMeta, *v1alpha1.TerraformMachinePoolSpec) {
				return &o.Spec.Template.ObjectMeta, &o.Spec.Template.Spec
			}, nil),
		},
	}
}

// route adapts Validate to one kind: parts returns a template's metadata
// and spec, warn its creation warnings.
func route[T any, PT interface {
	*T
	runtime.Object
	GetAnnotations() map[string]string
}, S any](parts func(PT) (*v1alpha1.TemplateObjectMeta, *S), warn func(PT) []string) admission.ValidateFunc {
	return func(ctx context.Context, req *admissionv1.AdmissionRequest) admission.Result {
		oldObj, obj, err := admission.DecodeObjects[T, PT](req)
		if err != nil {
			return admission.InternalError(err)
		}
		if req.Operation == admissionv1.Delete || obj == nil {
			return admission.Allow()
		}
		var oldSpec *S
		if oldObj != nil {
			_, oldSpec = parts(oldObj)
		}
		newMeta, newSpec := parts(obj)
		d := Validate(req.Operation, req.DryRun != nil && *req.DryRun, obj.GetAnnotations(), newMeta, oldSpec, newSpec)
		if len(d.Errors) > 0 {
			return admission.Deny(d.Errors)
		}
		if req.Operation == admissionv1.Create && warn != nil {
			return admission.Allow(warn(obj)...)
		}
		return admission.Allow()
	}
}
