package trust

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestForgedSuspendedJob covers B2 for C5 as the attack of issue 13: in an
// allowed namespace a tenant creates suspended Jobs the manager did not
// create, with its label and the identity and an old source-hash
// annotation: one without an owner, one controlled by a TerraformCluster
// that does not exist, one by the name of the real cluster with another
// UID. None may count: RotationComplete stays True before a rotation, and
// after one, it waits only for the manager's own Job (counted, the
// positive control) and is True once that Job ends, so `kubectl wait
// --for=condition=RotationComplete` returns.
func TestForgedSuspendedJob(t *testing.T) {
	f := start(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(ns))
	c := cluster(f, ns, "c", id, moduleImage)
	real := f.WaitJob(ns, v1alpha1.JobActionApply)
	waitIdentity(f, id, "RotationComplete before the attack", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionRotationComplete) && condTrue(i, v1alpha1.ConditionMirrorsCurrent)
	})

	old := map[string]string{v1alpha1.AnnotationIdentity: id, v1alpha1.AnnotationSourceHash: "0000forged-old-hash"}
	forged := map[string]*metav1.OwnerReference{
		"forged-no-owner":    nil,
		"forged-ghost-owner": clusterRef("ghost", "6b1c1e0e-0000-4000-8000-000000000001"),
		"forged-wrong-uid":   clusterRef(c.Name, "6b1c1e0e-0000-4000-8000-000000000002"),
	}
	for name, owner := range forged {
		if _, err := f.Env.Kube.BatchV1().Jobs(ns).Create(f.Ctx, forgedJob(ns, name, old, owner, nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Several identity resyncs: the forged Jobs, on "previous credentials",
	// never make RotationComplete False.
	holds(f, id, "RotationComplete with forged Jobs on an old hash", 3*identityResync, func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionRotationComplete) && (i.Status.Rotation == nil || i.Status.Rotation.JobsOnPreviousCredentials == 0)
	})

	// A rotation: the manager's own running Job counts (the control), the
	// forged ones do not.
	rotated := framework.DefaultData(rotatedValue(1))
	f.SetSource(ref, rotated)
	f.WaitMirror(ns, id, "rotated", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	cond := f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials)
	if !strings.Contains(cond.Message, real.Name) || strings.Contains(cond.Message, "forged") {
		t.Errorf("C5/B2: the message must name the manager's Job %s and no forged one: %q", real.Name, cond.Message)
	}
	if r := identity(f, id).Status.Rotation; r == nil || r.JobsOnPreviousCredentials != 1 {
		t.Errorf("B2: status.rotation must count the manager's Job only: %+v", r)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, real.Name, ""); err != nil {
		t.Fatal(err)
	}
	kubectlWaitRotation(f, id)
	i := waitIdentity(f, id, "RotationComplete after the rotation", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionRotationComplete)
	})
	if r := i.Status.Rotation; r == nil || r.JobsOnPreviousCredentials != 0 || r.MirrorsStale != 0 || r.MirrorsCurrent != 1 {
		t.Errorf("B2: status.rotation after the rotation: %+v", r)
	}
	holds(f, id, "RotationComplete after the rotation, forged Jobs still there", 2*identityResync, func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionRotationComplete)
	})
	for name := range forged {
		if _, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, name, metav1.GetOptions{}); err != nil {
			t.Logf("forged Job %s: %v", name, err)
		}
	}
}

// kubectlWaitRotation runs the runbook's `kubectl wait
// --for=condition=RotationComplete` when bin/kubectl exists; it must
// return successfully.
func kubectlWaitRotation(f *framework.Fixture, id string) {
	f.T.Helper()
	kubectl := filepath.Join(f.Env.Root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		f.T.Logf("bin/kubectl is missing: the runbook's kubectl wait is not run (the condition is polled instead)")
		return
	}
	cmd := exec.CommandContext(f.Ctx, kubectl, "--kubeconfig", f.Env.CP.KubeconfigPath(controlplane.Admin),
		"wait", "--for=condition=RotationComplete", "--timeout="+settle.String(),
		"terraformclusteridentities.infrastructure.cluster.x-k8s.io/"+id)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		f.T.Fatalf("kubectl wait --for=condition=RotationComplete did not return: %v\n%s\n%s", err, out, describeStatus(identity(f, id)))
	}
	f.T.Logf("kubectl wait returned after %s: %s", time.Since(start).Round(100*time.Millisecond), strings.TrimSpace(string(out)))
}

