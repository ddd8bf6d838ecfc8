package clusterctl

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/captf/captf/test/clusterctltest"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// The eight kinds' CRDs (K1, K9, O8).
var captfCRDs = []string{
	"terraformclusteridentities.infrastructure.cluster.x-k8s.io",
	"terraformclusters.infrastructure.cluster.x-k8s.io",
	"terraformmachines.infrastructure.cluster.x-k8s.io",
	"terraformmachinepools.infrastructure.cluster.x-k8s.io",
	"terraformclustertemplates.infrastructure.cluster.x-k8s.io",
	"terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
	"terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io",
	"terraformplans.infrastructure.cluster.x-k8s.io",
}

var (
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	providerGVR = schema.GroupVersionResource{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Resource: "providers"}
)

// TestClusterctlInit proves K10's install: `clusterctl init --infrastructure
// terraform`, exactly as an operator types it, from the local repository
// into a fresh control plane (no CRD, no policy: its own, not the
// package's), installs every object of infrastructure-components.yaml,
// each labelled cluster.x-k8s.io/provider: infrastructure-terraform in the
// file itself and in the cluster; the eight CRDs Established; the
// Deployment with an operator's image for both the container (clusterctl's
// image override) and --runner-image (CAPTF_MANAGER_IMAGE), which clusterctl
// also lists (init list-images, generate provider --describe); the webhook
// configuration pointing at the Service, its CA from cert-manager's
// Certificate; clusterctl's inventory; and captf's ClusterRole aggregated
// into Cluster API's manager's.
func TestClusterctlInit(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	components := readObjects(t, providerFile(t, "infrastructure-components.yaml"))

	// In the file: every object labelled, the eight CRDs there.
	var crdsInFile []string
	for _, o := range components {
		if got := o.GetLabels()[labelProvider]; got != providerLabel {
			t.Errorf("infrastructure-components.yaml: %s has %s=%q, want %q", key(o), labelProvider, got, providerLabel)
		}
		if o.GetKind() == "CustomResourceDefinition" {
			crdsInFile = append(crdsInFile, o.GetName())
		}
	}
	if !sameSet(crdsInFile, captfCRDs) {
		t.Errorf("infrastructure-components.yaml has CRDs %v, want %v", crdsInFile, captfCRDs)
	}

	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: filepath.Join(e.Root, "bin"), ControllerManager: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cp.Stop)
	t.Logf("fresh control plane in %s", time.Since(start).Round(time.Millisecond))

	// The components' variables: the runner image only; the manager's
	// image is a literal clusterctl can list (with variables unprocessed).
	describe := string(clusterctl(ctx, t, nil, "generate", "provider", "--infrastructure", "terraform:"+releaseVersion, "--describe"))
	if !strings.Contains(describe, "Variables:\n  - CAPTF_MANAGER_IMAGE\nImages:\n  - ghcr.io/captf/captf:latest\n") {
		t.Errorf("clusterctl generate provider --describe: want the variable CAPTF_MANAGER_IMAGE and the image ghcr.io/captf/captf:latest:\n%s", describe)
	}

	// An operator's own image, as clusterctl's image override and the
	// runner's variable give it (docs/deploy.md, "With clusterctl").
	const image = "captf.local/captf:clusterctl"
	config := clusterctltest.ImageConfig(t, filepath.Join(repository(t), "clusterctl.yaml"), "captf.local", "clusterctl")
	env := []string{"CAPTF_MANAGER_IMAGE=" + image}
	kubeconfig := cp.KubeconfigPath(controlplane.Admin)

	stdout, stderr, err := runClusterctlConfig(ctx, t, config, env, "init", "list-images", "--kubeconfig", kubeconfig, "--infrastructure", "terraform")
	if err != nil {
		t.Fatalf("clusterctl init list-images: %v\n%s%s", err, stdout, stderr)
	}
	if images := strings.Fields(string(stdout)); !slices.Contains(images, image) {
		t.Errorf("clusterctl init list-images: %v, want %s among them", images, image)
	}

	stdout, stderr, err = runClusterctlConfig(ctx, t, config, env, "init", "--kubeconfig", kubeconfig, "--infrastructure", "terraform")
	t.Logf("clusterctl init:\n%s%s", stdout, stderr)
	if err != nil {
		t.Fatalf("clusterctl init: %v", err)
	}
	// cert-manager (its CRDs) came from the repository's file, and the
	// four providers from theirs: nothing was downloaded.
	for _, want := range []string{
		`Installing cert-manager version=`,
		`Installing provider="infrastructure-terraform" version="` + releaseVersion + `" targetNamespace="captf-system"`,
		`Installing provider="cluster-api" version=`,
		`Installing provider="bootstrap-kubeadm" version=`,
		`Installing provider="control-plane-kubeadm" version=`,
	} {
		if !strings.Contains(string(stderr), want) {
			t.Errorf("clusterctl init's output lacks %q", want)
		}
	}

	cfg := cp.RestConfig(controlplane.Admin)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))

	// Every object of the file is in the cluster, with the provider label
	// (and clusterctl's own, which marks what it manages).
	for _, want := range components {
		gvk := want.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", key(want), err)
			continue
		}
		got, err := dyn.Resource(m.Resource).Namespace(want.GetNamespace()).Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s not installed: %v", key(want), err)
			continue
		}
		labels := got.GetLabels()
		if labels[labelProvider] != providerLabel {
			t.Errorf("%s in the cluster: %s=%q, want %q", key(want), labelProvider, labels[labelProvider], providerLabel)
		}
		if _, ok := labels["clusterctl.cluster.x-k8s.io"]; !ok {
			t.Errorf("%s in the cluster lacks clusterctl's label clusterctl.cluster.x-k8s.io", key(want))
		}
	}

	for _, name := range captfCRDs {
		u, err := dyn.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		established := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			established = established || (m["type"] == "Established" && m["status"] == "True")
		}
		if !established {
			t.Errorf("CRD %s is not Established: %v", name, conds)
		}
		// TerraformPlan is not a Cluster API contract kind (K1 names
		// workload and template CRDs only).
		if got := u.GetLabels()["cluster.x-k8s.io/v1beta2"]; got != "v1alpha1" && name != "terraformplans.infrastructure.cluster.x-k8s.io" {
			t.Errorf("CRD %s: contract label cluster.x-k8s.io/v1beta2=%q, want v1alpha1 (K1)", name, got)
		}
	}

	// The Deployment runs the image the variable names, and its Jobs copy
	// the runner from the same image (J5).
	d, err := kube.AppsV1().Deployments("captf-system").Get(ctx, "captf-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != image || !slices.Contains(c.Args, "--runner-image="+image) {
		t.Errorf("Deployment captf-manager: image %q, args %v; want image and --runner-image %s", c.Image, c.Args, image)
	}

	// The webhook: through the Service in captf-system, its CA injected by
	// cert-manager from the Certificate the components carry.
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "captf", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := vwc.Annotations["cert-manager.io/inject-ca-from"]; got != "captf-system/captf-webhook" {
		t.Errorf("webhook configuration: cert-manager.io/inject-ca-from=%q, want captf-system/captf-webhook", got)
	}
	for _, w := range vwc.Webhooks {
		if s := w.ClientConfig.Service; s == nil || s.Namespace != "captf-system" || s.Name != "captf-webhook" {
			t.Errorf("webhook %s: clientConfig %+v, want the Service captf-system/captf-webhook", w.Name, w.ClientConfig)
		}
	}

	// clusterctl's inventory knows the provider and its version.
	inv, err := dyn.Resource(providerGVR).Namespace("captf-system").Get(ctx, providerLabel, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("clusterctl's inventory: %v", err)
	}
	for field, want := range map[string]string{"providerName": "terraform", "type": "InfrastructureProvider", "version": releaseVersion} {
		if got, _, _ := unstructured.NestedString(inv.Object, field); got != want {
			t.Errorf("inventory Provider %s: %s=%q, want %q", providerLabel, field, got, want)
		}
	}

	// Cluster API's manager (its ClusterRole collects every role labelled
	// aggregate-to-manager) gets captf's rules.
	ours, err := kube.RbacV1().ClusterRoles().Get(ctx, "captf-capi-manager", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, func() (bool, string) {
		agg, err := kube.RbacV1().ClusterRoles().Get(ctx, "capi-aggregated-manager-role", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, r := range ours.Rules {
			if !slices.ContainsFunc(agg.Rules, func(a rbacv1.PolicyRule) bool { return equalRule(a, r) }) {
				return false, "capi-aggregated-manager-role lacks " + r.String()
			}
		}
		return true, ""
	})
	// What MachineSets and the topology controller do with the templates.
	for _, a := range []authorizationv1.ResourceAttributes{
		{Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachinetemplates", Verb: "get", Namespace: "any"},
		{Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachines", Verb: "create", Namespace: "any"},
		{Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformclustertemplates", Verb: "patch", Namespace: "any"},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:capi-system:capi-manager", ResourceAttributes: &a,
		}}
		res, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Status.Allowed {
			t.Errorf("Cluster API's manager may not %s %s: %s", a.Verb, a.Resource, res.Status.Reason)
		}
	}
}

func equalRule(a, b rbacv1.PolicyRule) bool {
	return sameSet(a.APIGroups, b.APIGroups) && sameSet(a.Resources, b.Resources) && sameSet(a.Verbs, b.Verbs) &&
		sameSet(a.ResourceNames, b.ResourceNames) && sameSet(a.NonResourceURLs, b.NonResourceURLs)
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
