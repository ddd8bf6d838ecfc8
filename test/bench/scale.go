package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/captf/captf/test/integration/framework/faultkit"
)

// identityQueue is the identity controller's workqueue name.
const identityQueue = "terraformclusteridentity"

// footprint reports the manager's RSS and Go heap over every converged
// object the run has built (issue 15: memory per 1,000 objects). Run at
// three sizes, the rows give the growth; a single size only bounds it.
func (b *bench) footprint(ctx context.Context, sc string) error {
	c, m, p := b.t.objects()
	objects := c + m + p
	if objects == 0 {
		return nil
	}
	rss, heap, err := b.settledMemory(ctx)
	if err != nil {
		return err
	}
	r := b.res
	r.add(sc, fmt.Sprintf("manager RSS over %d converged objects", objects), faultkit.MiB(rss), unitMiB)
	r.add(sc, fmt.Sprintf("manager Go heap in use over %d converged objects", objects), faultkit.MiB(heap), unitMiB)
	// What the memory limit holds: VmRSS also counts the binary's mapped
	// pages, which the kernel can reclaim under the limit.
	anon, err := faultkit.AnonRSS(b.e.mgr.PID())
	if err != nil {
		return err
	}
	r.add(sc, fmt.Sprintf("manager anonymous RSS (RssAnon) over %d converged objects", objects), faultkit.MiB(anon), unitMiB)
	if b.cfg.Profile != "" {
		// The heap in use counts garbage not yet collected (GOGC); what
		// the objects hold is the live heap, after a forced GC.
		live, err := b.e.mgr.liveHeap()
		if err != nil {
			return err
		}
		r.add(sc, fmt.Sprintf("manager live heap after a forced GC over %d converged objects", objects), faultkit.MiB(live), unitMiB)
	}
	r.add(sc, "RSS per 1,000 objects (whole RSS / objects; the slope across sizes is the marginal cost)", 1000*faultkit.MiB(rss)/float64(objects), unitMiB)
	return nil
}

// restart stops the manager and starts a new one over the converged
// objects: the time until it is idle, its requests, and its writes (M6: a
// start-up over converged objects writes no mirror; status writes are
// reported).
func (b *bench) restart(ctx context.Context) error {
	if err := b.restartAs(ctx, "restart"); err != nil {
		return err
	}
	if b.cfg.RestartBinary == "" {
		return nil
	}
	// -restart-binary: the same restart with the other tree's binary.
	own := b.e.fw.CaptfBinary
	b.e.fw.CaptfBinary = b.cfg.RestartBinary
	defer func() { b.e.fw.CaptfBinary = own }()
	fmt.Fprintf(b.log, "restart-b: binary %s\n", b.cfg.RestartBinary)
	return b.restartAs(ctx, "restart-b")
}

// restartAs is one restart, reported as scenario sc; its profiles (with
// -profile) are sc-cpu.pprof and sc-heap.pprof.
func (b *bench) restartAs(ctx context.Context, sc string) error {
	c, m, p := b.t.objects()
	objects := c + m + p
	started := time.Now()
	if b.cfg.Profile != "" {
		b.e.profileNext = filepath.Join(b.cfg.Profile, sc+"-cpu.pprof")
	}
	mg, err := b.e.startManager(ctx, sc, "--identity-resync="+b.cfg.LongPeriod.String(), "--sync-period="+b.cfg.LongPeriod.String())
	if err != nil {
		return err
	}
	ready := time.Since(started)
	idle, last, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	if mg.cpuProfile != nil {
		if err := <-mg.cpuProfile; err != nil {
			return err
		}
		if err := mg.saveProfile(ctx, "heap?gc=1", filepath.Join(b.cfg.Profile, sc+"-heap.pprof")); err != nil {
			return err
		}
		fmt.Fprintf(b.e.log, "%s: profiles in %s (go tool pprof -top bin/captf %s)\n", sc, b.cfg.Profile, filepath.Join(b.cfg.Profile, sc+"-cpu.pprof"))
	}
	reqs := idle.Requests()
	var writes, total float64
	for k, v := range reqs {
		total += v
		if verb, _, _ := strings.Cut(k, " "); verb != "get" && verb != "list" && verb != "watch" {
			writes += v
		}
	}
	r := b.res
	r.add(sc, fmt.Sprintf("manager restart over %d converged objects: start -> idle", objects), last.Sub(started).Seconds(), unitSeconds)
	r.add(sc, "start -> ready (informer caches synced, handlers fed)", ready.Seconds(), unitSeconds)
	r.add(sc, "API requests until idle", total, unitCount).vs(float64(objects))
	r.add(sc, "source GETs until idle", idle.Sum("captf_source_reads_total", nil), unitCount)
	r.add(sc, "mirror writes until idle (must be 0)", idle.MirrorWrites(), unitCount)
	r.add(sc, "writes of any kind until idle", writes, unitCount)
	r.requests(sc, fmt.Sprintf("restart over %d objects", objects), idle)
	if w := idle.MirrorWrites(); w > 0 {
		r.fail("%s: %v mirror writes on a restart over converged objects (%s); M6 says an unchanged pass makes no write", sc, w, faultkit.FormatCounts(idle.Writes()))
	}
	if writes > 0 {
		r.note("%s: %v writes on a restart over converged objects: %s", sc, writes, faultkit.FormatCounts(reqs))
	}
	return b.footprint(ctx, sc)
}

