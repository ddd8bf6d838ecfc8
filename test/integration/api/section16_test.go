package api

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// createRaw posts body (a JSON object's spec) as a TerraformCluster, the way
// kubectl sends YAML: the typed client could not send a non-object
// spec.variables.
func createRaw(t *testing.T, e *framework.Env, ns, name, spec string) error {
	t.Helper()
	body := fmt.Sprintf(`{"apiVersion":"infrastructure.cluster.x-k8s.io/v1alpha1","kind":"TerraformCluster",
		"metadata":{"name":%q,"namespace":%q},"spec":%s}`, name, ns, spec)
	return e.Captf.InfrastructureV1alpha1().RESTClient().Post().Namespace(ns).Resource("terraformclusters").
		Body([]byte(body)).SetHeader("Content-Type", "application/json").Do(framework.Context(t)).Error()
}

func TestVariablesValidation(t *testing.T) {
	// T3: spec.variables is a JSON object of at most 256 keys, on every
	// kind. The keys' syntax, the reserved captf_ prefix and the 64 KiB are
	// beyond the CRD (CEL sees no key of an object without a schema: the
	// API server refuses such a rule at CRD creation), see
	// jobs.ValidateVariables and docs/design.md.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "t3", nil)
	many := func(n int) string {
		m := make(map[string]int, n)
		for i := range n {
			m[fmt.Sprintf("v%d", i)] = i
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	const spec = `{"identityRef":{"name":"x"},"variables":%s}`
	for i, tc := range []struct {
		name      string
		variables string
		// wantErr holds fragments of the refusal; empty means accepted.
		wantErr []string
	}{
		{name: "values of every JSON type accepted", variables: `{"region":"eu-west-1","count":3,"ratio":0.5,"on":true,"none":null,"zones":["a","b"],"tags":{"team":"a"},"_x":1,"a-b_9":2}`},
		{name: "empty object accepted", variables: `{}`},
		{name: "256 keys accepted", variables: many(256)},
		{name: "257 keys refused", variables: many(257), wantErr: []string{"spec.variables", "must have at most 256 items"}},
		{name: "a string refused", variables: `"region=eu"`, wantErr: []string{"spec.variables", "must be of type object"}},
		{name: "a list refused", variables: `[{"region":"eu"}]`, wantErr: []string{"spec.variables", "must be of type object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := createRaw(t, e, ns, fmt.Sprintf("v%d", i), fmt.Sprintf(spec, tc.variables))
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("expected the API server to accept it: %v", err)
				}
				return
			}
			framework.RequireInvalid(t, err, tc.wantErr...)
		})
	}

	// The stored value round-trips through the typed client, and the
	// machine and pool kinds validate it alike.
	c, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(ctx, "v0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if c.Spec.Variables == nil || json.Unmarshal(c.Spec.Variables.Raw, &got) != nil || got["region"] != "eu-west-1" || got["none"] != nil || len(got) != 9 {
		t.Fatalf("stored spec.variables: %v", c.Spec.Variables)
	}
	bad := &runtime.RawExtension{Raw: []byte(`["region"]`)}
	_, errM := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TerraformMachineSpec{Variables: bad}}, metav1.CreateOptions{})
	framework.RequireInvalid(t, errM, "spec.variables", "must be of type object")
	_, errP := e.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.TerraformMachinePoolSpec{Variables: bad}}, metav1.CreateOptions{})
	framework.RequireInvalid(t, errP, "spec.variables", "must be of type object")

	// T3, J1: a change of the variables is a spec change, a new generation.
	c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"region":"us-east-1"}`)}
	updated, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation != c.Generation+1 {
		t.Fatalf("changing spec.variables: generation %d -> %d, want a new generation", c.Generation, updated.Generation)
	}
}

func TestLockTimeoutSeconds(t *testing.T) {
	// T8 as amended: not defaulted in the object (300 s, or half a short
	// deadline, is applied when the Job is built), at least 0, below
	// activeDeadlineSeconds when set.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "t8", nil)
	clusters := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns)

	c, err := clusters.Create(ctx, cluster(ns, "default", &v1alpha1.IdentityReference{Name: "x"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Spec.Jobs.LockTimeoutSeconds; got != nil {
		t.Fatalf("lockTimeoutSeconds: want unset (no stored default), got %v", *got)
	}
	for i, tc := range []struct {
		lock, deadline *int64
		wantErr        []string
	}{
		{lock: ptr.To[int64](0)},
		{lock: ptr.To[int64](59), deadline: ptr.To[int64](60)},
		{lock: ptr.To[int64](3599)},
		{lock: ptr.To[int64](-1), wantErr: []string{"spec.jobs.lockTimeoutSeconds"}},
		{lock: ptr.To[int64](60), deadline: ptr.To[int64](60), wantErr: []string{"spec.jobs", "must be below spec.jobs.activeDeadlineSeconds"}},
		{lock: ptr.To[int64](3600), wantErr: []string{"spec.jobs", "must be below spec.jobs.activeDeadlineSeconds"}},
		// Unset, nothing is compared: every deadline J4 allows is valid.
		{deadline: ptr.To[int64](120)},
		{deadline: ptr.To[int64](1)},
	} {
		t.Run(fmt.Sprintf("lock=%v,deadline=%v", ptr.Deref(tc.lock, -99), ptr.Deref(tc.deadline, -99)), func(t *testing.T) {
			obj := cluster(ns, fmt.Sprintf("c%d", i), &v1alpha1.IdentityReference{Name: "x"})
			obj.Spec.Jobs.LockTimeoutSeconds = tc.lock
			obj.Spec.Jobs.ActiveDeadlineSeconds = tc.deadline
			_, err := clusters.Create(ctx, obj, metav1.CreateOptions{})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("expected the API server to accept it: %v", err)
				}
				return
			}
			framework.RequireInvalid(t, err, tc.wantErr...)
		})
	}
}

func TestSecurityContextOverrides(t *testing.T) {
	// T6: the overrides are accepted, except privileged, privilege escalation
	// and added capabilities.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "t6", nil)
	for i, tc := range []struct {
		name    string
		pod     *corev1.PodSecurityContext
		ctr     *corev1.SecurityContext
		wantErr []string
	}{
		{name: "pod overrides accepted", pod: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), FSGroup: ptr.To[int64](1000),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}},
		{name: "container overrides accepted", ctr: &corev1.SecurityContext{RunAsUser: ptr.To[int64](1000), ReadOnlyRootFilesystem: ptr.To(false),
			Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}},
		{name: "privileged refused", ctr: &corev1.SecurityContext{Privileged: ptr.To(true)},
			wantErr: []string{"spec.jobs.securityContext", "privileged must not be true"}},
		{name: "allowPrivilegeEscalation refused", ctr: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(true)},
			wantErr: []string{"spec.jobs.securityContext", "allowPrivilegeEscalation must not be true"}},
		{name: "added capability refused", ctr: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
			wantErr: []string{"spec.jobs.securityContext", "capabilities.add must be empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := cluster(ns, fmt.Sprintf("c%d", i), &v1alpha1.IdentityReference{Name: "x"})
			obj.Spec.Jobs.PodSecurityContext = tc.pod
			obj.Spec.Jobs.SecurityContext = tc.ctr
			got, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, obj, metav1.CreateOptions{})
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("expected the API server to accept it: %v", err)
				}
				if tc.pod != nil && ptr.Deref(got.Spec.Jobs.PodSecurityContext.RunAsUser, 0) != 1000 ||
					tc.ctr != nil && ptr.Deref(got.Spec.Jobs.SecurityContext.RunAsUser, 0) != 1000 {
					t.Fatalf("override not stored: %+v", got.Spec.Jobs)
				}
				return
			}
			framework.RequireInvalid(t, err, tc.wantErr...)
		})
	}
	// The machine and pool kinds share JobsSpec; one refusal each.
	ctr := &corev1.SecurityContext{Privileged: ptr.To(true)}
	_, errM := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: v1alpha1.TerraformMachineSpec{Jobs: v1alpha1.JobsSpec{SecurityContext: ctr}}}, metav1.CreateOptions{})
	framework.RequireInvalid(t, errM, "privileged must not be true")
	_, errP := e.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1alpha1.TerraformMachinePoolSpec{Jobs: v1alpha1.JobsSpec{SecurityContext: ctr}}}, metav1.CreateOptions{})
	framework.RequireInvalid(t, errP, "privileged must not be true")
}

func TestReservedCaptfJobEnv(t *testing.T) {
	// T3 (with A9): CAPTF_* names are the Job's, so the object cannot
	// override CAPTF_VARIABLES.
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "t3env", nil)
	for _, name := range []string{"CAPTF_VARIABLES", "CAPTF_OTHER"} {
		c := cluster(ns, strings.ToLower(strings.ReplaceAll(name, "_", "-")), &v1alpha1.IdentityReference{Name: "x"})
		c.Spec.Jobs.Env = []corev1.EnvVar{{Name: name, Value: "{}"}}
		_, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{})
		framework.RequireInvalid(t, err, "spec.jobs.env", "must not set names starting with CAPTF_")
	}
	c := cluster(ns, "my-captf", &v1alpha1.IdentityReference{Name: "x"})
	c.Spec.Jobs.Env = []corev1.EnvVar{{Name: "MY_CAPTF_X", Value: "1"}}
	if _, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatalf("MY_CAPTF_X must be accepted: %v", err)
	}
}
