package load

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestConflictStorm is fault 5: objects sharing one identity are created in
// one namespace all at once, while the identity's list is edited (other
// namespaces added and removed, the storm's kept) and the source rotated.
// Every object must end with its owner reference on the mirror, the mirror
// with exactly the current users and the current data (M2, M5, M6), with a
// bounded number of mirror writes (SPEC 13: one write per namespace per
// change, not one per object), and no hot loop once converged.
func TestConflictStorm(t *testing.T) {
	n := scale(30, 100)
	const storm = 5 * time.Second // sync period of this test's manager
	f := ownManager(t, "--sync-period="+storm.String(), "--identity-resync=3s", "--workers=8")
	e := f.Env
	ns := e.CreateNamespace(t, "storm", nil)
	sideA := e.CreateNamespace(t, "side", nil)
	sideB := e.CreateNamespace(t, "side", nil)
	ref := f.Source(framework.DefaultData(secretValue))
	id := f.Identity(ref, framework.List(ns, sideA, sideB))
	// One user in each other namespace, so the list edits create and
	// delete mirrors there while the storm runs.
	sides := map[string]workload{}
	for _, s := range []string{sideA, sideB} {
		sides[s] = mustCreate(f, kindCluster, s, "side", id, "")
		f.WaitMirror(s, id, "side mirror", func(*corev1.Secret) bool { return true })
	}
	before := scrape(f)

	// The storm: n creators at once, one editor of the identity and source.
	start := time.Now()
	var (
		mu      sync.Mutex
		objs    []workload
		errs    []error
		edits   int
		rotated int
	)
	done := make(chan struct{})
	var editor sync.WaitGroup
	editor.Go(func() {
		minEnd := time.Now().Add(4 * time.Second)
		for i := 0; ; i++ {
			select {
			case <-done:
				if time.Now().After(minEnd) {
					return
				}
			default:
			}
			if i%3 == 2 {
				if err := setSource(f.Ctx, e, ref, framework.DefaultData(rotatedValue(rotated))); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				rotated++
			} else {
				list := []string{ns}
				for _, s := range []string{sideA, sideB} {
					if rand.IntN(2) == 0 {
						list = append(list, s)
					}
				}
				rand.Shuffle(len(list), func(a, b int) { list[a], list[b] = list[b], list[a] })
				if err := editIdentity(f.Ctx, e, id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(list...) }); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				edits++
			}
			time.Sleep(time.Duration(100+rand.IntN(200)) * time.Millisecond)
		}
	})
	var creators sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		creators.Go(func() {
			<-gate
			w, err := create(f.Ctx, e, kinds[i%3], ns, fmt.Sprintf("obj-%03d", i), id, "", nil)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			objs = append(objs, w)
		})
	}
	close(gate)
	creators.Wait()
	created := since(start)
	close(done)
	editor.Wait()
	if len(errs) > 0 {
		t.Fatalf("the storm's own requests failed: %v", errs[0])
	}
	// The final state: the storm's namespace and sideA allowed, sideB not;
	// one last rotation.
	final := framework.DefaultData(rotatedValue(rotated))
	if err := editIdentity(f.Ctx, e, id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(ns, sideA) }); err != nil {
		t.Fatal(err)
	}
	if err := setSource(f.Ctx, e, ref, final); err != nil {
		t.Fatal(err)
	}
	edits++
	rotated++
	lastChange := time.Now()
	t.Logf("storm: %d objects created concurrently in %s while the identity's list was edited %d times and the source rotated %d times",
		n, created, edits, rotated)

	want := framework.HashOf(final)
	f.WaitFor("converged", func() (bool, string) {
		ms, err := mirrorsOf(f.Ctx, e, id)
		if err != nil {
			return false, err.Error()
		}
		m := ms[ns]
		if m == nil {
			return false, "no mirror in the storm's namespace"
		}
		if m.Annotations[v1alpha1.AnnotationSourceHash] != want {
			return false, "the storm's mirror is not current"
		}
		if d := sameUIDs(m, objs); d != "" {
			return false, "storm mirror: " + d
		}
		if a := ms[sideA]; a == nil || a.Annotations[v1alpha1.AnnotationSourceHash] != want || sameUIDs(a, []workload{sides[sideA]}) != "" {
			return false, "sideA mirror missing, stale or with wrong owners"
		}
		if ms[sideB] != nil {
			return false, "sideB (no longer allowed) still has a mirror"
		}
		var notReady []string
		for _, w := range objs {
			s, err := get(f.Ctx, e, w)
			if err != nil {
				return false, err.Error()
			}
			if !condIs(s.Conditions, v1alpha1.ConditionIdentityAllowed, "True", "") || !condIs(s.Conditions, v1alpha1.ConditionCredentialsMirrored, "True", "") {
				notReady = append(notReady, w.Name)
			}
		}
		if len(notReady) > 0 {
			return false, fmt.Sprintf("%d objects without IdentityAllowed=True and CredentialsMirrored=True: %v", len(notReady), head(notReady, 5))
		}
		return true, ""
	})
	converged := since(lastChange)
	after := scrape(f)
	d := faultkit.Diff(before, after)
	writes := d.MirrorWrites()
	w := d.Writes()
	t.Logf("storm: converged %s after the last change (%s after the storm began)", converged, since(start))
	t.Logf("storm: mirror writes %s: %.0f successful writes for %d objects = %.2f per object; %.0f conflicts (%.2f per object), retried from a fresh read",
		faultkit.FormatCounts(w), writes, n, writes/float64(n), w["conflict"], w["conflict"]/float64(n))
	t.Logf("storm: source reads %s; workqueue retries %.0f; API requests %.0f (%s)",
		faultkit.FormatCounts(d.By("captf_source_reads_total", "result")), d.Retries(), d.TotalRequests(), faultkit.FormatCounts(d.Requests()))
	// One write per object would be SPEC 13's worst case without batching;
	// each change (rotation, list edit touching sideA/sideB) may add a write
	// per namespace. More than that means writers redo each other's work.
	if bound := float64(n + 3*(edits+rotated) + 5); writes > bound {
		t.Errorf("SPEC 13: %.0f mirror writes for %d objects, %d list edits and %d rotations; want at most %.0f", writes, n, edits, rotated, bound)
	}
	if w["error"] > 0 {
		t.Errorf("%.0f mirror writes failed with an error (not a conflict)", w["error"])
	}

	// No hot loop: over a few sync periods, nothing is written and the
	// requests stay what a resync costs.
	time.Sleep(storm) // let the last status writes and events land
	q0 := scrape(f)
	logAt := len(f.Manager.Log())
	const periods = 3
	window := time.Now()
	time.Sleep(periods * storm) // a measurement window, not a wait for a state
	q1 := scrape(f)
	elapsed := time.Since(window)
	dq := faultkit.Diff(q0, q1)
	reqs := dq.TotalRequests()
	quietLog := f.Manager.Log()[logAt:]
	requeues := factsOf(quietLog).Requeues
	t.Logf("storm: quiet window %s (%d sync periods): mirror writes %s; API requests %.0f = %.2f per sync period per object (%s); workqueue adds %s; workqueue retries %s (the identity queue's timed re-reads count as retries); reconciles requeued after an error: %d",
		elapsed.Round(100*time.Millisecond), periods, faultkit.FormatCounts(dq.Writes()), reqs, reqs/periods/float64(n+2),
		faultkit.FormatCounts(dq.Requests()), faultkit.FormatCounts(dq.By("workqueue_adds_total", "name")),
		faultkit.FormatCounts(dq.By("workqueue_retries_total", "name")), requeues)
	if len(dq.Writes()) > 0 {
		t.Errorf("hot loop: mirror writes %s while nothing changed", faultkit.FormatCounts(dq.Writes()))
	}
	// A resync costs about one source GET per object (shared between
	// concurrent reconciles) plus the identity controller's reads.
	if bound := float64(periods+1) * float64(2*(n+2)+20); reqs > bound {
		t.Errorf("hot loop: %.0f API requests in %d quiet sync periods; want at most %.0f", reqs, periods, bound)
	}
	wr := dq.By("workqueue_retries_total", "name")
	if r := wr["terraformcluster"] + wr["terraformmachine"] + wr["terraformmachinepool"]; r > 0 || requeues > 0 {
		t.Errorf("hot loop: %.0f workload queue retries, %d reconciles requeued after an error while nothing changed:\n%s", r, requeues, grep(quietLog, "Requeuing", 20))
	}
	forbidden := []string{secretValue}
	for i := range rotated {
		forbidden = append(forbidden, framework.HashOf(framework.DefaultData(rotatedValue(i))))
	}
	requireLogClean(f, slices.Concat(forbidden, []string{framework.HashOf(framework.DefaultData(secretValue))})...)
}
