package api

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

func identity(name string, allowed *v1alpha1.AllowedNamespaces) *v1alpha1.TerraformClusterIdentity {
	return &v1alpha1.TerraformClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Name: "creds", Namespace: "capt-system"},
			AllowedNamespaces: allowed,
		},
	}
}

func TestIdentityValidation(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	hundredAndOne := make([]string, 101)
	for i := range hundredAndOne {
		hundredAndOne[i] = fmt.Sprintf("ns-%d", i)
	}
	cases := []struct {
		name    string
		allowed *v1alpha1.AllowedNamespaces
		mutate  func(*v1alpha1.TerraformClusterIdentity)
		// wantErr holds fragments of the refusal; empty means accepted.
		wantErr []string
	}{
		{name: "A1/unset allowedNamespaces accepted"},
		{name: "A1/empty object refused with a hint", allowed: &v1alpha1.AllowedNamespaces{},
			wantErr: []string{"allowedNamespaces must not be empty ({})", "write selector: {}"}},
		{name: "A1/empty selector accepted", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}},
		{name: "A1/list accepted", allowed: &v1alpha1.AllowedNamespaces{List: []string{"team-a", "team-b"}}},
		{name: "A1/list and selector accepted", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a"}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
		{name: "A1/101 namespaces refused", allowed: &v1alpha1.AllowedNamespaces{List: hundredAndOne},
			wantErr: []string{"spec.allowedNamespaces.list", "must have at most 100 items"}},
		{name: "A1/duplicate namespace refused", allowed: &v1alpha1.AllowedNamespaces{List: []string{"a", "a"}},
			wantErr: []string{"spec.allowedNamespaces.list[1]", "Duplicate value"}},
		{name: "A1/namespace that is not a DNS label refused", allowed: &v1alpha1.AllowedNamespaces{List: []string{"Team_A"}},
			wantErr: []string{"spec.allowedNamespaces.list[0]", "should match"}},
		{name: "A1/In without values refused", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}},
			wantErr: []string{"In and NotIn need at least one value"}},
		{name: "A1/Exists with values refused", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists, Values: []string{"a"}}}}},
			wantErr: []string{"Exists and DoesNotExist take none"}},
		{name: "A1/unknown operator refused", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}},
			wantErr: []string{"no other operator is valid"}},
		{name: "A1/valid expressions accepted", allowed: &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}},
				{Key: "env", Operator: metav1.LabelSelectorOpDoesNotExist},
			}}}},
		{name: "secretRef name must be a DNS subdomain", mutate: func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef.Name = "Bad Name" },
			wantErr: []string{"spec.secretRef.name"}},
		{name: "secretRef namespace must be a DNS label", mutate: func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef.Namespace = "a.b" },
			wantErr: []string{"spec.secretRef.namespace"}},
		{name: "secretRef name is required", mutate: func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef.Name = "" },
			wantErr: []string{"spec.secretRef.name"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := identity(framework.Name("id"), tc.allowed)
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			_, err := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Create(ctx, obj, metav1.CreateOptions{})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("expected the API server to accept it: %v", err)
				}
				_ = e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(ctx, obj.Name, metav1.DeleteOptions{})
				return
			}
			framework.RequireInvalid(t, err, tc.wantErr...)
		})
	}
}

