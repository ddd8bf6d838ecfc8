package engine

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/integration/framework"
)

// TestMirrorCreated checks M1-M3, M5 and the conditions of a fresh cluster.
func TestMirrorCreated(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	id := f.Identity(f.Source(data), framework.List(ns))
	c := f.Cluster(ns, "demo", id)

	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	m := f.Mirror(ns, id)
	if m == nil {
		t.Fatal("no mirror")
	}
	if m.Name != "captf-creds-"+id || m.Type != corev1.SecretTypeOpaque {
		t.Errorf("M1/M2: name %q type %q", m.Name, m.Type)
	}
	if m.Labels[v1alpha1.LabelMirrored] != "true" || m.Labels[v1alpha1.LabelManaged] != "true" || len(m.Labels) != 2 {
		t.Errorf("M3 labels: %v", m.Labels)
	}
	if m.Annotations[v1alpha1.AnnotationIdentity] != id || m.Annotations[v1alpha1.AnnotationSourceHash] != framework.HashOf(data) {
		t.Errorf("M3/M4 annotations: %v, want hash %s", m.Annotations, framework.HashOf(data))
	}
	for k, v := range data {
		if string(m.Data[k]) != v {
			t.Errorf("M2: key %s not copied", k)
		}
	}
	if len(m.Data) != len(data) {
		t.Errorf("M2: mirror has %d keys, source %d", len(m.Data), len(data))
	}
	if len(m.OwnerReferences) != 1 {
		t.Fatalf("M5: want one owner reference, got %v", m.OwnerReferences)
	}
	ref := m.OwnerReferences[0]
	if ref.Kind != "TerraformCluster" || ref.Name != c.Name || ref.UID != c.UID || ref.APIVersion != v1alpha1.SchemeGroupVersion.String() {
		t.Errorf("M5: owner reference %+v", ref)
	}
	if ref.Controller != nil || ref.BlockOwnerDeletion != nil {
		t.Errorf("M5: owner reference must be non-controller with blockOwnerDeletion unset, got controller=%v block=%v", ref.Controller, ref.BlockOwnerDeletion)
	}
	if got := f.GetCluster(ns, c.Name).Status.Identity; got != id {
		t.Errorf("status.identity: %q", got)
	}
}

// TestSharedMirror checks M2 and M5: two objects of one namespace that use
// one identity share one mirror carrying both owner references.
func TestSharedMirror(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	a := f.Cluster(ns, "a", id)
	// A machine without its own identityRef inherits the cluster's (I2).
	mach, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(f.Ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "a-0", Labels: map[string]string{v1alpha1.LabelClusterName: "a"}, Annotations: framework.Standalone()},
		Spec:       v1alpha1.TerraformMachineSpec{Source: v1alpha1.SourceSpec{Image: "example.com/m:1"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, id, "both owners", func(m *corev1.Secret) bool {
		return credentials.HasOwnerReference(m.OwnerReferences, a.UID) && credentials.HasOwnerReference(m.OwnerReferences, mach.UID) && len(m.OwnerReferences) == 2
	})
	secrets, err := f.Env.Kube.CoreV1().Secrets(ns).List(f.Ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelMirrored + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	if len(secrets.Items) != 1 {
		t.Fatalf("M2: want one mirror in the namespace, got %d", len(secrets.Items))
	}
}

// TestRotationAndNoWriteOnUnchangedPass checks R1/R2/S4 and M6: a rotated
// source reaches the mirror within the sync period plus queue time, and
// passes over an unchanged source write nothing.
func TestRotationAndNoWriteOnUnchangedPass(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns))
	c := f.Cluster(ns, "demo", id)
	m := f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	// Let the creation's follow-up passes settle, then watch several sync
	// periods go by: the mirror's resourceVersion must not move (M6).
	framework.Eventually(t, settle, func() (bool, string) {
		cur := f.Mirror(ns, id)
		ok := cur.ResourceVersion == m.ResourceVersion
		m = cur
		return ok, "mirror still changing"
	})
	c0 := f.GetCluster(ns, c.Name)
	time.Sleep(3 * syncPeriod)
	if cur := f.Mirror(ns, id); cur.ResourceVersion != m.ResourceVersion {
		t.Fatalf("M6: an unchanged pass wrote the mirror (resourceVersion %s -> %s)", m.ResourceVersion, cur.ResourceVersion)
	}
	if c1 := f.GetCluster(ns, c.Name); c1.ResourceVersion != c0.ResourceVersion {
		t.Fatalf("an unchanged pass wrote the cluster (resourceVersion %s -> %s)", c0.ResourceVersion, c1.ResourceVersion)
	}

	rotated := map[string]string{"AWS_ACCESS_KEY_ID": "AKIAROTATED", "AWS_SECRET_ACCESS_KEY": secretValue + "-2"}
	start := time.Now()
	f.SetSource(ref, rotated)
	m = f.WaitMirror(ns, id, "rotated", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
	})
	t.Logf("rotation reached the mirror after %s (sync period %s, identity resync %s)", time.Since(start).Round(time.Millisecond), syncPeriod, identityResync)
	if string(m.Data["AWS_ACCESS_KEY_ID"]) != "AKIAROTATED" {
		t.Fatalf("R1: mirror data not rotated")
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)
}

