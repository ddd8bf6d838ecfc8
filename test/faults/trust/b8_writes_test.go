package trust

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestImmutableMirror covers B8 as the attack of issue 13: a tenant sets
// `immutable: true` on a real mirror, then the source rotates. The write
// fails, and it is never reported current: the user says
// CredentialsMirrored=False/MirrorFailed naming the mirror, with no value
// in the message (X1), the identity MirrorsCurrent False. Once the tenant
// deletes the immutable mirror it is recreated current (M8) and the
// condition is True again.
func TestImmutableMirror(t *testing.T) {
	f := start(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(ns))
	c := cluster(f, ns, "c", id, "")
	f.WaitCondition("c", conds(f, c), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	name := credentials.MirrorName(id)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		m, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.Immutable = new(true)
		_, err = f.Env.Kube.CoreV1().Secrets(ns).Update(f.Ctx, m, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	rotated := framework.DefaultData(rotatedValue(3))
	f.SetSource(ref, rotated)
	cond := f.WaitCondition("c", conds(f, c), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
	if !strings.Contains(cond.Message, name) {
		t.Errorf("B8: MirrorFailed must name the mirror %s: %q", name, cond.Message)
	}
	for _, s := range forbiddenValues() {
		if strings.Contains(cond.Message, s) {
			t.Errorf("X1: the MirrorFailed message contains a secret value or hash: %q", cond.Message)
		}
	}
	t.Logf("MirrorFailed: %s", cond.Message)
	if m := f.Mirror(ns, id); m == nil || m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated) {
		t.Fatalf("the immutable mirror cannot carry the new hash: %v", m)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionFalse, v1alpha1.ReasonMirrorsStale)
	// It stays failed, never reported current, over several sync periods.
	holdsCond(f, c.Name, 2*syncPeriod, func() (bool, string) {
		cs, err := conds(f, c)()
		if err != nil {
			return false, err.Error()
		}
		got := framework.Describe(cs)
		return strings.Contains(got, "CredentialsMirrored=False/MirrorFailed"), got
	})

	// The tenant deletes it: recreated current (M8).
	if err := f.Env.Kube.CoreV1().Secrets(ns).Delete(f.Ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	m := f.WaitMirror(ns, id, "recreated current", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated) && m.DeletionTimestamp == nil
	})
	if m.Immutable != nil && *m.Immutable {
		t.Errorf("the recreated mirror is immutable")
	}
	f.WaitCondition("c", conds(f, c), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)
	f.RequireNoSecretValues(forbiddenValues()...)
}

// TestRevocationWithSourceDeleted covers B8 for V1 and V5: with the source
// Secret deleted, narrowing allowedNamespaces still deletes the mirrors in
// the namespaces dropped: one whose cluster still exists (V1 or V5) and one
// left without a user (only the identity controller, V5, can remove it:
// nothing garbage-collects it here); status.namespaces drops both.
func TestRevocationWithSourceDeleted(t *testing.T) {
	f := start(t)
	ref, id, kept, dropped, orphan := revocationSetup(f)
	if err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Delete(f.Ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	narrow(f, id, kept, dropped, orphan)
	f.WaitIdentityNamespaces(id, []string{kept})
}

// TestRevocationWithSourceUnreadable covers B8 where the source cannot be
// read at all: every read of it through a proxy in front of the API server
// fails with 500 (as a failing or refusing API server would). Narrowing
// allowedNamespaces still deletes the mirrors in the namespaces dropped,
// the user-less one included, which only the identity controller's V5 can
// remove: revocation never waits on the source.
func TestRevocationWithSourceUnreadable(t *testing.T) {
	e := framework.Get(t)
	proxy, err := faultkit.StartFlakyProxy(e.CP.URL, e.CP.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig-proxy")
	if err := proxy.WriteKubeconfig(kubeconfig, controlplane.Manager, e.CP.Users[controlplane.Manager].Token); err != nil {
		t.Fatal(err)
	}
	f := start(t, kubeconfig)
	ref, id, kept, dropped, orphan := revocationSetup(f)
	source := "/api/v1/namespaces/" + ref.Namespace + "/secrets/" + ref.Name
	proxy.SetFaults(&faultkit.Faults{Error500: 1, Only: func(r *http.Request) bool {
		return r.Method == http.MethodGet && r.URL.Path == source
	}})
	// The manager has met the failure before the identity changes.
	f.WaitFor("a read of the source failed", func() (bool, string) {
		n := proxy.Counts()[faultkit.FaultError500]
		return n > 0, fmt.Sprintf("%d reads failed", n)
	})
	narrow(f, id, kept, dropped, orphan)
	t.Logf("reads of the source refused meanwhile: %d", proxy.Counts()[faultkit.FaultError500])
	// S2 follows the revocation while the source is still unreadable.
	f.WaitFor("status.namespaces lists only the namespace still allowed", func() (bool, string) {
		got := identity(f, id).Status.Namespaces
		return len(got) == 1 && got[0] == kept, fmt.Sprintf("status.namespaces %v", got)
	})
}

// revocationSetup creates a source, an identity allowing three namespaces
// and a cluster with its mirror in each; the cluster in orphan is then
// deleted and its mirror stays (no garbage collector here).
func revocationSetup(f *framework.Fixture) (ref v1alpha1.SecretReference, id, kept, dropped, orphan string) {
	f.T.Helper()
	kept = f.Env.CreateNamespace(f.T, "kept", nil)
	dropped = f.Env.CreateNamespace(f.T, "dropped", nil)
	orphan = f.Env.CreateNamespace(f.T, "orphan", nil)
	ref = f.Source(framework.DefaultData(secretValue))
	id = f.Identity(ref, framework.List(kept, dropped, orphan))
	for _, ns := range []string{kept, dropped, orphan} {
		c := cluster(f, ns, "c", id, "")
		f.WaitCondition("c in "+ns, conds(f, c), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	}
	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(orphan).Delete(f.Ctx, "c", metav1.DeleteOptions{}); err != nil {
		f.T.Fatal(err)
	}
	f.WaitIdentityNamespaces(id, slices.Sorted(slices.Values([]string{kept, dropped, orphan})))
	return ref, id, kept, dropped, orphan
}

// narrow drops dropped and orphan from the identity's allowedNamespaces
// and waits for their mirrors to go (V1, V5).
func narrow(f *framework.Fixture, id, kept, dropped, orphan string) {
	f.T.Helper()
	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(kept) })
	f.WaitNoMirror(dropped, id)
	f.WaitNoMirror(orphan, id)
}
