package load

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// churnLabel marks the churned objects with their batch.
const churnLabel = "churn.example/batch"

// churnMemory is the manager's memory at one point: RSS (median of five
// samples a second apart) and, right after a forced GC, the Go heap's live
// bytes and in-use spans.
type churnMemory struct{ RSS, HeapAlloc, HeapInuse int64 }

func (m churnMemory) String() string {
	return fmt.Sprintf("RSS %.1f MiB, heap live %.1f MiB, in use %.1f MiB", faultkit.MiB(m.RSS), faultkit.MiB(m.HeapAlloc), faultkit.MiB(m.HeapInuse))
}

// within reports whether m is within frac of base on each figure.
func (m churnMemory) within(base churnMemory, frac float64) bool {
	ok := func(v, b int64) bool { return float64(v) <= float64(b)*(1+frac) }
	return ok(m.RSS, base.RSS) && ok(m.HeapAlloc, base.HeapAlloc) && ok(m.HeapInuse, base.HeapInuse)
}

// churnSample forces a GC in the manager (the heap profile with gc=1, under
// --profiling) and reads its memory.
func churnSample(f *framework.Fixture) churnMemory {
	f.T.Helper()
	if code, body := f.Manager.Get(f.Manager.MetricsURL + "/debug/pprof/heap?gc=1"); code != 200 {
		f.T.Fatalf("forcing a GC: %d %.200s", code, body)
	}
	m, err := f.Manager.Scrape()
	if err != nil {
		f.T.Fatal(err)
	}
	rss, err := faultkit.MedianRSS(f.Ctx, f.Manager.PID(), 5, time.Second)
	if err != nil {
		f.T.Fatal(err)
	}
	return churnMemory{RSS: rss, HeapAlloc: int64(m.Sum("go_memstats_heap_alloc_bytes", nil)), HeapInuse: int64(m.Sum("go_memstats_heap_inuse_bytes", nil))}
}

// waitChurnIdle waits until the manager's queues are empty and it made no
// request for two seconds.
func waitChurnIdle(f *framework.Fixture) {
	f.T.Helper()
	var last float64 = -1
	f.WaitFor("the manager idle", func() (bool, string) {
		m, err := f.Manager.Scrape()
		if err != nil {
			return false, err.Error()
		}
		depth, requests := m.Sum("workqueue_depth", nil), m.TotalRequests()
		idle := depth == 0 && requests == last
		last = requests
		if !idle {
			time.Sleep(2 * time.Second)
		}
		return idle, fmt.Sprintf("queue depth %.0f, requests %.0f", depth, requests)
	})
}

// churnBatch creates n uniquely named clusters spread over namespaces,
// waits until the manager has mirrored every one (so it kept its per-object
// state: queue stamps, status records, owner references on the mirrors),
// then deletes them and waits until they are gone.
func churnBatch(f *framework.Fixture, batch, n int, namespaces []string, identity string) {
	f.T.Helper()
	b := strconv.Itoa(batch)
	labels := map[string]string{churnLabel: b}
	err := faultkit.Parallel(f.Ctx, n, 8, func(ctx context.Context, i int) error {
		_, err := create(ctx, f.Env, kindCluster, namespaces[i%len(namespaces)], fmt.Sprintf("churn-%d-%d", batch, i), identity, "", labels)
		return err
	})
	if err != nil {
		f.T.Fatalf("batch %d: %v", batch, err)
	}
	f.WaitFor("batch "+b+" mirrored", func() (bool, string) {
		states, err := faultkit.ListWorkloads(f.Ctx, f.Env.Captf, "", churnLabel+"="+b)
		if err != nil {
			return false, err.Error()
		}
		mirrored := 0
		for _, s := range states {
			if meta.IsStatusConditionTrue(s.Conditions, string(v1alpha1.ConditionCredentialsMirrored)) {
				mirrored++
			}
		}
		return mirrored == n, fmt.Sprintf("%d of %d", mirrored, n)
	})
	for _, ns := range namespaces {
		if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).DeleteCollection(f.Ctx, metav1.DeleteOptions{},
			metav1.ListOptions{LabelSelector: churnLabel + "=" + b}); err != nil {
			f.T.Fatal(err)
		}
	}
	f.WaitFor("batch "+b+" gone", func() (bool, string) {
		states, err := faultkit.ListWorkloads(f.Ctx, f.Env.Captf, "", churnLabel+"="+b)
		if err != nil {
			return false, err.Error()
		}
		return len(states) == 0, fmt.Sprintf("%d left", len(states))
	})
}

