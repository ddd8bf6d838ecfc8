package admission

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/admission/template"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/test/integration/framework"
)

// K9 on the real API server through the deployed webhook configuration:
// a template's spec.template.spec is immutable, its metadata is not, and
// Cluster API's topology dry-run (a dry-run request carrying
// topology.cluster.x-k8s.io/dry-run) is let through; a cluster template
// may leave identityRef unset, with a warning.
func TestTemplatesImmutableButForTopologyDryRun(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "templates", nil)
	warnings := &recordingWarnings{}
	cfg := rest.CopyConfig(f.e.Admin)
	cfg.WarningHandler = warnings
	client := versioned.NewForConfigOrDie(cfg)
	templates := client.InfrastructureV1alpha1().TerraformMachineTemplates(ns)

	tmpl, err := templates.Create(f.ctx, &v1alpha1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "workers"},
		Spec: v1alpha1.TerraformMachineTemplateSpec{Template: v1alpha1.TerraformMachineTemplateResource{
			Spec: v1alpha1.TerraformMachineSpec{Source: v1alpha1.SourceSpec{Image: "example.com/machine:1"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The spec cannot change.
	changed := tmpl.DeepCopy()
	changed.Spec.Template.Spec.Source.Image = "example.com/machine:2"
	_, err = templates.Update(f.ctx, changed, metav1.UpdateOptions{})
	requireRefused(t, err, "spec.template.spec", "immutable")

	// A dry run without Cluster API's mark is refused too.
	_, err = templates.Update(f.ctx, changed, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	requireRefused(t, err, "immutable")

	// Cluster API's topology dry-run (server-side apply, dry run, marked).
	patch, _ := json.Marshal(map[string]any{
		"apiVersion": v1alpha1.SchemeGroupVersion.String(), "kind": v1alpha1.KindTerraformMachineTemplate,
		"metadata": map[string]any{"name": "workers", "annotations": map[string]string{template.DryRunAnnotation: ""}},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"source": map[string]any{"image": "example.com/machine:2"}}}},
	})
	out, err := templates.Patch(f.ctx, "workers", types.ApplyPatchType, patch, metav1.PatchOptions{
		DryRun: []string{metav1.DryRunAll}, FieldManager: "capi-topology", Force: ptrTrue()})
	if err != nil {
		t.Fatalf("the topology dry-run must be let through: %v", err)
	}
	if out.Spec.Template.Spec.Source.Image != "example.com/machine:2" {
		t.Fatalf("dry-run result %q", out.Spec.Template.Spec.Source.Image)
	}
	if got, _ := templates.Get(f.ctx, "workers", metav1.GetOptions{}); got.Spec.Template.Spec.Source.Image != "example.com/machine:1" {
		t.Fatalf("a dry run changed the stored template: %q", got.Spec.Template.Spec.Source.Image)
	}

	// Metadata changes are fine.
	relabel := tmpl.DeepCopy()
	relabel.Labels = map[string]string{"team": "a"}
	relabel.Spec.Template.ObjectMeta.Labels = map[string]string{"role": "worker"}
	if _, err := templates.Update(f.ctx, relabel, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("metadata may change: %v", err)
	}

	// A cluster template may leave identityRef to a ClusterClass patch.
	_, err = client.InfrastructureV1alpha1().TerraformClusterTemplates(ns).Create(f.ctx, &v1alpha1.TerraformClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: v1alpha1.TerraformClusterTemplateSpec{Template: v1alpha1.TerraformClusterTemplateResource{
			Spec: v1alpha1.TerraformClusterSpec{Source: v1alpha1.SourceSpec{Image: "example.com/cluster:1"}},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a cluster template without identityRef must be admitted: %v", err)
	}
	if !warnings.has("identityRef is not set") {
		t.Fatalf("want the webhook's warning about identityRef, got %v", warnings.all())
	}
	// A TerraformCluster still needs its identityRef (A6).
	_, err = client.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.ctx, &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Annotations: framework.Standalone()},
	}, metav1.CreateOptions{})
	requireRefused(t, err, "spec.identityRef is required")

	// A machine template may not carry a provider ID (CEL).
	_, err = templates.Create(f.ctx, &v1alpha1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "with-id"},
		Spec: v1alpha1.TerraformMachineTemplateSpec{Template: v1alpha1.TerraformMachineTemplateResource{
			Spec: v1alpha1.TerraformMachineSpec{ProviderID: "fake://x"},
		}},
	}, metav1.CreateOptions{})
	requireRefused(t, err, "providerID must be empty")
}

func ptrTrue() *bool { b := true; return &b }

// recordingWarnings keeps the API server's warnings (from the webhook's
// Allow warnings).
type recordingWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recordingWarnings) HandleWarningHeader(_ int, _ string, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, text)
}

func (r *recordingWarnings) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

func (r *recordingWarnings) has(s string) bool {
	for _, m := range r.all() {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}
