package clusterctl

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// The variables an operator sets (cluster-template*.yaml).
const (
	identityName = "fakecloud"
	clusterImage = "registry.example/cluster-module:v1"
	machineImage = "registry.example/machine-module:v1"
	k8sVersion   = "v1.34.1"
)

var templateEnv = []string{
	"TERRAFORM_IDENTITY_NAME=" + identityName,
	"TERRAFORM_CLUSTER_IMAGE=" + clusterImage,
	"TERRAFORM_MACHINE_IMAGE=" + machineImage,
	"POD_CIDR=10.244.0.0/16",
}

// capiCRDs applies, once, the CRDs of Cluster API (bin/capi-crds) and of
// its kubeadm providers (from the repository's components, without their
// conversion webhooks, as bin/capi-crds is) to the package's control plane,
// which the framework gave captf's CRDs: the schemas the generated objects
// must pass, with no webhook in the way (none serves here).
var capiCRDs struct {
	once sync.Once
	err  error
}

func applyCAPICRDs(t *testing.T) {
	t.Helper()
	e := framework.Get(t)
	capiCRDs.once.Do(func() {
		ctx := context.Background()
		if capiCRDs.err = controlplane.ApplyCRDs(ctx, e.Admin, filepath.Join(e.Root, "bin", controlplane.CAPICRDDir)); capiCRDs.err != nil {
			return
		}
		dir := t.TempDir()
		var b strings.Builder
		for _, f := range []string{"bootstrap-kubeadm/*/bootstrap-components.yaml", "control-plane-kubeadm/*/control-plane-components.yaml"} {
			matches, _ := filepath.Glob(filepath.Join(repository(t), f))
			for _, m := range matches {
				for _, o := range readObjects(t, m) {
					if o.GetKind() != "CustomResourceDefinition" {
						continue
					}
					unstructured.RemoveNestedField(o.Object, "spec", "conversion")
					y, err := yaml.Marshal(o.Object)
					if err != nil {
						capiCRDs.err = err
						return
					}
					b.WriteString("---\n")
					b.Write(y)
				}
			}
		}
		if capiCRDs.err = os.WriteFile(filepath.Join(dir, "kubeadm.yaml"), []byte(b.String()), 0o600); capiCRDs.err != nil {
			return
		}
		capiCRDs.err = controlplane.ApplyCRDs(ctx, e.Admin, dir)
	})
	if capiCRDs.err != nil {
		t.Fatal(capiCRDs.err)
	}
}

// TestClusterctlGenerateCluster proves K10's templates: `clusterctl
// generate cluster` renders, for the default and the clusterclass flavors,
// objects with every variable substituted that the API server accepts
// (dry-run create against the CRDs of captf, Cluster API and kubeadm), the
// identity, images and network where the templates put them; the
// clusterclass flavor brings the ClusterClass and its templates
// (clusterclass-terraform.yaml) with it. It also checks the variables
// clusterctl reports as required are the ones the templates document.
func TestClusterctlGenerateCluster(t *testing.T) {
	e := framework.Get(t)
	applyCAPICRDs(t)
	dc, err := discovery.NewDiscoveryClientForConfig(e.Admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(e.Admin)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		flavor string
		// required are the variables clusterctl must ask for.
		required []string
		kinds    []string
	}{
		{
			flavor:   "",
			required: []string{"KUBERNETES_VERSION", "TERRAFORM_CLUSTER_IMAGE", "TERRAFORM_IDENTITY_NAME", "TERRAFORM_MACHINE_IMAGE"},
			kinds:    []string{"Cluster", "TerraformCluster", "TerraformMachineTemplate", "MachineDeployment", "Secret"},
		},
		{
			flavor:   "clusterclass",
			required: []string{"KUBERNETES_VERSION", "TERRAFORM_CLUSTER_IMAGE", "TERRAFORM_IDENTITY_NAME", "TERRAFORM_MACHINE_IMAGE"},
			kinds: []string{"ClusterClass", "TerraformClusterTemplate", "TerraformMachineTemplate", "TerraformMachineTemplate",
				"TerraformMachinePoolTemplate", "KubeadmControlPlaneTemplate", "KubeadmConfigTemplate", "Cluster"},
		},
	} {
		name := tc.flavor
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ctx := framework.Context(t)
			ns := e.CreateNamespace(t, "generate", nil)
			// Without a management cluster clusterctl is told the version.
			args := []string{"generate", "cluster", "demo", "--infrastructure", "terraform:" + releaseVersion, "--target-namespace", ns}
			if tc.flavor != "" {
				args = append(args, "--flavor", tc.flavor)
			}

			// The variables clusterctl asks for (no cluster needed).
			vars := string(clusterctl(ctx, t, nil, append(slices.Clone(args), "--list-variables")...))
			if got := requiredVariables(vars); !sameSet(got, tc.required) {
				t.Errorf("required variables %v, want %v; clusterctl said:\n%s", got, tc.required, vars)
			}

			out := clusterctl(ctx, t, templateEnv, append(args, "--kubernetes-version", k8sVersion,
				"--worker-machine-count", "3", "--control-plane-machine-count", "1")...)
			if strings.Contains(string(out), "${") {
				t.Errorf("a variable is left in the output:\n%s", out)
			}
			objs := objects(t, out)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
				if o.GetNamespace() != ns {
					t.Errorf("%s: namespace %q, want %s", key(o), o.GetNamespace(), ns)
				}
			}
			if !sameSet(kinds, tc.kinds) {
				t.Errorf("kinds %v, want %v", kinds, tc.kinds)
			}
			checkValues(t, tc.flavor, objs)

			// The API server accepts each object as rendered, with no field it
			// does not know (Strict: an unknown field is an error, not a warning).
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s: %v", key(o), err)
					continue
				}
				if _, err := dyn.Resource(m.Resource).Namespace(ns).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
					t.Errorf("dry-run create of %s refused: %v", key(o), err)
				}
			}
		})
	}
}

