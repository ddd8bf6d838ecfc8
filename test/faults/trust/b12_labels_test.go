package trust

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// shippedMemoryLimit is GOMEMLIMIT as the shipped Deployment sets it: the
// container's memory limit (256Mi) in bytes (SPEC B5).
const shippedMemoryLimit = "268435456"

// b12MaxGrowth is SPEC B12's bound on the manager's RSS growth for a
// tenant's 1 MiB of labels on 100 objects.
const b12MaxGrowth = 10 << 20

// tenantMetadata returns the labels and annotations a tenant may put on
// its own object, distinct per object (seed): 3,000 labels of the longest
// value (63 characters) under long keys, 660 KiB, and four annotations of
// 60 KiB, near their 256 KiB total. That is about as much as etcd stores in
// one object (1.5 MiB) once the API server has added a managed-fields
// entry for every label; long keys keep the API server's own cost per
// object (its field manager walks every label) low enough for a loaded
// test machine.
func tenantMetadata(seed int) (labels, annotations map[string]string) {
	prefix := strings.Repeat("a", 60) + "." + strings.Repeat("b", 30) + ".example"
	labels, annotations = map[string]string{}, map[string]string{}
	for i := range 3000 {
		name := fmt.Sprintf("k%05d-", i)
		value := fmt.Sprintf("%04d-", seed)
		labels[prefix+"/"+name+strings.Repeat("n", validation.LabelValueMaxLength-len(name))] =
			value + strings.Repeat("v", validation.LabelValueMaxLength-len(value))
	}
	for i := range 4 {
		annotations[fmt.Sprintf("t.example/a%d", i)] = fmt.Sprintf("%04d-", seed) + strings.Repeat("x", 60<<10)
	}
	// A workload object runs without Cluster API owners (K2).
	annotations[v1alpha1.AnnotationStandalone] = v1alpha1.LabelTrue
	return labels, annotations
}

