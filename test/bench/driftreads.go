package main

import (
	"fmt"
	"strings"
	"time"
)

// The drift scenario's source reads (SPEC P1, issue 25): per --sync-period
// pass, and what remains between checks outside the passes. A pass adds
// every key as one stamped batch, so it should cost one source GET per
// identity with drift checks pending, as without them; a scheduled look
// (a drift check's due time, the image-pull check 30 s after a Job
// starts) is a Wake and reads nothing of its own.

// passWidth is how long after a pass's tick its reads are counted: the
// manager's ticker starts when its caches have synced (a few seconds
// after its process), and a pass over a thousand objects takes seconds.
const passWidth = 30 * time.Second

// passReads is one --sync-period pass's source GETs.
type passReads struct {
	tick  time.Time
	reads float64
	// clean: no drift check was due or being recorded in the pass's
	// stretch, so its reads are the pass's own.
	clean bool
}

// driftPassReads counts, for each pass due at started + k*period (k >= 1)
// before end, the source GETs of the sample steps within [tick, tick +
// passWidth], and the source GETs of the steps that meet neither a pass's
// stretch nor a drift span (the reads left between checks).
func driftPassReads(samples []reqSample, spans []span, started time.Time, period time.Duration, end time.Time) (passes []passReads, outside float64) {
	if period <= 0 || len(samples) == 0 {
		return nil, 0
	}
	var stretches []span
	for tick := started.Add(period); tick.Before(end); tick = tick.Add(period) {
		s := span{tick, tick.Add(passWidth)}
		stretches = append(stretches, s)
		passes = append(passes, passReads{tick: tick, clean: !overlaps(spans, s.from, s.to)})
	}
	for k := 1; k < len(samples); k++ {
		prev, cur := samples[k-1], samples[k]
		d := cur.reads - prev.reads
		if d == 0 {
			continue
		}
		in := false
		for i, s := range stretches {
			if !s.from.After(cur.at) && s.to.After(prev.at) {
				passes[i].reads += d
				in = true
				break
			}
		}
		if !in && !overlaps(spans, prev.at, cur.at) {
			outside += d
		}
	}
	return passes, outside
}

// driftReadRows adds the rows of the passes' source GETs.
func (b *bench) driftReadRows(run *driftRun, spans []span) {
	const sc = "drift"
	period := b.cfg.DriftSyncPeriod
	passes, outside := driftPassReads(run.samples, spans, run.started, period, run.end)
	var clean []string
	most := -1.0
	for _, p := range passes {
		if p.clean && !p.tick.Before(run.samples[0].at) {
			clean = append(clean, fmt.Sprintf("%s: %.0f", p.tick.Format(time.TimeOnly), p.reads))
			most = max(most, p.reads)
		}
	}
	r := b.res
	if most >= 0 {
		r.add(sc, fmt.Sprintf("--sync-period=%s passes with no check due (%d): most source GETs in one (baseline: 1 identity)", period, len(clean)), most, unitCount).vs(1)
		r.note("drift: source GETs per --sync-period pass with no check due: %s", strings.Join(clean, ", "))
	}
	r.add(sc, "source GETs between checks outside the --sync-period passes", outside, unitCount)
}