// requiredVariables are the names clusterctl's --list-variables output
// lists under "Required Variables:".
func requiredVariables(out string) []string {
	var names []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "Required Variables:"):
			in = true
		case strings.HasPrefix(line, "Optional Variables:"):
			in = false
		case in && strings.HasPrefix(line, "  - "):
			names = append(names, strings.TrimSpace(strings.TrimPrefix(line, "  - ")))
		}
	}
	return names
}

// checkValues checks that the variables landed where the templates say.
func checkValues(t *testing.T, flavor string, objs []*unstructured.Unstructured) {
	t.Helper()
	get := func(kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s in the output", kind, name)
		return nil
	}
	expect := func(o *unstructured.Unstructured, want any, path ...string) {
		t.Helper()
		got, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		if !equalValue(got, want) {
			t.Errorf("%s .%s = %v, want %v", key(o), strings.Join(path, "."), got, want)
		}
	}
	cluster := get("Cluster", "demo")
	expect(cluster, []any{"10.244.0.0/16"}, "spec", "clusterNetwork", "pods", "cidrBlocks")
	expect(cluster, []any{"10.128.0.0/12"}, "spec", "clusterNetwork", "services", "cidrBlocks")
	if flavor == "" {
		expect(cluster, "TerraformCluster", "spec", "infrastructureRef", "kind")
		tc := get("TerraformCluster", "demo")
		expect(tc, identityName, "spec", "identityRef", "name")
		expect(tc, identityName, "spec", "defaults", "identityRef", "name")
		expect(tc, clusterImage, "spec", "source", "image")
		expect(get("TerraformMachineTemplate", "demo-md-0"), machineImage, "spec", "template", "spec", "source", "image")
		md := get("MachineDeployment", "demo-md-0")
		expect(md, int64(3), "spec", "replicas")
		expect(md, k8sVersion, "spec", "template", "spec", "version")
		expect(md, "demo-bootstrap-data", "spec", "template", "spec", "bootstrap", "dataSecretName")
		return
	}
	expect(cluster, "terraform", "spec", "topology", "classRef", "name")
	expect(cluster, k8sVersion, "spec", "topology", "version")
	expect(cluster, []any{
		map[string]any{"name": "identityName", "value": identityName},
		map[string]any{"name": "clusterImage", "value": clusterImage},
		map[string]any{"name": "machineImage", "value": machineImage},
	}, "spec", "topology", "variables")
	expect(get("TerraformClusterTemplate", "terraform-cluster"), nil, "spec", "template", "spec", "identityRef")
}

func equalValue(a, b any) bool {
	ya, err1 := yaml.Marshal(a)
	yb, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && string(ya) == string(yb)
}