// metadataBytes is the size of the keys and values of ms.
func metadataBytes(ms ...map[string]string) int64 {
	var n int64
	for _, m := range ms {
		for k, v := range m {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// TestLabelFlood covers B12 as issue 20's attack, with the manager under
// the shipped memory limit: after the manager is steady a tenant creates
// 100 workload objects (which the manager reconciles, writing their status
// from its cached copies), 10 Jobs labelled captf.io/managed=true and 10
// Secrets labelled captf.io/mirrored=true (short variant: 30, 5 and 5),
// each with about 0.9 MiB of labels and annotations (tenantMetadata: as
// much as etcd stores). The manager's caches keep only the keys it reads,
// so its RSS settles less than 10 MiB above where it was (a cache of whole
// metadata would hold more than the 106 MiB added); it stays up, the
// flooded objects converge and keep every label and annotation through the
// manager's status writes, and other objects keep converging.
func TestLabelFlood(t *testing.T) {
	t.Setenv("GOMEMLIMIT", shippedMemoryLimit)
	f := startProfiled(t)
	f.Settle = 10 * time.Minute // a deadline: the flood slows the API server itself
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
	saveHeapProfile(f, "before")
	before := sampleAfterGC(f)
	t.Logf("before the flood: %s", before)

	nObjects, nJobs, nSecrets := scale(30, 100), scale(5, 10), scale(5, 10)
	var data int64
	t.Cleanup(func() { deleteLabelFlood(t, f, flood, nObjects) })
	// Each create costs the API server seconds (its field manager tracks
	// every label), so two at a time, each retried until it exists.
	created := time.Now()
	err := faultkit.Parallel(f.Ctx, nObjects, 2, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("big-%03d", i)
		return createRetrying(ctx, func(ctx context.Context) error {
			labels, annotations := tenantMetadata(i)
			_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(flood).Create(ctx, &v1alpha1.TerraformCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: flood, Name: name, Labels: labels, Annotations: annotations},
				Spec:       v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}},
			}, metav1.CreateOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(flood).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	})
	if err != nil {
		t.Fatalf("creating the flooded workload objects: %v", err)
	}
	err = faultkit.Parallel(f.Ctx, nJobs+nSecrets, 2, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("big-%03d", i)
		labels, annotations := tenantMetadata(1000 + i)
		if i < nJobs {
			labels[v1alpha1.LabelManaged] = v1alpha1.LabelTrue
			j := forgedJob(flood, name, annotations, nil, nil)
			j.Labels = labels
			return createRetrying(ctx, func(ctx context.Context) error {
				_, err := f.Env.Kube.BatchV1().Jobs(flood).Create(ctx, j, metav1.CreateOptions{})
				return err
			}, func(ctx context.Context) error {
				_, err := f.Env.Kube.BatchV1().Jobs(flood).Get(ctx, name, metav1.GetOptions{})
				return err
			})
		}
		labels[v1alpha1.LabelMirrored] = v1alpha1.LabelTrue
		return createRetrying(ctx, func(ctx context.Context) error {
			_, err := f.Env.Kube.CoreV1().Secrets(flood).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: flood, Name: name, Labels: labels, Annotations: annotations}}, metav1.CreateOptions{})
			return err
		}, func(ctx context.Context) error {
			_, err := f.Env.Kube.CoreV1().Secrets(flood).Get(ctx, name, metav1.GetOptions{})
			return err
		})
	})
	if err != nil {
		t.Fatalf("creating the flooded Jobs and Secrets: %v", err)
	}
	for i := range nObjects {
		data += metadataBytes(tenantMetadata(i))
	}
	for i := range nJobs + nSecrets {
		data += metadataBytes(tenantMetadata(1000 + i))
	}
	t.Logf("created %d objects with %.1f MiB of labels and annotations in %s", nObjects+nJobs+nSecrets, faultkit.MiB(data), time.Since(created).Round(time.Second))

	// Every flooded workload object converges: the manager's informer has
	// them all and it wrote each one's status.
	mirrored := map[string]bool{}
	f.WaitFor("the flooded objects mirrored", func() (bool, string) {
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

	// The manager's status writes kept every label and annotation of the
	// flooded objects.
	big, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(flood).Get(f.Ctx, "big-007", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if labels, annotations := tenantMetadata(7); metadataBytes(big.Labels, big.Annotations) != metadataBytes(labels, annotations) {
		t.Errorf("B12: a flooded object has %d labels and %d annotations (%d bytes) after the manager's writes, want %d and %d (%d bytes)",
			len(big.Labels), len(big.Annotations), metadataBytes(big.Labels, big.Annotations), len(labels), len(annotations), metadataBytes(labels, annotations))
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

	// Memory, once the flood has been processed. Besides the caches'
	// trimmed copies, the flood went through client-go's watch decoding,
	// whose buffers grow to the largest event a watch decoded: a watch that
	// carried a large event is ended (pkg/watchbound), and its buffers are
	// let go of even when client-go keeps the watch (the first stream of a
	// watch-list: watchbound.Release). The runtime returns freed pages to
	// the system in the background, so the steady state is measured after
	// a forced GC, polled until within the bound or 15 minutes: a
	// deadline, never a bound on how long it takes.
	after := sampleAfterGC(f)
	t.Logf("B12 flood of %d objects (%.1f MiB of labels and annotations): %s -> %s; RSS %+.1f MiB, heap %+.1f MiB",
		nObjects+nJobs+nSecrets, faultkit.MiB(data), before, after, faultkit.MiB(after.RSS-before.RSS), faultkit.MiB(after.Heap-before.Heap))
	settling := time.Now()
	for after.RSS-before.RSS >= b12MaxGrowth && time.Since(settling) < 15*time.Minute {
		time.Sleep(30 * time.Second)
		after = sampleAfterGC(f)
		t.Logf("B12 after %s: %s; RSS %+.1f MiB", time.Since(settling).Round(time.Second), after, faultkit.MiB(after.RSS-before.RSS))
	}
	saveHeapProfile(f, "after")
	t.Logf("B12 settled after %s: %s; RSS %+.1f MiB (%.2f%% of the data), heap %+.1f MiB",
		time.Since(settling).Round(time.Second), after, faultkit.MiB(after.RSS-before.RSS), 100*float64(after.RSS-before.RSS)/float64(data), faultkit.MiB(after.Heap-before.Heap))
	if grew := after.RSS - before.RSS; grew >= b12MaxGrowth {
		t.Errorf("B12: the manager's RSS settled %.1f MiB above where it was for %.1f MiB of labels and annotations on %d objects (bound 10 MiB); CAPTF_B12_PROFILE_DIR saves heap profiles that show what holds it",
			faultkit.MiB(grew), faultkit.MiB(data), nObjects+nJobs+nSecrets)
	}
	if exited, err := f.Manager.ExitError(); exited {
		t.Fatalf("the manager exited: %v", err)
	}
	f.RequireNoSecretValues(forbiddenValues()...)
}

// createRetrying runs create until the object exists: a create the API
// server timed out may have been stored anyway (get then finds it), or not.
func createRetrying(ctx context.Context, create, get func(context.Context) error) error {
	for attempt := 1; ; attempt++ {
		err := create(ctx)
		switch {
		case err == nil, apierrors.IsAlreadyExists(err):
			return nil
		case attempt >= 10 || !(apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded)):
			return err
		}
		// Stored after all? The write may still be in flight: look a few times.
		for range 6 {
			if get(ctx) == nil {
				return nil
			}
			time.Sleep(5 * time.Second)
		}
	}
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

// startProfiled is start with --profiling: the heap profiles before and
// after the flood (with a GC first) go to CAPTF_B12_PROFILE_DIR when set.
func startProfiled(t *testing.T) *framework.Fixture {
	e := framework.Get(t)
	dir, ca := framework.WebhookCert(t)
	m := e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Webhook: true, WebhookCertDir: dir,
		Args: []string{"--sync-period=" + syncPeriod.String(), "--identity-resync=" + identityResync.String(), "--workers=4", "--profiling"}})
	e.InstallWebhook(t, m, ca)
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: settle}
}

