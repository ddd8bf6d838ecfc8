package load

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestIdentityGoneWhileManagerDown is SPEC V5 across a restart: an identity
// that is gone when the manager starts has all its mirrors removed by the
// identity controller, though no event about the identity ever reaches the
// new manager and no user's reconcile removes them (a user whose identity
// does not exist only reports IdentityAllowed=False/IdentityNotFound, I2).
// The mirrors and Jobs of the informers' initial list enqueue nothing
// themselves; the identity controller enqueues, once its caches have synced,
// every identity that a mirror or Job names but that does not exist
// (pkg/controllers/identity, enqueueGone). Without that, these mirrors
// would stay until someone deleted them by hand.
//
// Two identities are gone when the manager restarts:
//
//   - one with real mirrors, owned by live users in two namespaces, deleted
//     while the manager was down. Identities carry no finalizer, so the
//     delete only has to pass admission. In production the identity webhook
//     (manifests/webhook, failurePolicy: Fail) refuses it while users or
//     mirrors remain (A4), and refuses every identity delete while no
//     manager serves the webhook; such an identity is gone with mirrors
//     left only when the delete bypassed the webhook (its configuration
//     removed or not installed, as when the manifests are reinstalled) or
//     the manager stopped between an allowed delete and its removal of the
//     mirrors. This package installs no webhook configuration (only
//     test/integration/admission and test/faults/trust do, through
//     framework.InstallWebhook), so the admin's delete here is that
//     bypass: the same as deleting with the configuration temporarily
//     removed.
//   - one that never existed, named by a Secret that looks like its mirror
//     (M1 name, M3 label and annotation, no owner reference), created by
//     the admin while the manager was down. The shipped trust-boundary
//     policy (B3, installed by framework.Main) lets only the manager and
//     system:masters set those marks, so only an administrator can make
//     one; the admin client here is system:masters. B2 says such a Secret
//     counts for S2 and A4 ("holds the identity until it is deleted"), so
//     it is a mirror of that identity for V5: the manager removes it too.
//
// The test needs to be the only manager on the control plane while its
// own is down: another one would remove the mirrors first and the restart
// would prove nothing. The package's shared manager starts with the first
// setup call (input_selector_test.go, which this file sorts before, as
// TestNamespaceDeletionDestroySucceededWhileManagerDown does); the test
// checks that every Secret is still there just before the restart and
// that the restarted manager's own log records each deletion, and fails
// if not.
func TestIdentityGoneWhileManagerDown(t *testing.T) {
	args := []string{"--sync-period=" + syncPeriod.String(), "--identity-resync=" + identityResync.String(), "--workers=4"}
	f := ownManager(t, args...)
	e := f.Env
	nsA := e.CreateNamespace(t, "gone-a", nil)
	nsB := e.CreateNamespace(t, "gone-b", nil)
	nsForged := e.CreateNamespace(t, "gone-forged", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(nsA, nsB))
	// No module image: the users stop at the mirror, start no Job and so
	// carry no captf.io/destroy finalizer (the namespaces go at the end).
	users := []workload{mustCreate(f, kindCluster, nsA, "user", id, ""), mustCreate(f, kindPool, nsB, "user", id, "")}
	for _, w := range users {
		f.WaitMirror(w.Namespace, id, "a mirror owned by "+w.String(), func(m *corev1.Secret) bool { return sameUIDs(m, []workload{w}) == "" })
	}
	// status.namespaces lists both: A4 would refuse the delete through the
	// webhook (S2).
	namespaces := []string{nsA, nsB}
	sort.Strings(namespaces)
	f.WaitIdentityNamespaces(id, namespaces)
	src, err := e.Kube.CoreV1().Secrets(ref.Namespace).Get(f.Ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	f.Manager.Stop(t)
	requireLogClean(f, secretValue, framework.HashOf(data))
	ids := e.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	if err := ids.Delete(f.Ctx, id, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting identity %s while the manager is down: %v", id, err)
	}
	f.WaitFor("identity "+id+" gone", func() (bool, string) {
		_, err := ids.Get(f.Ctx, id, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	ghost := framework.Name("never")
	forged := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: nsForged, Name: credentials.MirrorName(ghost),
			Labels:      map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue, v1alpha1.LabelManaged: v1alpha1.LabelTrue},
			Annotations: map[string]string{v1alpha1.AnnotationIdentity: ghost}},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"token": "forged"},
	}
	if _, err := e.Kube.CoreV1().Secrets(nsForged).Create(f.Ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a look-alike mirror of %s as system:masters: %v", ghost, err)
	}
	if _, err := ids.Get(f.Ctx, ghost, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("identity %s should not exist: %v", ghost, err)
	}

	type secretName struct{ namespace, name, identity string }
	doomed := []secretName{
		{nsA, credentials.MirrorName(id), id},
		{nsB, credentials.MirrorName(id), id},
		{nsForged, credentials.MirrorName(ghost), ghost},
	}
	for _, s := range doomed {
		if _, err := e.Kube.CoreV1().Secrets(s.namespace).Get(f.Ctx, s.name, metav1.GetOptions{}); err != nil {
			t.Fatalf("%s/%s before the restart: %v (is another manager running? the restart would prove nothing)", s.namespace, s.name, err)
		}
	}

	f.Manager = e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Args: args})
	f.WaitFor("the gone identities' mirrors deleted after the restart (V5)", func() (bool, string) {
		var left []string
		for _, s := range doomed {
			_, err := e.Kube.CoreV1().Secrets(s.namespace).Get(f.Ctx, s.name, metav1.GetOptions{})
			switch {
			case err == nil:
				left = append(left, s.namespace+"/"+s.name)
			case !apierrors.IsNotFound(err):
				return false, err.Error()
			}
		}
		return len(left) == 0, fmt.Sprintf("still there: %v", left)
	})
	// The restarted manager removed them, not another process. It logs a
	// deletion once the DELETE has returned, which may be just after the
	// Secret is seen gone: wait for the lines.
	f.WaitFor("the restarted manager's log records each deletion", func() (bool, string) {
		log := f.Manager.Log()
		for _, s := range doomed {
			if !logged(log, "Deleted mirror", fmt.Sprintf("mirror=%q", s.namespace+"/"+s.name), "TerraformClusterIdentity "+s.identity+" is gone") {
				return false, fmt.Sprintf("no record of deleting %s/%s because %s is gone; its deletions:\n%s",
					s.namespace, s.name, s.identity, grep(log, "Deleted mirror", 20))
			}
		}
		return true, ""
	})
	// The users remain and say why they have no credentials; their
	// reconciles did not bring the mirrors back (checked above, after
	// they ran) and need not have removed them.
	for _, w := range users {
		f.WaitCondition(w.String(), conds(f, w), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotFound)
		if m := f.Mirror(w.Namespace, id); m != nil {
			t.Errorf("the mirror in %s is back after %s reconciled: owners %v", w.Namespace, w, framework.OwnerNames(m))
		}
	}
	// V6: the source Secret is left as it was.
	after, err := e.Kube.CoreV1().Secrets(ref.Namespace).Get(f.Ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("source Secret %s/%s after the restart: %v", ref.Namespace, ref.Name, err)
	}
	if after.ResourceVersion != src.ResourceVersion {
		t.Errorf("source Secret %s/%s changed: resourceVersion %s, was %s", ref.Namespace, ref.Name, after.ResourceVersion, src.ResourceVersion)
	}
	requireLogClean(f, secretValue, framework.HashOf(data))
}

// logged reports whether one line of log contains every fragment.
func logged(log string, fragments ...string) bool {
	for _, l := range strings.Split(log, "\n") {
		all := true
		for _, s := range fragments {
			if !strings.Contains(l, s) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}