func TestIdentityEmptyListAccepted(t *testing.T) {
	// A1, N1: `list: []` is not `{}`: it is accepted and matches none. The
	// typed client would drop an empty list (omitempty), so send what kubectl
	// sends for that YAML.
	e := framework.Get(t)
	ctx := framework.Context(t)
	name := framework.Name("id")
	body := fmt.Sprintf(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformClusterIdentity",
		"metadata":{"name":%q},"spec":{"secretRef":{"name":"creds","namespace":"capt-system"},"allowedNamespaces":{"list":[]}}}`, name)
	res := e.Captf.InfrastructureV1alpha1().RESTClient().Post().Resource("terraformclusteridentities").
		Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(ctx)
	if err := res.Error(); err != nil {
		t.Fatalf("allowedNamespaces.list: [] must be accepted: %v", err)
	}
	_ = e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Delete(ctx, name, metav1.DeleteOptions{})
}

func TestIdentityEmptyAllowedNamespacesRefusedOnUpdate(t *testing.T) {
	// A1 holds on update too: an identity cannot be edited into `{}`.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ids := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	created, err := ids.Create(ctx, identity(framework.Name("id"), &v1alpha1.AllowedNamespaces{List: []string{"a"}}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ids.Delete(ctx, created.Name, metav1.DeleteOptions{}) })
	created.Spec.AllowedNamespaces = &v1alpha1.AllowedNamespaces{}
	_, err = ids.Update(ctx, created, metav1.UpdateOptions{})
	framework.RequireInvalid(t, err, "write selector: {}")
}

func cluster(ns, name string, identityRef *v1alpha1.IdentityReference) *v1alpha1.TerraformCluster {
	return &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: identityRef,
			Source:      v1alpha1.SourceSpec{Image: "example.com/module:1"},
		},
	}
}

func TestClusterIdentityRefRequired(t *testing.T) {
	// A6
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "a6", nil)
	clusters := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns)

	_, err := clusters.Create(ctx, cluster(ns, "no-ref", nil), metav1.CreateOptions{})
	framework.RequireInvalid(t, err, "spec.identityRef is required", "spec.defaults.identityRef applies to machines and pools only")

	onlyDefaults := cluster(ns, "only-defaults", nil)
	onlyDefaults.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: &v1alpha1.IdentityReference{Name: "x"}}
	_, err = clusters.Create(ctx, onlyDefaults, metav1.CreateOptions{})
	framework.RequireInvalid(t, err, "spec.identityRef is required")

	ok, err := clusters.Create(ctx, cluster(ns, "with-ref", &v1alpha1.IdentityReference{Name: "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a cluster with spec.identityRef must be accepted: %v", err)
	}
	// Mutable: a cluster may switch identity (SPEC 1.2), but not drop it.
	ok.Spec.IdentityRef.Name = "y"
	if ok, err = clusters.Update(ctx, ok, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing a cluster's identityRef must be accepted: %v", err)
	}
	ok.Spec.IdentityRef = nil
	_, err = clusters.Update(ctx, ok, metav1.UpdateOptions{})
	framework.RequireInvalid(t, err, "spec.identityRef is required")

	bad := cluster(ns, "bad-ref", &v1alpha1.IdentityReference{Name: "Not_A_Name"})
	_, err = clusters.Create(ctx, bad, metav1.CreateOptions{})
	framework.RequireInvalid(t, err, "spec.identityRef.name")
}

func TestMachineIdentityRefImmutable(t *testing.T) {
	// A7: immutable, including unset to set and set to unset.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "a7", nil)
	machines := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns)
	newMachine := func(name string, ref *v1alpha1.IdentityReference) *v1alpha1.TerraformMachine {
		m, err := machines.Create(ctx, &v1alpha1.TerraformMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelClusterName: "c"}},
			Spec:       v1alpha1.TerraformMachineSpec{IdentityRef: ref, Source: v1alpha1.SourceSpec{Image: "example.com/m:1"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating machine %s: %v", name, err)
		}
		return m
	}
	const msg = "spec.identityRef is immutable"

	unset := newMachine("unset", nil)
	unset.Spec.IdentityRef = &v1alpha1.IdentityReference{Name: "a"}
	_, err := machines.Update(ctx, unset, metav1.UpdateOptions{})
	framework.RequireInvalid(t, err, msg, "from unset to set")

	set := newMachine("set", &v1alpha1.IdentityReference{Name: "a"})
	changed := set.DeepCopy()
	changed.Spec.IdentityRef.Name = "b"
	_, err = machines.Update(ctx, changed, metav1.UpdateOptions{})
	framework.RequireInvalid(t, err, msg)

	cleared := set.DeepCopy()
	cleared.Spec.IdentityRef = nil
	_, err = machines.Update(ctx, cleared, metav1.UpdateOptions{})
	framework.RequireInvalid(t, err, msg)

	// Other fields stay mutable.
	other := set.DeepCopy()
	other.Spec.Source.Image = "example.com/m:2"
	if _, err := machines.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("an update that keeps identityRef must be accepted: %v", err)
	}
	unsetOther := unset.DeepCopy()
	unsetOther.Spec.IdentityRef = nil
	unsetOther.Spec.Source.Image = "example.com/m:2"
	if _, err := machines.Update(ctx, unsetOther, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("an update that keeps identityRef unset must be accepted: %v", err)
	}
}

func TestMachinePoolIdentityRefMutable(t *testing.T) {
	// A8
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "a8", nil)
	pools := e.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns)
	p, err := pools.Create(ctx, &v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec:       v1alpha1.TerraformMachinePoolSpec{Source: v1alpha1.SourceSpec{Image: "example.com/m:1"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []*v1alpha1.IdentityReference{{Name: "a"}, {Name: "b"}, nil} {
		p.Spec.IdentityRef = ref
		if p, err = pools.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("setting a pool's identityRef to %v must be accepted: %v", ref, err)
		}
	}
}

func TestReservedJobEnv(t *testing.T) {
	// A9: TF_*, KUBE_* and HOME are reserved in spec.jobs.env, on every kind;
	// B7 adds TERRAFORM_CONFIG and GODEBUG, which the runner removes.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "a9", nil)
	for _, tc := range []struct {
		env     string
		refused bool
	}{
		{"TF_VAR_region", true},
		{"TF_LOG", true},
		{"KUBE_CONFIG_PATH", true},
		{"HOME", true},
		{"TERRAFORM_CONFIG", true},
		{"GODEBUG", true},
		{"AWS_REGION", false},
		{"GODEBUG_X", false},
		{"TERRAFORM_CONFIG_DIR", false},
		{"HOMEDIR", false},
		{"MY_TF_FLAG", false},
	} {
		env := []corev1.EnvVar{{Name: "OK", Value: "1"}, {Name: tc.env, Value: "x"}}
		name := strings.ToLower(strings.ReplaceAll(tc.env, "_", "-"))
		c := cluster(ns, name, &v1alpha1.IdentityReference{Name: "x"})
		c.Spec.Jobs.Env = env
		_, errC := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{})
		_, errM := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TerraformMachineSpec{Jobs: v1alpha1.JobsSpec{Env: env}}}, metav1.CreateOptions{})
		_, errP := e.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.TerraformMachinePoolSpec{Jobs: v1alpha1.JobsSpec{Env: env}}}, metav1.CreateOptions{})
		for kind, err := range map[string]error{"cluster": errC, "machine": errM, "pool": errP} {
			t.Run(tc.env+"/"+kind, func(t *testing.T) {
				if tc.refused {
					framework.RequireInvalid(t, err, "spec.jobs.env", "must not set HOME, TERRAFORM_CONFIG, GODEBUG or names starting with TF_ or KUBE_")
				} else if err != nil {
					t.Fatalf("%s must be accepted: %v", tc.env, err)
				}
			})
		}
	}
}

func TestActiveDeadlineSeconds(t *testing.T) {
	// J4: default 3600, range 1-86400.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "j4", nil)
	clusters := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns)

	c, err := clusters.Create(ctx, cluster(ns, "default", &v1alpha1.IdentityReference{Name: "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Spec.Jobs.ActiveDeadlineSeconds; got == nil || *got != 3600 {
		t.Fatalf("activeDeadlineSeconds default: want 3600, got %v", got)
	}
	m, err := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "m"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Spec.Jobs.ActiveDeadlineSeconds; got == nil || *got != 3600 {
		t.Fatalf("machine activeDeadlineSeconds default: want 3600, got %v", got)
	}
	for _, v := range []int64{0, -1, 86401} {
		bad := cluster(ns, fmt.Sprintf("bad-%d", v+10), &v1alpha1.IdentityReference{Name: "x"})
		bad.Spec.Jobs.ActiveDeadlineSeconds = ptr.To(v)
		_, err := clusters.Create(ctx, bad, metav1.CreateOptions{})
		framework.RequireInvalid(t, err, "spec.jobs.activeDeadlineSeconds")
	}
	for _, v := range []int64{1, 86400} {
		good := cluster(ns, fmt.Sprintf("good-%d", v), &v1alpha1.IdentityReference{Name: "x"})
		good.Spec.Jobs.ActiveDeadlineSeconds = ptr.To(v)
		// T8: the lock wait (default 300) must stay below the deadline.
		good.Spec.Jobs.LockTimeoutSeconds = ptr.To(v - 1)
		if _, err := clusters.Create(ctx, good, metav1.CreateOptions{}); err != nil {
			t.Fatalf("activeDeadlineSeconds=%d must be accepted: %v", v, err)
		}
	}
}
