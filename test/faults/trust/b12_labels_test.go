package trust

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// shippedMemoryLimit is GOMEMLIMIT as the shipped Deployment sets it: the
// container's memory limit (256Mi) in bytes (SPEC B5).
const shippedMemoryLimit = "268435456"

// b12MaxGrowth is SPEC B12's bound on the manager's RSS growth for a
// tenant's 1 MiB of labels on 100 objects.
const b12MaxGrowth = 10 << 20

// tenantLabels returns about size bytes of labels (keys and values) as a
// tenant may put on its own object: many short keys, each value of the
// maximum 63 characters, distinct per object (seed).
func tenantLabels(seed, size int) map[string]string {
	out := map[string]string{}
	for i := 0; size > 0; i++ {
		key := fmt.Sprintf("t.example/k%05d", i)
		value := fmt.Sprintf("%04d-", seed)
		value += strings.Repeat("v", validation.LabelValueMaxLength-len(value))
		out[key] = value
		size -= len(key) + len(value)
	}
	return out
}

// labelBytes is the size of labels' keys and values.
func labelBytes(labels map[string]string) int64 {
	var n int64
	for k, v := range labels {
		n += int64(len(k) + len(v))
	}
	return n
}

// TestLabelFlood covers B12 as issue 20's attack, with the manager under
// the shipped memory limit: after the manager is steady a tenant creates
// 100 workload objects (which the manager reconciles, writing their status
// from its cached copies), 10 Jobs labelled captf.io/managed=true and 10
// Secrets labelled captf.io/mirrored=true, each with about 1 MiB of labels
// (the most etcd stores in one object with its managed fields). The
// manager's caches keep only the keys it reads, so its RSS grows by less
// than 10 MiB (a cache of whole metadata would hold more than the 110 MiB
// of labels: every key and value a string of its own in a map); it stays
// up, the flooded objects converge and keep every label through the
// manager's status writes, and other objects keep converging.
func TestLabelFlood(t *testing.T) {
	t.Setenv("GOMEMLIMIT", shippedMemoryLimit)
	f := start(t)
	tenant := f.Env.CreateNamespace(t, "b12tenant", nil)
	flood := f.Env.CreateNamespace(t, "b12flood", nil)
	late := f.Env.CreateNamespace(t, "b12late", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(tenant, flood, late))

	c0 := cluster(f, tenant, "c0", id, "")
	f.WaitCondition("c0", conds(f, c0), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	waitIdentity(f, id, "identity converged on the sample", func(i *v1alpha1.TerraformClusterIdentity) bool {
		return condTrue(i, v1alpha1.ConditionMirrorsCurrent) && i.Status.Mirrors != nil && i.Status.Mirrors.Total == 1
	})
	before := sampleMemory(f)
	t.Logf("before the flood: %s", before)

	const perObject = 1 << 20
	nObjects, nJobs, nSecrets := 100, 10, 10
	var data int64
	t.Cleanup(func() { deleteLabelFlood(t, f, flood, nObjects) })
	err := faultkit.Parallel(f.Ctx, nObjects, 4, func(ctx context.Context, i int) error {
		_, err := faultkit.CreateWorkload(ctx, f.Env.Captf, faultkit.KindCluster, flood, fmt.Sprintf("big-%03d", i), id, "", tenantLabels(i, perObject))
		return err
	})
	if err != nil {
		t.Fatalf("creating the flooded workload objects: %v", err)
	}
	err = faultkit.Parallel(f.Ctx, nJobs+nSecrets, 4, func(ctx context.Context, i int) error {
		labels := tenantLabels(1000+i, perObject)
		if i < nJobs {
			labels[v1alpha1.LabelManaged] = v1alpha1.LabelTrue
			j := forgedJob(flood, fmt.Sprintf("big-%03d", i), nil, nil, nil)
			j.Labels = labels
			_, err := f.Env.Kube.BatchV1().Jobs(flood).Create(ctx, j, metav1.CreateOptions{})
			return err
		}
		labels[v1alpha1.LabelMirrored] = v1alpha1.LabelTrue
		_, err := f.Env.Kube.CoreV1().Secrets(flood).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: flood, Name: fmt.Sprintf("big-%03d", i), Labels: labels}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("creating the flooded Jobs and Secrets: %v", err)
	}
	for i := range nObjects {
		data += labelBytes(tenantLabels(i, perObject))
	}
	for i := range nJobs + nSecrets {
		data += labelBytes(tenantLabels(1000+i, perObject))
	}

	// Every flooded workload object converges: the manager's informer has
	// them all and it wrote each one's status.
	mirrored := map[string]bool{}
	f.WaitFor("the 100 flooded objects mirrored", func() (bool, string) {
		// One GET of each object not yet seen mirrored (each is 1 MiB).
		for i := range nObjects {
			name := fmt.Sprintf("big-%03d", i)
			if mirrored[name] {
				continue
			}
			s, err := faultkit.GetWorkload(f.Ctx, f.Env.Captf, faultkit.Workload{Kind: faultkit.KindCluster, Namespace: flood, Name: name})
			if err != nil {
				return false, err.Error()
			}
			mirrored[name] = meta.IsStatusConditionTrue(s.Conditions, string(v1alpha1.ConditionCredentialsMirrored))
		}
		n := 0
		for _, ok := range mirrored {
			if ok {
				n++
			}
		}
		return n == nObjects, fmt.Sprintf("%d of %d mirrored", n, nObjects)
	})
	// A new cluster's mirror, created after the flooded Secrets, listed by
	// the identity: the Secret informer, one ordered watch, has delivered
	// them all. A Job the manager starts after the flooded Jobs, seen
	// finished: so has the Job informer.
	c1 := cluster(f, late, "c1", id, moduleImage)
	f.WaitIdentityNamespaces(id, []string{flood, late, tenant})
	job := f.WaitJob(late, v1alpha1.JobActionApply)
	if err := f.Env.FinishJob(f.Ctx, late, job.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("c1", conds(f, c1), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited during the flood: %v", err)
	}

	// The steady state: a transient decode of each 1 MiB object may keep
	// RSS up for a while (the GC's goal, the scavenger's pace); the cache
	// must not. Polled until within the bound or the deadline.
	after := sampleMemory(f)
	t.Logf("B12 flood of %d labelled objects (%.1f MiB of labels): %s -> %s; RSS %+.1f MiB, heap %+.1f MiB",
		nObjects+nJobs+nSecrets, faultkit.MiB(data), before, after, faultkit.MiB(after.RSS-before.RSS), faultkit.MiB(after.Heap-before.Heap))
	deadline := time.Now().Add(3 * time.Minute)
	for after.RSS-before.RSS >= b12MaxGrowth && time.Now().Before(deadline) {
		time.Sleep(10 * time.Second)
		after = sampleMemory(f)
	}
	t.Logf("B12 settled: %s; RSS %+.1f MiB (%.2f%% of the labels), heap %+.1f MiB",
		after, faultkit.MiB(after.RSS-before.RSS), 100*float64(after.RSS-before.RSS)/float64(data), faultkit.MiB(after.Heap-before.Heap))
	if grew := after.RSS - before.RSS; grew >= b12MaxGrowth {
		t.Errorf("B12: the manager's RSS grew by %.1f MiB for %.1f MiB of labels on %d objects (bound 10 MiB): its caches keep them",
			faultkit.MiB(grew), faultkit.MiB(data), nObjects+nJobs+nSecrets)
	}

	// The manager's status writes kept every label of the flooded objects.
	big, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(flood).Get(f.Ctx, "big-007", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := tenantLabels(7, perObject); len(big.Labels) != len(want) || big.Labels["t.example/k00042"] != want["t.example/k00042"] {
		t.Errorf("B12: a flooded object has %d labels after the manager's writes, want %d", len(big.Labels), len(want))
	}
	if len(big.Status.Conditions) == 0 {
		t.Errorf("the manager wrote no status on a flooded object")
	}

	// Others keep converging: a rotation reaches every mirror.
	rotated := framework.DefaultData(rotatedValue(1))
	f.SetSource(ref, rotated)
	for _, ns := range []string{tenant, late, flood} {
		f.WaitMirror(ns, id, "rotated after the flood", func(m *corev1.Secret) bool {
			return m.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
		})
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	f.RequireNoSecretValues(forbiddenValues()...)
}

// deleteLabelFlood removes the flood's workload objects, Jobs and Secrets,
// so later tests' managers do not list them.
func deleteLabelFlood(t *testing.T, f *framework.Fixture, ns string, n int) {
	ctx := context.Background()
	for i := range n {
		_ = f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(ctx, fmt.Sprintf("big-%03d", i), metav1.DeleteOptions{})
	}
	deleteFlood(t, f, ns)
}
