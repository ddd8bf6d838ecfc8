package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/captf/captf/pkg/credentials"
	mgr "github.com/captf/captf/pkg/manager"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// rotationPaths are the rotation scenario's runs, in order.
var rotationPaths = []string{"P2", "S4", "R2"}

// rotation changes the fleet's source Secret and measures when each mirror
// first carries the new hash. Path "P2" runs the manager at the default
// periods (--sync-period=10m, --identity-resync=5m) with its source watch,
// which pushes the change; "S4" and "R2" measure the fallbacks with the
// watch off (--watch-sources=false): "S4" through the identity
// controller's resync (--identity-resync short, --sync-period long), "R2"
// through the workload resync (the reverse). Each path has its own manager
// (restarted between them; the control plane and objects stay).
func (b *bench) rotation(ctx context.Context, path string) error {
	const sc = "rotation"
	if b.fleet == nil {
		return fmt.Errorf("no fleet: the fan-out did not run")
	}
	f := b.fleet
	n := len(f.namespaces)
	var name, flags string
	var args []string
	switch path {
	case "P2":
		d := mgr.NewOptions()
		name, args = "p2", []string{"--sync-period=" + d.SyncPeriod.String(), "--identity-resync=" + d.IdentityResync.String(), "--watch-sources=true"}
		flags = fmt.Sprintf("default periods --sync-period=%s, --identity-resync=%s; source watch", d.SyncPeriod, d.IdentityResync)
	case "S4":
		name, args = "s4-polled", append(b.s4Args(), "--watch-sources=false")
		flags = fmt.Sprintf("--identity-resync=%s, --sync-period=%s, --watch-sources=false", b.cfg.S4Resync, b.cfg.LongPeriod)
	case "R2":
		name, args = "r2", []string{"--sync-period=" + b.cfg.R2SyncPeriod.String(), "--identity-resync=" + b.cfg.LongPeriod.String(), "--watch-sources=false"}
		flags = fmt.Sprintf("--sync-period=%s, --identity-resync=%s, --watch-sources=false", b.cfg.R2SyncPeriod, b.cfg.LongPeriod)
	default:
		return fmt.Errorf("unknown rotation path %q", path)
	}
	// The baselines: one update per mirror (what SPEC P3 allows a rewrite),
	// and one GET and one update per mirror (what B1 required before P3),
	// limited like the manager. Its
	// Secrets are not mirrors, so the manager does not see them; when this
	// path needs another manager, the baseline runs before it starts, while
	// no manager competes for the API server.
	if b.e.mgr != nil && b.e.mgr.name != name {
		b.e.mgr.Terminate()
		b.e.mgr = nil
	}
	if f.baseline[0].obj == nil {
		if _, err := b.baselineCreate(ctx, f.baseline); err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
	}
	baseline, err := b.baselineUpdate(ctx, f.baseline, false)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(b.log, "baseline: %d Secret updates in %s\n", n, baseline.Round(time.Millisecond))
	readUpdate, err := b.baselineUpdate(ctx, f.baseline, true)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(b.log, "baseline: %d Secret GETs and updates in %s\n", n, readUpdate.Round(time.Millisecond))
	if err := b.managerRun(ctx, sc, name, args...); err != nil {
		return err
	}

	before, _, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	data := credentialData()
	hash := credentials.SourceHash(data)
	b.t.watchHash(fleetIdentity, f.mirror, hash)
	defer b.t.stopHash()
	t0 := time.Now()
	if err := b.setSource(ctx, fleetSource, data); err != nil {
		return err
	}
	fmt.Fprintf(b.log, "rotated the source Secret (%s); waiting for %d mirrors\n", path, n)
	var seen map[string]time.Time
	_, err = waitFor(ctx, "rotation "+path, b.cfg.Timeout, 100*time.Millisecond, func() (bool, string) {
		seen = b.t.seenHash()
		return len(seen) >= n, fmt.Sprintf("%d of %d mirrors carry the new hash", len(seen), n)
	})
	if err != nil {
		b.res.fail("rotation %s did not complete: %v", path, err)
		return err
	}
	f.hash = hash
	after, idle, err := b.e.waitIdle(ctx)
	if err != nil {
		return err
	}
	d := faultkit.Diff(before, after)
	for _, p := range b.verifyFleet(ctx, f) {
		b.res.fail("rotation %s: %s", path, p)
	}

	lat := make([]float64, 0, n)
	for _, ns := range f.namespaces {
		lat = append(lat, seen[ns].Sub(t0).Seconds())
	}
	sort.Float64s(lat)
	minL, maxL := lat[0], lat[len(lat)-1]
	fmt.Fprintf(b.log, "rotation %s: first mirror after %.2fs, last after %.2fs\n", path, minL, maxL)
	r := b.res
	label := fmt.Sprintf("%s (%s)", path, flags)
	r.add(sc, label+": p50 source change -> mirror", percentile(lat, 0.50), unitSeconds)
	r.add(sc, path+": p95", percentile(lat, 0.95), unitSeconds)
	r.add(sc, fmt.Sprintf("%s: max (all %d mirrors current)", path, n), maxL, unitSeconds).vs(baseline.Seconds())
	r.add(sc, fmt.Sprintf("%s: max, vs a baseline that re-reads each Secret before its update (B1's rewrite before P3)", path), maxL, unitSeconds).vs(readUpdate.Seconds())
	r.add(sc, path+": wait until the first mirror changed", minL, unitSeconds)

	r.add(sc, path+": first -> last mirror changed", maxL-minL, unitSeconds).vs(baseline.Seconds())
	r.add(sc, path+": source change -> manager idle (follow-up work done)", idle.Sub(t0).Seconds(), unitSeconds)
	w := d.Writes()
	r.add(sc, path+": mirror writes", d.MirrorWrites(), unitCount).vs(float64(n))
	reads := d.Sum("captf_source_reads_total", nil)
	r.add(sc, path+": source reads", reads, unitCount)
	r.add(sc, path+": manager API requests", d.Sum("captf_api_requests_total", nil), unitCount).vs(float64(n))
	r.requests(sc, fmt.Sprintf("%s, source change to idle", label), d)
	if w["updated"] != float64(n) || w["created"]+w["deleted"]+w["conflict"] > 0 {
		r.note("rotation %s: mirror writes %s for %d mirrors (one update per mirror expected)", path, faultkit.FormatCounts(w), n)
	}
	return nil
}
