package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/drift"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// The drift scenario's arithmetic, apart from the API so it has table
// tests: when each object's check is due (pkg/drift's own Jitter), how
// long to watch, how many drift Jobs each object got, and which of the
// manager's requests fell while a check was due or being recorded and
// which fell between checks.

// driftObject is one cluster of the drift scenario once applied.
type driftObject struct {
	key string // namespace/name
	uid string
	// applied is status.lastApply.finishTime: what the manager counts
	// the interval from (O7).
	applied time.Time
	// due is applied + interval + the object's jitter.
	due time.Time
}

// driftJob is one Job the scenario's informer saw.
type driftJob struct {
	key    string // its object, namespace/name
	name   string
	action v1alpha1.JobAction
	// created is its creationTimestamp (the API server's clock, whole
	// seconds); seen, finished and recorded are the bench's clock: the
	// informer's add, the finisher's completion, and the first status of
	// its object naming it in lastDriftCheck.
	created, seen, finished, recorded time.Time
}

func newDriftObject(key, uid string, applied time.Time, interval time.Duration) driftObject {
	return driftObject{key: key, uid: uid, applied: applied, due: applied.Add(interval + drift.Jitter(uid, interval))}
}

// driftWindowEnd is when the scenario stops watching: one interval, the
// largest jitter and a slack (5% of the interval, at least 30 s) after
// the last apply, so every object's first check falls in it; never at or
// after the earliest moment a second check could be due (the first apply
// plus two intervals), in which case capped is true.
func driftWindowEnd(objs []driftObject, interval time.Duration) (end time.Time, capped bool) {
	if len(objs) == 0 {
		return time.Time{}, false
	}
	first, last := objs[0].applied, objs[0].applied
	for _, o := range objs[1:] {
		if o.applied.Before(first) {
			first = o.applied
		}
		if o.applied.After(last) {
			last = o.applied
		}
	}
	end = last.Add(interval + interval*drift.MaxJitterPercent/100 + driftSlack(interval))
	if limit := first.Add(2 * interval); !end.Before(limit) {
		return limit.Add(-time.Second), true
	}
	return end, false
}

func driftSlack(interval time.Duration) time.Duration { return max(interval/20, driftGrace) }

// driftGrace is how long after its due time an object must have its
// drift Job: a check due later than this before the window's end may
// fall after it.
const driftGrace = 30 * time.Second

// driftCount is how many drift Jobs each object got, checked against the
// interval: exactly one per object whose check fell due in the window,
// none created before its due time.
type driftCount struct {
	total int
	// more and none are the objects with more than one drift Job, and
	// with none although due well inside the window.
	more, none []string
	// notDue are objects due too close to the window's end to require a
	// Job (only when the window was capped).
	notDue int
	// early are drift Jobs created before their object was due.
	early []string
	// delays are due -> created (creationTimestamp), in seconds, sorted.
	delays []float64
	// others are drift Jobs of objects that are not the scenario's.
	others int
}

// countDrift counts the drift Jobs seen until end per object. A Job's
// creationTimestamp has whole seconds: one created less than tolerance
// before its due time is not early.
func countDrift(objs []driftObject, js []driftJob, end time.Time, tolerance time.Duration) driftCount {
	var c driftCount
	byKey := map[string]*driftObject{}
	for i := range objs {
		byKey[objs[i].key] = &objs[i]
	}
	per := map[string]int{}
	for _, j := range js {
		if j.action != v1alpha1.JobActionDrift || j.seen.After(end) {
			continue
		}
		o := byKey[j.key]
		if o == nil {
			c.others++
			continue
		}
		c.total++
		per[j.key]++
		if j.created.Add(tolerance).Before(o.due) {
			c.early = append(c.early, fmt.Sprintf("%s: Job %s created %s before it was due", j.key, j.name, o.due.Sub(j.created)))
		}
		if per[j.key] == 1 {
			c.delays = append(c.delays, j.created.Sub(o.due).Seconds())
		}
	}
	for _, o := range objs {
		switch n := per[o.key]; {
		case n > 1:
			c.more = append(c.more, fmt.Sprintf("%s (%d)", o.key, n))
		case n == 0 && o.due.Add(driftGrace).Before(end):
			c.none = append(c.none, o.key)
		case n == 0:
			c.notDue++
		}
	}
	sort.Strings(c.more)
	sort.Strings(c.none)
	sort.Float64s(c.delays)
	return c
}