// TestConflictWithForeignSecret checks M7: a Secret that is not a mirror is
// never modified; the object reports MirrorFailed; once the foreign Secret is
// deleted the mirror is created (retried at the sync period).
func TestConflictWithForeignSecret(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credentials.MirrorName(id), Labels: map[string]string{"app": "mine"}},
		StringData: map[string]string{"mine": "do-not-touch"}}
	foreign, err := f.Env.Kube.CoreV1().Secrets(ns).Create(f.Ctx, foreign, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := f.Cluster(ns, "demo", id)
	cond := f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
	if !strings.Contains(cond.Message, ns+"/"+foreign.Name) {
		t.Errorf("M7: message does not name the Secret: %q", cond.Message)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionFalse, v1alpha1.ReasonMirrorsConflicted)
	time.Sleep(2 * syncPeriod)
	got, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != foreign.ResourceVersion {
		t.Fatalf("M7: the foreign Secret was modified")
	}
	if j, _ := f.Env.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{}); len(j.Items) != 0 {
		t.Fatalf("no Job may start while the mirror is blocked, found %d", len(j.Items))
	}
	if err := f.Env.Kube.CoreV1().Secrets(ns).Delete(f.Ctx, foreign.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, id, "created after the foreign Secret went", func(m *corev1.Secret) bool { return m.Labels[v1alpha1.LabelMirrored] == "true" })
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)
}

// TestMirrorDeletedOutOfBandIsRecreated checks M8.
func TestMirrorDeletedOutOfBandIsRecreated(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	f.Cluster(ns, "demo", id)
	m := f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })
	if err := f.Env.Kube.CoreV1().Secrets(ns).Delete(f.Ctx, m.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, id, "recreated", func(n *corev1.Secret) bool { return n.UID != m.UID })
}

// TestIdentitySwitchReleasesOldMirror checks V4 (and A8: a pool's
// identityRef is mutable).
func TestIdentitySwitchReleasesOldMirror(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	oldID := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	newID := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	pools := f.Env.Captf.InfrastructureV1alpha1().TerraformMachinePools(ns)
	p, err := pools.Create(f.Ctx, &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: &v1alpha1.IdentityReference{Name: oldID}, Source: v1alpha1.SourceSpec{Image: "example.com/m:1"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, oldID, "old mirror", func(*corev1.Secret) bool { return true })
	// The manager writes the pool too (its finalizer, as the apply Job
	// starts): retry the switch on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if p, err = pools.Get(f.Ctx, p.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		p.Spec.IdentityRef = &v1alpha1.IdentityReference{Name: newID}
		_, err := pools.Update(f.Ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	f.WaitMirror(ns, newID, "new mirror", func(m *corev1.Secret) bool { return credentials.HasOwnerReference(m.OwnerReferences, p.UID) })
	f.WaitNoMirror(ns, oldID)
}

// TestIdentityReadyFollowsSecret checks S1: Ready follows the source Secret.
func TestIdentityReadyFollowsSecret(t *testing.T) {
	f := setup(t)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, nil)
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
	if err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Delete(f.Ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	if _, err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Create(f.Ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name},
		StringData: framework.DefaultData(secretValue)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSecretFound)
}

// TestUnresolvableIdentities checks I2: nothing to resolve, a missing
// identity and a missing Secret each block the Job with the right reason.
func TestUnresolvableIdentities(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	missingSecret := f.Identity(v1alpha1.SecretReference{Namespace: ns, Name: "absent"}, framework.List(ns))
	f.Cluster(ns, "no-identity", "does-not-exist")
	f.Cluster(ns, "no-secret", missingSecret)
	orphan, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(f.Ctx, &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{v1alpha1.LabelClusterName: "missing-cluster"}, Annotations: framework.Standalone()},
		Spec:       v1alpha1.TerraformMachineSpec{Source: v1alpha1.SourceSpec{Image: "example.com/m:1"}, Jobs: v1alpha1.JobsSpec{ActiveDeadlineSeconds: ptr.To[int64](60), LockTimeoutSeconds: ptr.To[int64](30)}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, "no-identity"), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotFound)
	f.WaitCondition("cluster", f.ClusterConds(ns, "no-secret"), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	f.WaitCondition("machine", func() ([]metav1.Condition, error) {
		m, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Get(f.Ctx, orphan.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return m.Status.Conditions, nil
	}, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotFound)
	if j, _ := f.Env.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{}); len(j.Items) != 0 {
		t.Fatalf("I2: no Job may start, found %d", len(j.Items))
	}
}

// TestSecretRefSwitch checks R4 and I4: pointing the identity at another
// Secret is a change to the identity, so its users rewrite their mirrors
// from the new source at once.
func TestSecretRefSwitch(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	f.Cluster(ns, "demo", id)
	f.WaitMirror(ns, id, "created", func(*corev1.Secret) bool { return true })

	other := map[string]string{"GOOGLE_CREDENTIALS": secretValue + "-gcp"}
	otherRef := f.Source(other)
	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef = otherRef })
	m := f.WaitMirror(ns, id, "from the new source", func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(other)
	})
	if _, ok := m.Data["AWS_ACCESS_KEY_ID"]; ok || len(m.Data) != 1 {
		t.Fatalf("R4: the mirror must hold exactly the new source's data, has %d keys", len(m.Data))
	}
}
