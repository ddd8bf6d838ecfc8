package load

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestFlakyAPI is fault 6: the manager reaches kube-apiserver through a
// proxy that, for a while, fails a share of its requests: 500s, 429s with
// Retry-After, dropped connections (every watch on them too) and slow
// answers. Meanwhile the source rotates, a namespace is revoked, another is
// allowed with new objects, an object is deleted. The manager must back off
// (bounded retries, no request storm), never crash, converge once the proxy
// is healthy (mirrors current, conditions True, one Job per object and
// generation), and log no Secret value.
func TestFlakyAPI(t *testing.T) {
	e := framework.Get(t)
	proxy, err := faultkit.StartFlakyProxy(e.CP.URL, e.CP.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig-flaky")
	if err := proxy.WriteKubeconfig(kubeconfig, controlplane.Manager, e.CP.Users[controlplane.Manager].Token); err != nil {
		t.Fatal(err)
	}
	const sync = 5 * time.Second
	// The later --kubeconfig wins over the one StartManager passes.
	f := ownManager(t, "--kubeconfig="+kubeconfig, "--sync-period="+sync.String(), "--identity-resync=3s", "--workers=4")

	// Steady state through a healthy proxy.
	perNS := scale(3, 6)
	ns1 := e.CreateNamespace(t, "flaky", nil)
	ns2 := e.CreateNamespace(t, "flaky", nil)
	ns3 := e.CreateNamespace(t, "flaky", nil)
	releaseAtEnd(f, ns1, ns2, ns3)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns1, ns2))
	objs := map[string][]workload{}
	for _, ns := range []string{ns1, ns2} {
		for i := range perNS {
			objs[ns] = append(objs[ns], mustCreate(f, kinds[i%3], ns, fmt.Sprintf("w%d", i), id, moduleImage))
		}
	}
	fin := startFinisher(f, time.Second, ns1, ns2, ns3)
	for _, ns := range []string{ns1, ns2} {
		for _, w := range objs[ns] {
			f.WaitCondition(w.String(), conds(f, w), v1alpha1.ConditionReady, "True", v1alpha1.ReasonReady)
		}
	}
	base := scrape(f)
	baseLog := len(f.Manager.Log())

	// Flaky: a share of requests fail, and every stream in flight is cut.
	faults := &faultkit.Faults{Error500: 0.15, TooMany: 0.10, Drop: 0.05, Slow: 0.15, SlowMin: 200 * time.Millisecond, SlowMax: 3 * time.Second}
	flaky := scale(20*time.Second, 60*time.Second)
	t.Logf("flaky: for %s, failing %.0f%% of requests (500 %.0f%%, 429 %.0f%%, dropped connection %.0f%%) and slowing %.0f%% by %s-%s",
		flaky, 100*(faults.Error500+faults.TooMany+faults.Drop), 100*faults.Error500, 100*faults.TooMany, 100*faults.Drop, 100*faults.Slow, faults.SlowMin, faults.SlowMax)
	before := proxy.Counts()
	proxy.SetFaults(faults)
	proxy.CutStreams()
	flakyAt := time.Now()

	// Changes while the API is flaky (made by the admin, not through the proxy).
	rotated := framework.DefaultData(rotatedValue(100))
	if err := setSource(f.Ctx, e, ref, rotated); err != nil {
		t.Fatal(err)
	}
	for i := range perNS {
		objs[ns3] = append(objs[ns3], mustCreate(f, kinds[i%3], ns3, fmt.Sprintf("w%d", i), id, moduleImage))
	}
	if err := editIdentity(f.Ctx, e, id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.AllowedNamespaces = framework.List(ns1, ns3) }); err != nil {
		t.Fatal(err)
	}
	gone := objs[ns1][0]
	if err := del(f.Ctx, e, gone); err != nil {
		t.Fatal(err)
	}
	objs[ns1] = objs[ns1][1:]

	// A second rotation just before the API heals: convergence then
	// mostly happens after it, which measures the recovery.
	final := framework.DefaultData(rotatedValue(101))
	rotatedAgain := false
	want := framework.HashOf(final)
	// converged: every allowed mirror current with exactly its users, none
	// in the revoked namespace, the deleted object gone, the others Ready.
	converged := func() (bool, string) {
		ms, err := mirrorsOf(f.Ctx, e, id)
		if err != nil {
			return false, err.Error()
		}
		for _, ns := range []string{ns1, ns3} {
			m := ms[ns]
			if m == nil {
				return false, "no mirror in " + ns
			}
			if m.Annotations[v1alpha1.AnnotationSourceHash] != want {
				return false, "stale mirror in " + ns
			}
			if d := sameUIDs(m, objs[ns]); d != "" {
				return false, "mirror in " + ns + ": " + d
			}
		}
		if ms[ns2] != nil {
			return false, "the revoked namespace still has a mirror"
		}
		if s, err := get(f.Ctx, e, gone); err != nil || s.Exists {
			return false, fmt.Sprintf("the deleted %s is still there (%v): %s", gone, err, describeConds(s.Conditions))
		}
		for _, ns := range []string{ns1, ns3} {
			for _, w := range objs[ns] {
				s, err := get(f.Ctx, e, w)
				if err != nil {
					return false, err.Error()
				}
				if !condIs(s.Conditions, v1alpha1.ConditionReady, "True", "") {
					return false, w.String() + " not Ready:" + describeConds(s.Conditions)
				}
			}
		}
		for _, w := range objs[ns2] {
			s, err := get(f.Ctx, e, w)
			if err != nil {
				return false, err.Error()
			}
			if !condIs(s.Conditions, v1alpha1.ConditionIdentityAllowed, "False", v1alpha1.ReasonNamespaceNotAllowed) {
				return false, w.String() + " in the revoked namespace:" + describeConds(s.Conditions)
			}
		}
		return true, ""
	}

	// Stay flaky; cut the streams again half-way; the manager must live.
	var convergedFlaky time.Duration
	lastTry := time.Now()
	for time.Since(flakyAt) < flaky {
		if f.Manager.Exited() {
			t.Fatalf("the manager exited while the API was flaky: %v", f.Manager.Wait())
		}
		if time.Since(flakyAt) > flaky/2 && proxy.Counts()[faultkit.FaultCut]-before[faultkit.FaultCut] < 2 {
			proxy.CutStreams()
		}
		if !rotatedAgain && time.Since(flakyAt) > flaky-3*time.Second {
			if err := setSource(f.Ctx, e, ref, final); err != nil {
				t.Fatal(err)
			}
			rotatedAgain = true
		}
		if rotatedAgain && convergedFlaky == 0 && time.Since(lastTry) > 2*time.Second {
			lastTry = time.Now()
			if ok, _ := converged(); ok {
				convergedFlaky = since(flakyAt)
			}
		}
		time.Sleep(500 * time.Millisecond) // the flaky period's pace, not a wait for a state
	}
	duringLog := f.Manager.Log()[baseLog:]
	during := scrape(f)
	flakyFor := time.Since(flakyAt)
	counts := proxy.Counts()
	for k, v := range before {
		counts[k] -= v
	}
	var total int64
	for k, v := range counts {
		if k != faultkit.FaultCut {
			total += v
		}
	}

	// Healthy again: the manager must converge by itself.
	proxy.SetFaults(nil)
	healedAt := time.Now()
	f.WaitFor("converged after the API healed", func() (bool, string) {
		if f.Manager.Exited() {
			t.Fatalf("the manager exited: %v", f.Manager.Wait())
		}
		return converged()
	})
	recovery := since(healedAt)
	fin.Stop()
	after := scrape(f)

	// Figures.
	d := faultkit.Diff(base, during)
	keys := 3*perNS + 1 // workload objects plus the identity
	retries := d.By("workqueue_retries_total", "name")
	workloadRetries := retries["terraformcluster"] + retries["terraformmachine"] + retries["terraformmachinepool"]
	facts := factsOf(duringLog)
	t.Logf("flaky: %s flaky: %d requests reached the proxy (%.1f/s): %s", flakyFor.Round(100*time.Millisecond), total, float64(total)/flakyFor.Seconds(), faultkit.FormatFaultCounts(counts))
	t.Logf("flaky: manager meanwhile: API requests %.0f (%s); workqueue retries %s; reconciles requeued after an error %d; klog error lines %d; mirror writes %s; source reads %s",
		d.TotalRequests(), faultkit.FormatCounts(d.By("captf_api_requests_total", "verb")), faultkit.FormatCounts(retries), facts.Requeues, facts.Errors,
		faultkit.FormatCounts(d.Writes()), faultkit.FormatCounts(d.By("captf_source_reads_total", "result")))
	whenFlaky := "not while the faults lasted"
	if convergedFlaky > 0 {
		whenFlaky = fmt.Sprintf("already %s after the faults began (the last rotation 3s before they ended), despite them", convergedFlaky)
	}
	t.Logf("flaky: converged %s; %s after the proxy healed (%s after the faults began); Jobs finished by the test %v; manager still running: %v",
		whenFlaky, recovery, since(flakyAt), fin.finished, !f.Manager.Exited())
	t.Logf("flaky: after healing: API requests %.0f, mirror writes %s", faultkit.Diff(during, after).TotalRequests(), faultkit.FormatCounts(faultkit.Diff(during, after).Writes()))

	// Backing off: with per-key exponential backoff (5ms doubling) plus one
	// resync per sync period, a key fails at most about log2(T/5ms) + T/sync
	// + a few times in T; a hot loop would fail it hundreds of times.
	perKey := math.Log2(flakyFor.Seconds()/0.005) + flakyFor.Seconds()/sync.Seconds() + 4
	if bound := float64(keys) * perKey; workloadRetries > bound {
		t.Errorf("backoff: %.0f workload retries for %d objects in %s; want at most %.0f", workloadRetries, keys, flakyFor, bound)
	}
	// client-go's rate limit is --kube-api-qps=50: a manager that does not
	// back off would use it up.
	if rate := d.TotalRequests() / flakyFor.Seconds(); rate > 25 {
		t.Errorf("backoff: the manager sent %.1f requests/s while the API was flaky", rate)
	}
	if f.Manager.Exited() {
		t.Errorf("the manager exited: %v", f.Manager.Wait())
	}
	// J1: no Job twice, whatever answers were lost.
	for _, ns := range []string{ns1, ns2, ns3} {
		for key, names := range jobsPerOwner(f, ns) {
			if len(names) > 1 {
				t.Errorf("J1: %d Jobs for %s in %s: %v", len(names), key, ns, names)
			}
		}
	}
	log := f.Manager.Log()
	if strings.Contains(log, "panic") || strings.Contains(log, "goroutine ") {
		t.Errorf("the manager's log shows a panic or a stack:\n%s", grep(log, "panic", 10))
	}
	requireLogClean(f, secretValue, framework.HashOf(data), framework.HashOf(rotated), want)
}