// TestChurnLeavesMemoryWhereItStarted covers B15 on the real control plane
// (the garbage collector removes the deleted users' owner references from
// the mirrors, M5), with the manager under the shipped memory limit: after
// a warm-up batch, uniquely named objects are created, mirrored and deleted
// in batches, 100,000 or as many as fit in CAPTF_CHURN_DURATION (10m) in
// the full variant, 600 in the short one. Once the manager is idle again,
// its RSS and its Go heap after a forced GC return within 10% of where they
// were after the warm-up: queue, rate-limiter, status, read and conflict
// entries of the gone objects are forgotten, and no metric series follows
// them.
func TestChurnLeavesMemoryWhereItStarted(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "268435456") // the shipped Deployment's, from its 256Mi limit (B5)
	e := framework.Get(t)
	m := e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Args: append(managerArgs[:0:0],
		"--sync-period=30s", "--identity-resync=30s", "--workers=4", "--profiling")})
	f := &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: 5 * time.Minute}
	var namespaces []string
	for range 10 {
		namespaces = append(namespaces, e.CreateNamespace(t, "churn", nil))
	}
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(namespaces...))

	total, batchSize := scale(600, 100000), scale(100, 500)
	budget := scale(5*time.Minute, 10*time.Minute)
	if d, err := time.ParseDuration(os.Getenv("CAPTF_CHURN_DURATION")); err == nil {
		budget = d
	}
	churnBatch(f, 0, batchSize, namespaces, id) // warm-up: one-time allocations
	waitChurnIdle(f)
	before := churnSample(f)
	t.Logf("B15 before the churn: %s", before)

	start, churned, peak := time.Now(), 0, before
	for batch := 1; churned < total && time.Since(start) < budget; batch++ {
		churnBatch(f, batch, batchSize, namespaces, id)
		churned += batchSize
		if rss, err := faultkit.RSS(m.PID()); err == nil && rss > peak.RSS {
			peak.RSS = rss
		}
	}
	elapsed := time.Since(start)
	if exited, err := m.ExitError(); exited {
		t.Fatalf("the manager exited during the churn: %v", err)
	}
	waitChurnIdle(f)
	after := churnSample(f)
	t.Logf("B15 churned %d objects in %s (%.0f/s); peak RSS %.1f MiB; after: %s",
		churned, elapsed.Round(time.Second), float64(churned)/elapsed.Seconds(), faultkit.MiB(peak.RSS), after)
	// The runtime returns freed memory to the OS at its own pace: polled
	// until within 10% or the deadline, never a bound on how long.
	deadline := time.Now().Add(3 * time.Minute)
	for !after.within(before, 0.10) && time.Now().Before(deadline) {
		time.Sleep(15 * time.Second)
		after = churnSample(f)
	}
	t.Logf("B15 settled after the churn of %d objects: %s (before %s): RSS %+.1f%%, heap live %+.1f%%, in use %+.1f%%",
		churned, after, before, pct(after.RSS, before.RSS), pct(after.HeapAlloc, before.HeapAlloc), pct(after.HeapInuse, before.HeapInuse))
	if !after.within(before, 0.10) {
		t.Errorf("B15: after churning %d objects the manager's memory did not return within 10%% of where it started: %s, before %s", churned, after, before)
	}
	if churned < batchSize*5 {
		t.Errorf("only %d objects churned in %s", churned, budget)
	}
}

func pct(v, base int64) float64 { return 100 * (float64(v) - float64(base)) / float64(base) }
