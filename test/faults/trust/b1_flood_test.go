package trust

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// floodSize is the data of each flooded Secret and Job: close to the 1 MiB
// limit of a Secret.
const floodSize = 900 << 10

// maxGrowth is the share of the data added the manager's RSS may grow by:
// a cache of whole objects would grow by more than all of it.
const maxGrowth = 0.25

// TestLabelledSecretFlood covers B1 as the attack of issue 13: a tenant
// labels its own large Secrets captf.io/mirrored=true (some also
// captf.io/managed=true) and its own Jobs with large pod templates
// captf.io/managed=true, which the manager's informers select on. The
// manager's RSS must grow by far less than the data added (the caches hold
// no Secret data and no pod templates), identity admission must keep
// working, and the manager must keep converging: a new cluster gets its
// mirror, a rotation reaches every mirror (each rewrite from an uncached
// read), a Job it started is seen finished.
func TestLabelledSecretFlood(t *testing.T) {
	f := start(t)
	tenant := f.Env.CreateNamespace(t, "tenant", nil)
	flood := f.Env.CreateNamespace(t, "flood", nil)
	late := f.Env.CreateNamespace(t, "late", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant, flood, late))

	// A small sample, converged.
	c0 := cluster(f, tenant, "c0", id, "")
	f.WaitCondition("c0", conds(f, c0), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	waitIdentity(f, id, "identity converged on the sample", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionMirrorsCurrent) && i.Status.Mirrors != nil && i.Status.Mirrors.Total == 1
	})
	before := sampleMemory(f)
	t.Logf("before the flood: %s", before)

	// The flood: N labelled Secrets of 900 KiB, one random payload each.
	// Decoding each costs the manager a transient heap of a few MiB
	// whatever N is, which the garbage collector's goal keeps in RSS for a
	// while: the short variant floods enough (105 MiB) for that to be well
	// under maxGrowth, so only a cache that keeps the data can fail it.
	n := scale(120, 200)
	err := faultkit.Parallel(f.Ctx, n, 4, func(ctx context.Context, i int) error {
		s := faultkit.LabelledSecret(flood, fmt.Sprintf("big-%03d", i), floodSize, i)
		_, err := f.Env.Kube.CoreV1().Secrets(flood).Create(ctx, s, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the flood: %v", err)
	}
	t.Cleanup(func() { deleteFlood(t, f, flood) })
	// A look-alike of the identity's mirror, created after the flood: once
	// the identity lists its namespace (S2), the Secret informer, one
	// ordered watch, has delivered every flooded Secret before it.
	if _, err := f.Env.Kube.CoreV1().Secrets(flood).Create(f.Ctx, forgedMirror(flood, id, "sentinel", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitIdentityNamespaces(id, []string{flood, tenant})
	afterSecrets := sampleMemory(f)
	secretData := int64(n) * floodSize
	report(t, "Secrets", n, secretData, before, afterSecrets)
	if grew := afterSecrets.RSS - before.RSS; float64(grew) > maxGrowth*float64(secretData) {
		t.Errorf("B1: the manager's RSS grew by %.1f MiB for %.1f MiB of labelled Secrets (more than %.0f%%): its cache holds their data",
			faultkit.MiB(grew), faultkit.MiB(secretData), 100*maxGrowth)
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited during the flood: %v", err)
	}

	// Identity admission keeps working: the webhook (failurePolicy Fail)
	// allows a valid identity and refuses an invalid one.
	ids := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities()
	other := framework.Name("after-flood")
	if _, err := ids.Create(f.Ctx, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: other},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: framework.List(late)}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("an identity create after the flood was refused: %v", err)
	}
	t.Cleanup(func() { _ = ids.Delete(context.Background(), other, metav1.DeleteOptions{}) })
	_, err = ids.Create(f.Ctx, &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: framework.Name("bad")},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: ref, AllowedNamespaces: &v1alpha1.AllowedNamespaces{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "v"}}}}}, metav1.CreateOptions{})
	if err == nil || !(apierrors.IsInvalid(err) || apierrors.IsForbidden(err)) {
		t.Fatalf("after the flood the webhook must still refuse an invalid selector; got %v", err)
	}

	// The manager keeps converging: a new cluster gets its mirror and a
	// Job, and a rotation reaches every mirror.
	c1 := cluster(f, late, "c1", id, moduleImage)
	f.WaitCondition("c1", conds(f, c1), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	rotated := framework.DefaultData(rotatedValue(0))
	f.SetSource(ref, rotated)
	for _, ns := range []string{tenant, late} {
		f.WaitMirror(ns, id, "rotated after the flood", func(m *corev1.Secret) bool {
			return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
		})
	}
	job := f.WaitJob(late, v1alpha1.JobActionApply)

	// Then Jobs with large pod templates, labelled captf.io/managed=true.
	nJobs := scale(30, 50)
	err = faultkit.Parallel(f.Ctx, nJobs, 4, func(ctx context.Context, i int) error {
		var env []corev1.EnvVar
		for k := range 4 {
			b := make([]byte, floodSize/8)
			_, _ = rand.Read(b)
			env = append(env, corev1.EnvVar{Name: fmt.Sprintf("BIG_%d", k), Value: hex.EncodeToString(b)})
		}
		j := forgedJob(flood, fmt.Sprintf("big-%03d", i), nil, nil, env)
		_, err := f.Env.Kube.BatchV1().Jobs(flood).Create(ctx, j, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the Job flood: %v", err)
	}
	// The manager's own Job, finished after the flood: once c1 reports it
	// (ApplyJobSucceeded), the Job informer has delivered every flooded Job.
	if err := f.Env.FinishJob(f.Ctx, late, job.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("c1", conds(f, c1), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	afterJobs := sampleMemory(f)
	jobData := int64(nJobs) * floodSize
	report(t, "Jobs", nJobs, jobData, afterSecrets, afterJobs)
	// Fewer Jobs than Secrets, so the transient heap weighs more: a looser
	// bound, still far below a cache of pod templates (several times the
	// data: each env value decoded into strings).
	if grew := afterJobs.RSS - afterSecrets.RSS; float64(grew) > 2*maxGrowth*float64(jobData) {
		t.Errorf("B1: the manager's RSS grew by %.1f MiB for %.1f MiB of labelled Jobs (more than %.0f%%): its cache holds their pod templates",
			faultkit.MiB(grew), faultkit.MiB(jobData), 200*maxGrowth)
	}
	if grew := afterJobs.RSS - before.RSS; float64(grew) > maxGrowth*float64(secretData+jobData) {
		t.Errorf("B1: the manager's RSS grew by %.1f MiB for %.1f MiB of labelled Secrets and Jobs (more than %.0f%%): its caches hold their data or pod templates",
			faultkit.MiB(grew), faultkit.MiB(secretData+jobData), 100*maxGrowth)
	}
	waitIdentity(f, id, "identity current after the flood", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionMirrorsCurrent) && i.Status.Mirrors != nil && i.Status.Mirrors.Total == 2 && i.Status.Mirrors.Current == 2
	})
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	f.RequireNoSecretValues(forbiddenValues()...)
}

// report logs a flood's figures.
func report(t *testing.T, what string, n int, data int64, before, after memory) {
	t.Helper()
	t.Logf("B1 flood of %d labelled %s (%.1f MiB of data): %s -> %s; RSS %+.1f MiB (%.1f%% of the data), heap %+.1f MiB",
		n, what, faultkit.MiB(data), before, after, faultkit.MiB(after.RSS-before.RSS),
		100*float64(after.RSS-before.RSS)/float64(data), faultkit.MiB(after.Heap-before.Heap))
}

// deleteFlood removes the flood's Secrets and Jobs (there is no namespace
// controller here), so later tests' managers do not list them.
func deleteFlood(t *testing.T, f *framework.Fixture, ns string) {
	ctx := context.Background()
	secrets, err := f.Env.Kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, s := range secrets.Items {
			_ = f.Env.Kube.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	}
	jobs, err := f.Env.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, j := range jobs.Items {
			_ = f.Env.Kube.BatchV1().Jobs(ns).Delete(ctx, j.Name, metav1.DeleteOptions{})
		}
	}
	if err != nil {
		t.Logf("cleaning the flood up: %v", err)
	}
}
