package template

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func machineTemplate(image string, annotations map[string]string) *v1alpha1.TerraformMachineTemplate {
	return &v1alpha1.TerraformMachineTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindTerraformMachineTemplate},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t", Annotations: annotations},
		Spec: v1alpha1.TerraformMachineTemplateSpec{Template: v1alpha1.TerraformMachineTemplateResource{
			ObjectMeta: v1alpha1.TemplateObjectMeta{Labels: map[string]string{"role": "worker"}},
			Spec:       v1alpha1.TerraformMachineSpec{Source: v1alpha1.SourceSpec{Image: image}},
		}},
	}
}

func raw(t *testing.T, o runtime.Object) runtime.RawExtension {
	b, err := json.Marshal(o)
	require.NoError(t, err)
	return runtime.RawExtension{Raw: b}
}

func routeFor(t *testing.T, path string) admission.Route {
	for _, r := range (Validator{}).Routes() {
		if r.Path == path {
			return r
		}
	}
	t.Fatalf("no route %s", path)
	return admission.Route{}
}

// K9: spec.template.spec is immutable but for Cluster API's topology
// dry-run; metadata may change; the template's labels are validated.
func TestMachineTemplateImmutable(t *testing.T) {
	r := routeFor(t, MachineTemplatePath)
	old := machineTemplate("m:1", nil)
	for _, tt := range []struct {
		name    string
		obj     *v1alpha1.TerraformMachineTemplate
		dryRun  bool
		allowed bool
	}{
		{"unchanged", machineTemplate("m:1", nil), false, true},
		{"metadata only", func() *v1alpha1.TerraformMachineTemplate {
			o := machineTemplate("m:1", map[string]string{"a": "b"})
			o.Spec.Template.ObjectMeta.Labels["extra"] = "x"
			return o
		}(), false, true},
		{"spec changed", machineTemplate("m:2", nil), false, false},
		{"spec changed in a dry run without the mark", machineTemplate("m:2", nil), true, false},
		{"marked but not a dry run", machineTemplate("m:2", map[string]string{DryRunAnnotation: ""}), false, false},
		{"topology dry run", machineTemplate("m:2", map[string]string{DryRunAnnotation: ""}), true, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := &admissionv1.AdmissionRequest{Operation: admissionv1.Update, OldObject: raw(t, old), Object: raw(t, tt.obj), DryRun: ptr.To(tt.dryRun)}
			res := r.Validate(context.Background(), req)
			require.Equal(t, tt.allowed, res.Allowed(), "%v %v", res.Errors(), res.Err())
			if !tt.allowed {
				require.Contains(t, res.Errors().ToAggregate().Error(), "spec.template.spec: Forbidden: is immutable (SPEC K9)")
			}
		})
	}

	bad := machineTemplate("m:1", nil)
	bad.Spec.Template.ObjectMeta.Labels = map[string]string{"not a key": "v"}
	res := r.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, bad)})
	require.False(t, res.Allowed())
	require.Contains(t, res.Errors().ToAggregate().Error(), "spec.template.metadata.labels")

	res = r.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Delete, OldObject: raw(t, old)})
	require.True(t, res.Allowed())
}

// K9: a cluster template may leave identityRef to a ClusterClass patch:
// allowed, with a warning.
func TestClusterTemplateWithoutIdentity(t *testing.T) {
	r := routeFor(t, ClusterTemplatePath)
	tmpl := &v1alpha1.TerraformClusterTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.KindTerraformClusterTemplate},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
	}
	res := r.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, tmpl)})
	require.True(t, res.Allowed())
	require.Len(t, res.Warnings(), 1)
	require.Contains(t, res.Warnings()[0], "identityRef is not set")

	tmpl.Spec.Template.Spec.IdentityRef = &v1alpha1.IdentityReference{Name: "id"}
	res = r.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: raw(t, tmpl)})
	require.True(t, res.Allowed())
	require.Empty(t, res.Warnings())

	changed := tmpl.DeepCopy()
	changed.Spec.Template.Spec.IdentityRef.Name = "other"
	res = r.Validate(context.Background(), &admissionv1.AdmissionRequest{Operation: admissionv1.Update, OldObject: raw(t, tmpl), Object: raw(t, changed)})
	require.False(t, res.Allowed())
}

func TestRoutesAreValid(t *testing.T) {
	rs := (Validator{}).Routes()
	require.Len(t, rs, 3)
	_, err := admission.NewServer(admission.Options{Addr: "127.0.0.1:0", CertDir: t.TempDir()}, rs...)
	// The cert dir is empty: the error, if any, is about certificates, not the routes.
	if err != nil {
		require.NotContains(t, err.Error(), "route")
	}
}
