package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/captf/captf/test/integration/framework/faultkit"
)

// workloadQueues are the workqueue names of the workload controller.
var workloadQueues = []string{"terraformcluster", "terraformmachine", "terraformmachinepool"}

func workloadAdds(m faultkit.Metrics) float64 {
	var n float64
	for _, q := range workloadQueues {
		n += m.Get("workqueue_adds_total", "name", q)
	}
	return n
}

// steady measures one full --sync-period pass over converged objects: the
// manager's API requests by verb and resource, source reads, and mirror
// writes (M6: an unchanged pass makes no write). The manager runs with
// --sync-period=-steady-sync-period and a long --identity-resync, so the
// pass is the workload resync alone; the pass is the work between the
// resync tick (the workload queues' adds jump) and the next idle moment.
func (b *bench) steady(ctx context.Context) error {
	const sc = "steady"
	p := b.steadyPeriod()
	if err := b.managerRun(ctx, sc, "steady", "--sync-period="+p.String(), "--identity-resync="+b.cfg.LongPeriod.String()); err != nil {
		return err
	}
	d, tick, lastActive, err := b.onePass(ctx, "resync tick (--sync-period="+p.String()+")", p, workloadAdds)
	if err != nil {
		return err
	}

	c, m, pl := b.t.objects()
	objects := float64(c + m + pl)
	identities := map[string]bool{}
	for _, kind := range []string{kindCluster, kindMachine, kindPool} {
		for _, key := range b.storeKeys(kind) {
			ns, name, _ := strings.Cut(key, "/")
			if s := b.t.status(kind, ns, name); s != nil && s.Identity != "" {
				identities[s.Identity] = true
			}
		}
	}
	adds := workloadAdds(d)
	pass := lastActive.Sub(tick)
	fmt.Fprintf(b.log, "resync pass over %.0f objects took about %s\n", objects, pass.Round(time.Millisecond))

	r := b.res
	reads := d.Sum("captf_source_reads_total", nil)
	reqs := d.Requests()
	var statusWrites, total float64
	for k, v := range reqs {
		total += v
		if strings.HasPrefix(k, "update ") && strings.HasSuffix(k, "/status") {
			statusWrites += v
		}
	}
	r.add(sc, fmt.Sprintf("one --sync-period=%s pass over %.0f objects (%d clusters, %d machines, %d pools) using %d identities: objects reconciled", p, objects, c, m, pl, len(identities)), adds, unitCount).vs(objects)
	r.add(sc, "pass duration (resync tick -> idle)", pass.Seconds(), unitSeconds)
	r.add(sc, "source GETs in the pass (baseline: one per object)", reads, unitCount).vs(objects)
	r.add(sc, "source GETs per object", reads/objects, unitPer)
	r.add(sc, "manager API requests in the pass", total, unitCount).vs(objects)
	r.add(sc, "mirror writes in the pass (must be 0)", d.MirrorWrites(), unitCount)
	r.add(sc, "status writes in the pass", statusWrites, unitCount)
	r.requests(sc, fmt.Sprintf("one resync pass over %.0f objects", objects), d)
	if w := d.MirrorWrites(); w > 0 {
		r.fail("steady: %v mirror writes in a resync pass over converged objects (%s); M6 says an unchanged pass makes no write", w, faultkit.FormatCounts(d.Writes()))
	}
	if statusWrites > 0 {
		r.note("steady: %v status writes in a resync pass over converged objects", statusWrites)
	}
	if n := float64(len(identities)); n > 0 && n < objects/2 && reads >= 0.9*objects {
		r.note("steady: %.0f source GETs for %.0f objects sharing %d identities: concurrent reconciles of objects that share an identity did not share reads (SPEC 13: fewer than one per object)", reads, objects, len(identities))
	}
	if reads > objects {
		r.note("steady: %.0f source GETs for %.0f objects: more than one per object per pass", reads, objects)
	}
	if adds < objects {
		r.note("steady: only %.0f of %.0f objects were enqueued by the measured resync", adds, objects)
	}
	if adds > 1.5*objects || pass > p {
		r.note("steady: the measured window may hold more than one pass (%.0f adds for %.0f objects, %s for a %s period)", adds, objects, pass.Round(time.Millisecond), p)
	}
	if other := total - d.Sum("captf_api_requests_total", map[string]string{"verb": "get", "resource": "secrets"}); other > statusWrites {
		r.note("steady: %v API requests in the pass besides secret GETs and status writes: %s", other-statusWrites, faultkit.FormatCounts(reqs))
	}
	return b.footprint(ctx, sc)
}

// storeKeys lists the tracker's cached keys of a kind.
func (b *bench) storeKeys(kind string) []string {
	switch kind {
	case kindCluster:
		return b.t.clusters.GetStore().ListKeys()
	case kindMachine:
		return b.t.machines.GetStore().ListKeys()
	case kindPool:
		return b.t.pools.GetStore().ListKeys()
	}
	return nil
}

// steadyPeriod is the --sync-period of a measured pass: -steady-sync-period,
// or, when 0, long enough for the start-up pass and the measured pass to
// finish each within a period.
func (b *bench) steadyPeriod() time.Duration {
	if p := b.cfg.SteadySyncPeriod; p != 0 {
		return p
	}
	// A pass costs about one request per object at most: 2.5 passes' worth
	// of time leaves each room to finish within a period.
	c, m, pl := b.t.objects()
	return max(30*time.Second, time.Duration(2.5*float64(c+m+pl)/b.cfg.QPS*float64(time.Second)).Round(time.Second))
}

// onePass waits until the manager is idle, then for the tick that makes
// adds (a queue's adds counter) grow within period, then until it is idle
// again, and returns the metrics' difference over the pass, the tick and
// the last moment of activity.
func (b *bench) onePass(ctx context.Context, what string, period time.Duration, adds func(faultkit.Metrics) float64) (d faultkit.Metrics, tick, lastActive time.Time, err error) {
	before, _, err := b.e.waitIdle(ctx)
	if err != nil {
		return nil, tick, lastActive, err
	}
	adds0 := adds(before)
	fmt.Fprintf(b.log, "waiting for the %s\n", what)
	tick, err = waitFor(ctx, what, period+b.cfg.Timeout, 250*time.Millisecond, func() (bool, string) {
		m, err := b.e.mgr.metrics(ctx)
		if err != nil {
			return false, err.Error()
		}
		return adds(m) > adds0, "not yet"
	})
	if err != nil {
		return nil, tick, lastActive, err
	}
	after, lastActive, err := b.e.waitIdle(ctx)
	if err != nil {
		return nil, tick, lastActive, err
	}
	return faultkit.Diff(before, after), tick, lastActive, nil
}
