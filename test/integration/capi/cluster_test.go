package capi

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

var clusterGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}

// secretValue is the source Secret's credential; never on any object here.
const secretValue = "capi-Cr3dential-VALUE-2b71e0"

// TestClusterInfrastructureProvisioned proves K1 and the tooling of K12 end
// to end: a Cluster API Cluster whose infrastructureRef names a
// TerraformCluster reaches status.initialization.infrastructureProvisioned
// and InfrastructureReady=True with the control plane endpoint the module's
// output gave (T5), read by Cluster API's own core manager. Without the
// contract label on the CRD (K1) Cluster API finds no version of the
// contract to read and the Cluster never gets there.
func TestClusterInfrastructureProvisioned(t *testing.T) {
	// Cluster API first: captf's manager discovers it once at start (setup).
	framework.Get(t).SharedCAPI(t)
	f := framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager})
	f.Settle = 2 * time.Minute // a polling deadline: two managers on a shared 2-core machine
	dyn, err := dynamic.NewForConfig(f.Env.Admin)
	if err != nil {
		t.Fatal(err)
	}

	ns := f.Env.CreateNamespace(t, "capi", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	tc := f.Cluster(ns, "demo", id)

	// The Cluster is complete as written: no webhook defaults it.
	cluster := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2",
		"kind":       "Cluster",
		"metadata":   map[string]any{"name": "demo", "namespace": ns},
		"spec": map[string]any{
			"infrastructureRef": map[string]any{
				"apiGroup": v1alpha1.SchemeGroupVersion.Group,
				"kind":     v1alpha1.KindTerraformCluster,
				"name":     tc.Name,
			},
		},
	}}
	clusters := dyn.Resource(clusterGVR).Namespace(ns)
	if _, err := clusters.Create(f.Ctx, cluster, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The apply: the test plays the Job's pod (no kubelet here), leaving a
	// state whose output control_plane_endpoint the manager copies (T5).
	j := f.WaitJob(ns, v1alpha1.JobActionApply)
	suffix := jobs.StateSuffix(v1alpha1.KindTerraformCluster, tc.Name)
	state := tfstatetest.Secret(ns, tfstate.SecretName(suffix), suffix, tfstatetest.Gzip(tfstatetest.State("", map[string]string{
		"control_plane_endpoint": `"cp.demo.example:6443"`,
	})))
	if _, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, state, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	finished := time.Now()

	// Cluster API's view.
	f.WaitFor("the Cluster's infrastructure provisioned and ready", func() (bool, string) {
		c, err := clusters.Get(f.Ctx, "demo", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		provisioned, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
		host, _, _ := unstructured.NestedString(c.Object, "spec", "controlPlaneEndpoint", "host")
		port, _, _ := unstructured.NestedInt64(c.Object, "spec", "controlPlaneEndpoint", "port")
		ready := condition(c, "InfrastructureReady")
		return provisioned && host == "cp.demo.example" && port == 6443 && ready["status"] == "True",
			fmt.Sprintf("infrastructureProvisioned %v, controlPlaneEndpoint %s:%d, InfrastructureReady %v; TerraformCluster: %s",
				provisioned, host, port, ready, framework.Describe(f.GetCluster(ns, tc.Name).Status.Conditions))
	})

	t.Logf("the Cluster's infrastructure provisioned and ready %s after the apply Job finished", time.Since(finished).Round(time.Millisecond))

	// Cluster API adopted the TerraformCluster: its label, which the
	// Cluster printer column shows (K1), and a reference to the Cluster.
	got := f.GetCluster(ns, tc.Name)
	if got.Labels[v1alpha1.LabelClusterName] != "demo" {
		t.Errorf("label %s = %q, want demo (set by Cluster API)", v1alpha1.LabelClusterName, got.Labels[v1alpha1.LabelClusterName])
	}
	owned := false
	for _, r := range got.OwnerReferences {
		owned = owned || (r.Kind == "Cluster" && r.Name == "demo" && r.APIVersion == clusterGVR.GroupVersion().String())
	}
	if !owned {
		t.Errorf("no owner reference to Cluster demo: %+v", got.OwnerReferences)
	}
	if got.Status.Initialization == nil || got.Status.Initialization.Provisioned == nil || !*got.Status.Initialization.Provisioned {
		t.Errorf("status.initialization.provisioned: %+v", got.Status.Initialization)
	}
}
