package clusterctl

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestClusterClassPatchesIdentity proves the ClusterClass of K9/K10 with
// Cluster API's own topology controller (its core manager with the
// ClusterTopology feature gate, K12): the clusterclass flavor that
// `clusterctl generate cluster` renders, created as is, gives the Cluster a
// TerraformCluster cloned from the TerraformClusterTemplate, whose
// identityRef (and the machines' default identity) and image the class's
// patches set from the topology variables, and a control-plane machine
// template cloned from the TerraformMachineTemplate with the machine image.
// Nothing provisions (captf's manager is not running and no control plane
// initializes: the MachineDeployment waits for it, as Cluster API does).
func TestClusterClassPatchesIdentity(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	applyCAPICRDs(t)
	e.SharedCAPI(t, "--feature-gates=ClusterTopology=true")

	ns := e.CreateNamespace(t, "topology", nil)
	out := clusterctl(ctx, t, templateEnv, "generate", "cluster", "demo", "--infrastructure", "terraform:"+releaseVersion,
		"--flavor", "clusterclass", "--target-namespace", ns, "--kubernetes-version", k8sVersion, "--worker-machine-count", "2")

	dc, err := discovery.NewDiscoveryClientForConfig(e.Admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(e.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects(t, out) {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s: %v", key(o), err)
		}
		if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"}); err != nil {
			t.Fatalf("creating %s: %v", key(o), err)
		}
	}

	gvr := func(resource string) schema.GroupVersionResource {
		return v1alpha1.SchemeGroupVersion.WithResource(resource)
	}
	// The cluster's own objects, as the topology controller labels them.
	owned := metav1.ListOptions{LabelSelector: "cluster.x-k8s.io/cluster-name=demo,topology.cluster.x-k8s.io/owned"}
	start := time.Now()
	framework.Eventually(t, 3*time.Minute, func() (bool, string) {
		list, err := dyn.Resource(gvr("terraformclusters")).Namespace(ns).List(ctx, owned)
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprintf("TerraformClusters of the topology: %v %v; %s", names(list), err, clusterConditions(t, dyn, ns))
		}
		tc := list.Items[0]
		for _, f := range []struct {
			path []string
			want string
		}{
			{[]string{"spec", "identityRef", "name"}, identityName},
			{[]string{"spec", "defaults", "identityRef", "name"}, identityName},
			{[]string{"spec", "source", "image"}, clusterImage},
		} {
			if got, _, _ := unstructured.NestedString(tc.Object, f.path...); got != f.want {
				return false, fmt.Sprintf("TerraformCluster %s .%s=%q, want %q", tc.GetName(), strings.Join(f.path, "."), got, f.want)
			}
		}
		mts, err := dyn.Resource(gvr("terraformmachinetemplates")).Namespace(ns).List(ctx, owned)
		if err != nil || len(mts.Items) == 0 {
			return false, fmt.Sprintf("TerraformMachineTemplates of the topology: %v %v", names(mts), err)
		}
		for _, mt := range mts.Items {
			if got, _, _ := unstructured.NestedString(mt.Object, "spec", "template", "spec", "source", "image"); got != machineImage {
				return false, fmt.Sprintf("TerraformMachineTemplate %s image %q, want %q", mt.GetName(), got, machineImage)
			}
		}
		return true, ""
	})
	t.Logf("the topology's TerraformCluster and machine template carry the patched identity and images %s after create", time.Since(start).Round(time.Millisecond))
}

func names(l *unstructured.UnstructuredList) []string {
	if l == nil {
		return nil
	}
	var n []string
	for _, i := range l.Items {
		n = append(n, i.GetName())
	}
	return n
}

// clusterConditions is the Cluster's conditions, for failure messages.
func clusterConditions(t *testing.T, dyn dynamic.Interface, ns string) string {
	c, err := dyn.Resource(schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}).
		Namespace(ns).Get(framework.Context(t), "demo", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	var b strings.Builder
	for _, c := range conds {
		m, _ := c.(map[string]any)
		fmt.Fprintf(&b, "%v=%v/%v: %v; ", m["type"], m["status"], m["reason"], m["message"])
	}
	return b.String()
}
