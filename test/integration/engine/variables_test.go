package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework"
)

// TestVariablesFromObjects proves O9 on the real API server with the
// manager's shipped RBAC: the CRD refuses an entry naming both kinds; an
// unlabelled source holds the apply back (VariablesSourceNotFound);
// labelling it starts the apply, whose run Secret (not the Job) carries
// the ConfigMap's and the Secret's values (the Secret's is the package's
// secretValue, so TestX1NoSecretValueAnywhere scans for it too); a change
// of the ConfigMap re-applies the cluster.
func TestVariablesFromObjects(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "vars", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	cms := f.Env.Kube.CoreV1().ConfigMaps(ns)

	both := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "both", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"},
			VariablesFrom: []v1alpha1.VariablesFromSource{{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "a"}, SecretRef: &v1alpha1.LocalObjectReference{Name: "b"}}}}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, both, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "exactly one of configMapRef and secretRef") {
		t.Fatalf("O9: an entry naming a ConfigMap and a Secret must be refused by the CRD, got %v", err)
	}

	if _, err := cms.Create(f.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "net"}, Data: map[string]string{"size": "3"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db",
		Labels: map[string]string{v1alpha1.LabelVariables: v1alpha1.LabelTrue}}, StringData: map[string]string{"db_password": secretValue}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"},
			VariablesFrom: []v1alpha1.VariablesFromSource{
				{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: "net"}},
				{SecretRef: &v1alpha1.LocalObjectReference{Name: "db"}},
			}}}
	if _, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	get := func() ([]metav1.Condition, error) {
		return f.GetCluster(ns, "c").Status.Conditions, nil
	}
	cond := f.WaitCondition("the unlabelled source", get, v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonVariablesSourceNotFound)
	if !strings.Contains(cond.Message, "ConfigMap net is not labelled captf.io/variables=true") {
		t.Errorf("O9: message %q", cond.Message)
	}
	if n := len(f.Jobs(ns, v1alpha1.JobActionApply)); n != 0 {
		t.Fatalf("O9: %d apply Jobs while a source is missing", n)
	}

	cm, err := cms.Get(f.Ctx, "net", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{v1alpha1.LabelVariables: v1alpha1.LabelTrue}
	if _, err := cms.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	j := applyJob(f, ns, 1)
	b, _ := json.Marshal(j)
	if strings.Contains(string(b), secretValue) {
		t.Fatalf("O9: a Secret-sourced value is in Job %s", j.Name)
	}
	in := runInputs(f, ns, j.Name)
	if string(in["size"]) != `"3"` || string(in["db_password"]) != fmt.Sprintf("%q", secretValue) {
		t.Errorf("O9: the run Secret's inputs lack the sources' values: size=%s, db_password set=%v", in["size"], in["db_password"] != nil)
	}

	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the apply recorded", func() (bool, string) {
		got := f.GetCluster(ns, "c")
		return got.Status.LastApply != nil && got.Status.LastApply.JobName == j.Name, framework.Describe(got.Status.Conditions)
	})
	cm, err = cms.Get(f.Ctx, "net", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["size"] = "4"
	if _, err := cms.Update(f.Ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("a re-apply after the source changed", func() (bool, string) {
		for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if x.Name != j.Name && jobs.AttemptOf(&x) == 2 {
				if got := runInputs(f, ns, x.Name); string(got["size"]) == `"4"` {
					return true, ""
				}
			}
		}
		cond := meta.FindStatusCondition(f.GetCluster(ns, "c").Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		return false, fmt.Sprintf("%d apply Jobs; %+v", len(f.Jobs(ns, v1alpha1.JobActionApply)), cond)
	})
}

// runInputs returns the inputs in Job name's run Secret (nil until it
// exists).
func runInputs(f *framework.Fixture, ns, name string) contract.Inputs {
	f.T.Helper()
	var in contract.Inputs
	f.WaitFor("the run Secret of "+name, func() (bool, string) {
		s, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, jobs.RunSecretName(name), metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		in, err = contract.DecodeInputs(s.Data[jobs.InputsKey])
		return err == nil, fmt.Sprint(err)
	})
	return in
}