// identityPass measures one identity resync pass (S4) over every identity
// the run has created: its duration, source reads and requests. The
// manager runs with --identity-resync=-s4-pass-period and a long
// --sync-period, so the pass is the identity resync alone.
func (b *bench) identityPass(ctx context.Context) error {
	const sc = "s4pass"
	p := b.cfg.S4PassPeriod
	if err := b.managerRun(ctx, sc, "s4pass", "--identity-resync="+p.String(), "--sync-period="+b.cfg.LongPeriod.String()); err != nil {
		return err
	}
	queueAdds := func(m faultkit.Metrics) float64 { return m.Get("workqueue_adds_total", "name", identityQueue) }
	d, tick, lastActive, err := b.onePass(ctx, "identity resync tick (--identity-resync="+p.String()+")", p, queueAdds)
	if err != nil {
		return err
	}
	identities := d.Get("workqueue_adds_total", "name", identityQueue)
	r := b.res
	r.add(sc, fmt.Sprintf("identity resync pass (--identity-resync=%s): identities reconciled", p), identities, unitCount)
	r.add(sc, "pass duration (resync tick -> idle)", lastActive.Sub(tick).Seconds(), unitSeconds)
	r.add(sc, "source GETs in the pass", d.Sum("captf_source_reads_total", nil), unitCount).vs(identities)
	r.add(sc, "manager API requests in the pass", d.TotalRequests(), unitCount)
	r.add(sc, "mirror writes in the pass (must be 0)", d.MirrorWrites(), unitCount)
	r.add(sc, "workload reconciles the pass caused", workloadAdds(d), unitCount)
	r.requests(sc, "one identity resync pass", d)
	if w := d.MirrorWrites(); w > 0 {
		r.fail("s4pass: %v mirror writes in an identity resync pass over converged objects (%s)", w, faultkit.FormatCounts(d.Writes()))
	}
	return nil
}

// saveProfile writes the manager's /debug/pprof/<name> (it runs with
// --profiling when -profile is given) to file. The manager may have just
// been started: a refused connection is retried for 10 s.
func (m *manager) saveProfile(ctx context.Context, name, file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	var resp *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.MetricsURL+"/debug/pprof/"+name, nil)
		if err != nil {
			return err
		}
		if resp, err = http.DefaultClient.Do(req); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("profile %s of manager %s: %w", name, m.name, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("profile %s of manager %s: %s: %s", name, m.name, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// liveHeap forces a GC in the manager (it runs with --profiling) and
// returns the heap allocated after it: the runtime.MemStats HeapAlloc of
// /debug/pprof/heap?gc=1&debug=1.
func (m *manager) liveHeap() (int64, error) {
	code, body := m.Get(m.MetricsURL + "/debug/pprof/heap?gc=1&debug=1")
	if code != http.StatusOK {
		return 0, fmt.Errorf("heap of manager %s: status %d", m.name, code)
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "# HeapAlloc = "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("heap of manager %s: no HeapAlloc line", m.name)
}
