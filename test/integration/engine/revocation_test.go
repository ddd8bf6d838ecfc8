package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestRevocationByList checks V1 and I4: narrowing the list deletes the
// namespace's mirror at once and reports NamespaceNotAllowed/MirrorPending;
// re-allowing brings it back.
func TestRevocationByList(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	other := f.Env.CreateNamespace(t, "other", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns, other))
	c := f.Cluster(ns, "demo", id)
	f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(other) })
	f.WaitNoMirror(ns, id)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
	f.WaitIdentityNamespaces(id, nil)

	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(ns) })
	f.WaitMirror(ns, id, "re-created", func(*corev1.Secret) bool { return true })
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	f.WaitIdentityNamespaces(id, []string{ns})
}

// TestRevocationByNamespaceRelabel checks N5 and V1 with a selector.
func TestRevocationByNamespaceRelabel(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", map[string]string{"captf-test/team": "a"})
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"captf-test/team": "a"}}})
	c := f.Cluster(ns, "demo", id)
	f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	n, err := f.Env.Kube.CoreV1().Namespaces().Get(f.Ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Labels["captf-test/team"] = "b"
	if _, err := f.Env.Kube.CoreV1().Namespaces().Update(f.Ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitNoMirror(ns, id)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
}

// TestEverySelectorAllowsNewNamespaces checks N1 `selector: {}`: a namespace
// created after the identity is allowed.
func TestEverySelectorAllowsNewNamespaces(t *testing.T) {
	f := setup(t)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}})
	ns := f.Env.CreateNamespace(t, "later", nil)
	f.Cluster(ns, "demo", id)
	f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
}
