package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestRevocationByList checks V1 and I4: narrowing the list deletes the
// namespace's mirror at once and reports NamespaceNotAllowed/MirrorPending;
// re-allowing brings it back.
func TestRevocationByList(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "tenant", nil)
	other := f.e.CreateNamespace(t, "other", nil)
	id := f.identity(f.source(defaultData()), list(ns, other))
	c := f.cluster(ns, "demo", id)
	f.waitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	f.editIdentity(id, func(i *v1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = list(other) })
	f.waitNoMirror(ns, id)
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionIdentityAllowed, metav1.ConditionFalse, v1.ReasonNamespaceNotAllowed)
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1.ReasonMirrorPending)
	f.waitIdentityNamespaces(id, nil)

	f.editIdentity(id, func(i *v1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = list(ns) })
	f.waitMirror(ns, id, "re-created", func(*corev1.Secret) bool { return true })
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionIdentityAllowed, metav1.ConditionTrue, v1.ReasonIdentityAllowed)
	f.waitIdentityNamespaces(id, []string{ns})
}

// TestRevocationByNamespaceRelabel checks N5 and V1 with a selector.
func TestRevocationByNamespaceRelabel(t *testing.T) {
	f := setup(t)
	ns := f.e.CreateNamespace(t, "tenant", map[string]string{"captf-test/team": "a"})
	id := f.identity(f.source(defaultData()), &v1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf-test/team": "a"}}})
	c := f.cluster(ns, "demo", id)
	f.waitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	n, err := f.e.Kube.CoreV1().Namespaces().Get(f.ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["captf-test/team"] = "b"
	if _, err := f.e.Kube.CoreV1().Namespaces().Update(f.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.waitNoMirror(ns, id)
	f.waitCondition("cluster", f.clusterConds(ns, c.Name), v1.ConditionIdentityAllowed, metav1.ConditionFalse, v1.ReasonNamespaceNotAllowed)
}

// TestEverySelectorAllowsNewNamespaces checks N1 `selector: {}`: a namespace
// created after the identity is allowed.
func TestEverySelectorAllowsNewNamespaces(t *testing.T) {
	f := setup(t)
	id := f.identity(f.source(defaultData()), &v1.AllowedNamespaces{Selector: &metav1.LabelSelector{}})
	ns := f.e.CreateNamespace(t, "later", nil)
	f.cluster(ns, "demo", id)
	f.waitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
}

func (f *fixture) editIdentity(name string, edit func(*v1.TerraformClusterIdentity)) {
	f.t.Helper()
	ids := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	i, err := ids.Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	edit(i)
	if _, err := ids.Update(f.ctx, i, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// waitIdentityNamespaces waits until status.namespaces equals want (S2).
func (f *fixture) waitIdentityNamespaces(name string, want []string) {
	f.t.Helper()
	waitFor(f, "identity status.namespaces", func() (bool, string) {
		i, err := f.e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got := i.Status.Namespaces
		if len(got) != len(want) {
			return false, "namespaces " + join(got)
		}
		for k := range got {
			if got[k] != want[k] {
				return false, "namespaces " + join(got)
			}
		}
		return true, ""
	})
}