// span is a stretch of time, from and to included.
type span struct{ from, to time.Time }

// driftSpans are the stretches in which some drift check was due or
// being recorded: for each drift Job, from its object's due time (or its
// creation, if earlier) to settle after the later of its completion and
// its record; for an object due before end without a recorded Job, from
// its due time to end. Merged and sorted.
func driftSpans(objs []driftObject, js []driftJob, end time.Time, settle time.Duration) []span {
	due := map[string]time.Time{}
	for _, o := range objs {
		due[o.key] = o.due
	}
	var out []span
	done := map[string]bool{}
	for _, j := range js {
		if j.action != v1alpha1.JobActionDrift {
			continue
		}
		from := j.seen
		if !j.created.IsZero() && j.created.Before(from) {
			from = j.created
		}
		if d, ok := due[j.key]; ok && d.Before(from) {
			from = d
		}
		to := end
		if !j.finished.IsZero() && !j.recorded.IsZero() {
			to = j.finished
			if j.recorded.After(to) {
				to = j.recorded
			}
			to = to.Add(settle)
			done[j.key] = true
		}
		out = append(out, span{from.Add(-time.Second), to})
	}
	for _, o := range objs {
		if !done[o.key] && o.due.Before(end) {
			out = append(out, span{o.due.Add(-time.Second), end})
		}
	}
	return mergeSpans(out)
}

// mergeSpans sorts spans and joins those that overlap.
func mergeSpans(in []span) []span {
	sort.Slice(in, func(i, j int) bool { return in[i].from.Before(in[j].from) })
	var out []span
	for _, s := range in {
		if n := len(out); n > 0 && !s.from.After(out[n-1].to) {
			if s.to.After(out[n-1].to) {
				out[n-1].to = s.to
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// reqSample is the manager's cumulative captf_api_requests_total by
// "verb resource", and its captf_source_reads_total, at one moment.
type reqSample struct {
	at    time.Time
	reqs  map[string]float64
	reads float64
}

// attribution splits the requests between consecutive samples: during a
// drift span (some check due or being recorded) or between them.
type attribution struct {
	during, between map[string]float64
	// betweenTime is the time covered by steps that touched no span.
	betweenTime time.Duration
	// betweenWrites describe each step between spans that wrote.
	betweenWrites []string
}

// attribute assigns each step (samples[k-1], samples[k]] to the spans
// when it overlaps one, else to the time between them.
func attribute(samples []reqSample, spans []span) attribution {
	a := attribution{during: map[string]float64{}, between: map[string]float64{}}
	if len(samples) == 0 {
		return a
	}
	start := samples[0].at
	for k := 1; k < len(samples); k++ {
		prev, cur := samples[k-1], samples[k]
		delta := map[string]float64{}
		for key, v := range cur.reqs {
			if d := v - prev.reqs[key]; d != 0 {
				delta[key] = d
			}
		}
		if overlaps(spans, prev.at, cur.at) {
			addCounts(a.during, delta)
			continue
		}
		a.betweenTime += cur.at.Sub(prev.at)
		addCounts(a.between, delta)
		if w := writeCounts(delta); len(w) > 0 {
			a.betweenWrites = append(a.betweenWrites, fmt.Sprintf("%s-%s after the window opened: %s",
				prev.at.Sub(start).Round(time.Second), cur.at.Sub(start).Round(time.Second), faultkit.FormatCounts(w)))
		}
	}
	return a
}

// overlaps reports whether (from, to] meets a span.
func overlaps(spans []span, from, to time.Time) bool {
	for _, s := range spans {
		if !s.from.After(to) && s.to.After(from) {
			return true
		}
	}
	return false
}

func addCounts(dst, src map[string]float64) {
	for k, v := range src {
		dst[k] += v
	}
}

// writeCounts keeps the writes of "verb resource" counts.
func writeCounts(c map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if isWrite(k) && v != 0 {
			out[k] = v
		}
	}
	return out
}

func isWrite(key string) bool {
	switch verb, _, _ := strings.Cut(key, " "); verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

func sumCounts(c map[string]float64) float64 {
	var n float64
	for _, v := range c {
		n += v
	}
	return n
}