// TestForgedOwnerlessMirror covers B2 for S2 and A4 as the attack of issue
// 13: in an allowed namespace where nothing uses the identity, a tenant
// creates a Secret named like its mirror, with the label, the identity
// annotation and another hash, and no owner. It never counts in
// status.mirrors or status.rotation, so MirrorsCurrent and
// RotationComplete stay True (also through a rotation); but, as the seeds
// say, it is listed in status.namespaces and the webhook refuses the
// identity's deletion naming its namespace until it is deleted.
func TestForgedOwnerlessMirror(t *testing.T) {
	f := start(t)
	used := f.Env.CreateNamespace(t, "used", nil)
	unused := f.Env.CreateNamespace(t, "unused", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(used, unused))
	c := cluster(f, used, "c", id, "")
	f.WaitCondition("c", conds(f, c), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)

	if _, err := f.Env.Kube.CoreV1().Secrets(unused).Create(f.Ctx, forgedMirror(unused, id, "0000forged-old-hash", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// S2: listed; B2: not counted.
	f.WaitIdentityNamespaces(id, slices.Sorted(slices.Values([]string{used, unused})))
	onlyReal := func(i *v1alpha1.TerraformClusterIdentity) bool {
		m, r := i.Status.Mirrors, i.Status.Rotation
		return condTrue(i, v1alpha1.ConditionMirrorsCurrent) && condTrue(i, v1alpha1.ConditionRotationComplete) &&
			m != nil && m.Total == 1 && m.Current == 1 && m.Stale == 0 && r != nil && r.MirrorsStale == 0 && r.MirrorsCurrent == 1
	}
	waitIdentity(f, id, "the forged mirror listed, not counted", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return len(i.Status.Namespaces) == 2 && onlyReal(i)
	})
	holds(f, id, "MirrorsCurrent and RotationComplete with a forged stale mirror", 3*identityResync, onlyReal)

	// Through a rotation too.
	rotated := framework.DefaultData(rotatedValue(2))
	f.SetSource(ref, rotated)
	f.WaitMirror(used, id, "rotated", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	waitIdentity(f, id, "rotation complete with a forged stale mirror", onlyReal)
	if got := f.Mirror(unused, id); got == nil || got.Annotations[v1alpha1.AnnotationSourceHash] != "0000forged-old-hash" {
		t.Logf("the forged mirror after the rotation: %v", got)
	}

	// A4 stays: once the real user and its mirror are gone (as the garbage
	// collector would remove it), the deletion is refused naming the
	// namespace of the look-alike until it is deleted.
	if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(used).Delete(f.Ctx, c.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("cluster gone", func() (bool, string) {
		_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(used).Get(f.Ctx, c.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), "cluster still exists"
	})
	if m := f.Mirror(used, id); m != nil {
		if err := f.Env.Kube.CoreV1().Secrets(used).Delete(f.Ctx, m.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	f.WaitIdentityNamespaces(id, []string{unused})
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	f.WaitFor("A4: deletion refused naming the look-alike's namespace", func() (bool, string) {
		err := ids.Delete(f.Ctx, id, metav1.DeleteOptions{})
		if err == nil {
			t.Fatalf("A4: the identity was deleted while a look-alike mirror in %s holds it", unused)
		}
		return strings.Contains(err.Error(), unused) && !strings.Contains(err.Error(), used), err.Error()
	})
	if err := f.Env.Kube.CoreV1().Secrets(unused).Delete(f.Ctx, forgedMirror(unused, id, "", nil).Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("A4: deletion allowed once the look-alike is deleted", func() (bool, string) {
		err := ids.Delete(f.Ctx, id, metav1.DeleteOptions{})
		return err == nil || apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}