// sampleAfterGC forces a GC in the manager, then samples its memory.
func sampleAfterGC(f *framework.Fixture) memory {
	f.T.Helper()
	if code, body := f.Manager.Get(f.Manager.MetricsURL + "/debug/pprof/heap?gc=1"); code != 200 {
		f.T.Fatalf("forcing a GC: %d %.200s", code, body)
	}
	// Right after the GC: what is live, and what spans hold it (the
	// difference is fragmentation), before the RSS samples' seconds let
	// new garbage in.
	if m, err := f.Manager.Scrape(); err == nil {
		f.T.Logf("after a forced GC: Go heap allocated %.1f MiB, in use %.1f MiB, idle %.1f MiB, released %.1f MiB; %.0f API requests so far",
			faultkit.MiB(int64(m.Sum("go_memstats_heap_alloc_bytes", nil))), faultkit.MiB(int64(m.Sum("go_memstats_heap_inuse_bytes", nil))),
			faultkit.MiB(int64(m.Sum("go_memstats_heap_idle_bytes", nil))), faultkit.MiB(int64(m.Sum("go_memstats_heap_released_bytes", nil))),
			m.Sum("captf_api_requests_total", nil))
	}
	return sampleMemory(f)
}

// saveHeapProfile forces a GC in the manager and, when
// CAPTF_B12_PROFILE_DIR is set, saves its heap profile there as name.pb.gz.
func saveHeapProfile(f *framework.Fixture, name string) {
	f.T.Helper()
	code, body := f.Manager.Get(f.Manager.MetricsURL + "/debug/pprof/heap?gc=1")
	if code != 200 {
		f.T.Fatalf("heap profile: %d %.200s", code, body)
	}
	if dir := os.Getenv("CAPTF_B12_PROFILE_DIR"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".pb.gz"), []byte(body), 0o644); err != nil {
			f.T.Fatal(err)
		}
		// The goroutines at the same moment: which watches are open.
		if code, body := f.Manager.Get(f.Manager.MetricsURL + "/debug/pprof/goroutine?debug=2"); code == 200 {
			_ = os.WriteFile(filepath.Join(dir, name+".goroutines.txt"), []byte(body), 0o644)
		}
	}
}
