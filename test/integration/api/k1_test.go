package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// contractLabel is the label by which Cluster API finds the version of its
// contract a provider's CRD implements (SPEC K1; UPSTREAM A1-15).
const contractLabel = "cluster.x-k8s.io/v1beta2"

// TestK1ContractLabelsAndShortNames checks what the API server serves for
// SPEC K1: every CRD carries the contract label (Cluster API reads it from
// the CRD) and discovery lists each kind's short name and the cluster-api
// category, so `kubectl get tfc` and `kubectl get cluster-api` work.
func TestK1ContractLabelsAndShortNames(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	dyn, err := dynamic.NewForConfig(e.Admin)
	if err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	served, err := e.Kube.Discovery().ServerResourcesForGroupVersion(v1alpha1.SchemeGroupVersion.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ resource, shortName string }{
		{"terraformclusters", "tfc"},
		{"terraformmachines", "tfm"},
		{"terraformmachinepools", "tfmp"},
		{"terraformclusteridentities", "tfci"},
	} {
		t.Run(want.resource, func(t *testing.T) {
			crd, err := dyn.Resource(crdGVR).Get(ctx, want.resource+"."+v1alpha1.SchemeGroupVersion.Group, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := crd.GetLabels()[contractLabel]; got != "v1alpha1" {
				t.Errorf("K1: CRD label %s = %q, want v1alpha1 (labels %v)", contractLabel, got, crd.GetLabels())
			}
			i := slices.IndexFunc(served.APIResources, func(r metav1.APIResource) bool { return r.Name == want.resource })
			if i < 0 {
				t.Fatalf("discovery does not serve %s", want.resource)
			}
			r := served.APIResources[i]
			if !slices.Equal(r.ShortNames, []string{want.shortName}) {
				t.Errorf("K1: short names %v, want [%s]", r.ShortNames, want.shortName)
			}
			if !slices.Contains(r.Categories, "cluster-api") {
				t.Errorf("categories %v, want cluster-api among them", r.Categories)
			}
		})
	}
}

// TestK1PrinterColumns checks the printer columns of SPEC K1 as the API
// server computes them (the Table kubectl get prints): their names, which
// are wide (-o wide), and their values for objects that have every field,
// label and owner reference the columns read (UPSTREAM A1-21..A1-38; A1-37's Replicas from status.replicas; A1-26 and
// A1-33's InputsApplied from the condition of A1-171).
func TestK1PrinterColumns(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "k1", nil)
	api := e.Captf.InfrastructureV1alpha1()
	labels := map[string]string{v1alpha1.LabelClusterName: "demo"}
	owner := func(kind, name string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: kind, Name: name, UID: "6b0f1f6e-0000-4000-8000-000000000001"}}
	}
	source := v1alpha1.SourceSpec{Image: "example.com/module:7"}
	provisioned := &v1alpha1.WorkloadInitialization{Provisioned: ptr.To(true)}
	// A1-171: the wide InputsApplied column reads the condition.
	inputsApplied := func(status metav1.ConditionStatus, reason v1alpha1.ConditionReason) []metav1.Condition {
		return []metav1.Condition{{Type: string(v1alpha1.ConditionInputsApplied), Status: status, Reason: string(reason),
			Message: "set by the test", LastTransitionTime: metav1.Now()}}
	}

	c, err := api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "tc", Labels: labels},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "id-a"}, Source: source,
			ControlPlaneEndpoint: v1alpha1.APIEndpoint{Host: "cp.demo.example", Port: 6443}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Initialization = provisioned
	c.Status.Conditions = inputsApplied(metav1.ConditionTrue, v1alpha1.ReasonInputsApplied)
	if _, err := api.TerraformClusters(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := api.TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "tm", Labels: labels, OwnerReferences: owner("Machine", "demo-md-0-x7")},
		Spec:       v1alpha1.TerraformMachineSpec{Source: source, ProviderID: "fake://machine/7"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.Conditions = inputsApplied(metav1.ConditionFalse, v1alpha1.ReasonInputsChanged)
	if _, err := api.TerraformMachines(ns).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := api.TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "tmp", Labels: labels, OwnerReferences: owner("MachinePool", "demo-mp-0")},
		Spec:       v1alpha1.TerraformMachinePoolSpec{Source: source},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Replicas = ptr.To[int32](3)
	if _, err := api.TerraformMachinePools(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// name: value of the one row ("" for no value); a "+" before a name
	// marks a wide column (priority 1). Ready, Reason and Identity are the
	// manager's; no manager runs here.
	cases := []struct {
		resource string
		want     []string
		values   map[string]string
	}{
		{"terraformclusters",
			[]string{"Name", "Cluster", "Identity", "Ready", "Provisioned", "Endpoint", "+Reason", "+Image", "+InputsApplied", "Age"},
			map[string]string{"Name": "tc", "Cluster": "demo", "Identity": "id-a", "Provisioned": "true", "Endpoint": "cp.demo.example", "Image": source.Image,
				"InputsApplied": "True"}},
		{"terraformmachines",
			[]string{"Name", "Cluster", "Machine", "Identity", "Ready", "Provisioned", "ProviderID", "+Reason", "+Image", "+InputsApplied", "Age"},
			map[string]string{"Name": "tm", "Cluster": "demo", "Machine": "demo-md-0-x7", "ProviderID": "fake://machine/7", "Image": source.Image,
				"InputsApplied": "False"}},
		{"terraformmachinepools",
			[]string{"Name", "Cluster", "MachinePool", "Replicas", "Identity", "Ready", "Provisioned", "+Reason", "+Image", "Age"},
			map[string]string{"Name": "tmp", "Cluster": "demo", "MachinePool": "demo-mp-0", "Replicas": "3", "Image": source.Image}},
	}
	for _, tc := range cases {
		t.Run(tc.resource, func(t *testing.T) {
			raw, err := api.RESTClient().Get().Namespace(ns).Resource(tc.resource).
				SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var table metav1.Table
			if err := json.Unmarshal(raw, &table); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, col := range table.ColumnDefinitions {
				name := col.Name
				if col.Priority > 0 {
					name = "+" + name
				}
				got = append(got, name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("K1: columns %v, want %v", got, tc.want)
			}
			if len(table.Rows) != 1 {
				t.Fatalf("%d rows, want 1", len(table.Rows))
			}
			for i, col := range table.ColumnDefinitions {
				want, checked := tc.values[col.Name]
				if !checked || i >= len(table.Rows[0].Cells) {
					continue
				}
				if cell := table.Rows[0].Cells[i]; fmt.Sprint(cell) != want {
					t.Errorf("K1: column %s = %v, want %s", col.Name, cell, want)
				}
			}
		})
	}
}
