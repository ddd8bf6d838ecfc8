package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// holdFinalizer is another controller's finalizer: it keeps the object
// readable after the manager removed its own.
const holdFinalizer = "example.com/hold"

// TestB12WritesKeepTenantMetadata proves SPEC B12 on the real API server:
// the manager's caches drop the labels and annotations it does not read,
// and none of its writes of a workload object, each decided on that
// trimmed copy, erases them: the finalizer it adds before the apply Job,
// its status writes, the Cluster API field with
// captf.io/provider-fields-generation it sets from the outputs (T5), and
// the finalizer it removes after the destroy (J8), which also leaves
// another controller's finalizer in place.
func TestB12WritesKeepTenantMetadata(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "b12", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	labels, annotations := map[string]string{}, map[string]string{}
	for i := range 50 {
		labels[fmt.Sprintf("tenant.example/l%02d", i)] = "v"
		annotations[fmt.Sprintf("tenant.example/a%02d", i)] = "kept"
	}
	maps.Copy(annotations, framework.Standalone()) // no Cluster API owners (K2)
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)
	c, err := clusters.Create(f.Ctx, &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keep", Labels: labels, Annotations: annotations, Finalizers: []string{holdFinalizer}},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id},
			Source: v1alpha1.SourceSpec{Image: "example.com/module:1"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { releaseHold(f, ns, c.Name) })
	requireTenant := func(when string) *v1alpha1.TerraformCluster {
		t.Helper()
		got := f.GetCluster(ns, c.Name)
		for k, v := range labels {
			if got.Labels[k] != v {
				t.Fatalf("B12: %s the label %s is %q, want %q: a write from the trimmed cache erased it", when, k, got.Labels[k], v)
			}
		}
		for k, v := range annotations {
			if got.Annotations[k] != v {
				t.Fatalf("B12: %s the annotation %s is %q, want %q: a write from the trimmed cache erased it", when, k, got.Annotations[k], v)
			}
		}
		return got
	}

	// The finalizer goes on before the apply Job; status writes follow.
	j := applyJob(f, ns, 1)
	got := requireTenant("after the finalizer and the status writes")
	if !slices.Contains(got.Finalizers, v1alpha1.FinalizerDestroy) || !slices.Contains(got.Finalizers, holdFinalizer) {
		t.Fatalf("J8: finalizers %v", got.Finalizers)
	}

	// T5: the Cluster API field and its annotation, from the outputs.
	suffix := jobs.StateSuffix(v1alpha1.KindTerraformCluster, c.Name)
	writeState(f, ns, suffix, tfstate.SecretName(suffix), tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{
		"control_plane_endpoint": `"cp.example:6443"`,
	})))
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("spec.controlPlaneEndpoint from the output", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		return got.Annotations[v1alpha1.AnnotationProviderFieldsGeneration] == "2/"+string(got.UID), fmt.Sprintf("generation %d, endpoint %+v", got.Generation, got.Spec.ControlPlaneEndpoint)
	})
	got = requireTenant("after the Cluster API field")
	if got.Spec.ControlPlaneEndpoint.Host != "cp.example" {
		t.Errorf("T5: endpoint %+v", got.Spec.ControlPlaneEndpoint)
	}

	// J8: the destroy, then the manager removes its finalizer alone.
	if err := clusters.Delete(f.Ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var destroy string
	f.WaitFor("the destroy Job", func() (bool, string) {
		for _, x := range f.Jobs(ns, v1alpha1.JobActionDestroy) {
			destroy = x.Name
			return true, ""
		}
		return false, "none yet"
	})
	if err := f.Env.FinishJob(f.Ctx, ns, destroy, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the manager's finalizer removed", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		return !slices.Contains(got.Finalizers, v1alpha1.FinalizerDestroy), fmt.Sprintf("finalizers %v", got.Finalizers)
	})
	got = requireTenant("after the finalizer was removed")
	if !slices.Equal(got.Finalizers, []string{holdFinalizer}) {
		t.Errorf("another controller's finalizer must stay: %v", got.Finalizers)
	}
}

// TestB12MergePatchConflicts checks on the real API server what the
// manager's patches rely on (SPEC B12): a JSON merge patch carrying
// metadata.resourceVersion is refused with a Conflict when the object has
// changed since, as an Update would be, and changes nothing.
func TestB12MergePatchConflicts(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "b12rv", nil)
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)
	c, err := clusters.Create(f.Ctx, &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rv"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "none"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := c.ResourceVersion
	if _, err := clusters.Patch(f.Ctx, c.Name, types.MergePatchType, []byte(`{"metadata":{"labels":{"moved":"on"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"finalizers":["example.com/x"]}}`, stale)
	_, err = clusters.Patch(f.Ctx, c.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("a merge patch with a stale resourceVersion: got %v, want a Conflict", err)
	}
	if got := f.GetCluster(ns, c.Name); len(got.Finalizers) != 0 {
		t.Fatalf("the refused patch changed the finalizers: %v", got.Finalizers)
	}
	_ = clusters.Delete(f.Ctx, c.Name, metav1.DeleteOptions{})
}

// releaseHold removes holdFinalizer so the object can go.
func releaseHold(f *framework.Fixture, ns, name string) {
	clusters := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns)
	c, err := clusters.Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	fs := slices.DeleteFunc(slices.Clone(c.Finalizers), func(s string) bool { return s == holdFinalizer })
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": c.ResourceVersion, "finalizers": fs}})
	_, _ = clusters.Patch(f.Ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}
