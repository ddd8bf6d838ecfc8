package main

import (
	"strings"
	"testing"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/drift"
)

var t0 = time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// The window covers one interval, the largest jitter and the slack after
// the last apply, and stops before a second check could be due.
func TestDriftWindowEnd(t *testing.T) {
	const interval = 30 * time.Minute
	objs := []driftObject{newDriftObject("a/x", "u1", at(0), interval), newDriftObject("a/y", "u2", at(5*time.Minute), interval)}
	end, capped := driftWindowEnd(objs, interval)
	want := at(5*time.Minute + interval + 3*time.Minute + 90*time.Second)
	if capped || !end.Equal(want) {
		t.Fatalf("end %s capped %v, want %s", end.Sub(t0), capped, want.Sub(t0))
	}
	for _, o := range objs {
		if !o.due.Before(end) || o.due.Before(o.applied.Add(interval)) {
			t.Fatalf("%s due %s not in [interval, end)", o.key, o.due.Sub(t0))
		}
	}
	// Applies spread over more than an interval minus the jitter and
	// slack: cut before the first object's second check.
	objs = append(objs, newDriftObject("a/z", "u3", at(interval), interval))
	end, capped = driftWindowEnd(objs, interval)
	if !capped || !end.Equal(at(2*interval-time.Second)) {
		t.Fatalf("end %s capped %v, want a cut at two intervals", end.Sub(t0), capped)
	}
	// Short intervals keep a slack of 30 s.
	objs = []driftObject{newDriftObject("a/x", "u1", at(0), 2*time.Minute)}
	if end, _ := driftWindowEnd(objs, 2*time.Minute); !end.Equal(at(2*time.Minute + 12*time.Second + 30*time.Second)) {
		t.Fatalf("2m interval: end %s", end.Sub(t0))
	}
}

// One drift Job per object passes; two, none, or one before its due time
// are each reported; other objects' Jobs and apply Jobs are not counted.
func TestCountDrift(t *testing.T) {
	const interval = 10 * time.Minute
	objs := []driftObject{
		newDriftObject("n/one", "u1", at(0), interval),
		newDriftObject("n/two", "u2", at(0), interval),
		newDriftObject("n/none", "u3", at(0), interval),
		newDriftObject("n/early", "u4", at(0), interval),
		newDriftObject("n/late", "u5", at(0), interval),
	}
	end := at(interval + 2*time.Minute)
	objs[4].due = end.Add(-10 * time.Second) // due too close to the end
	job := func(key, name string, a v1alpha1.JobAction, created time.Time) driftJob {
		return driftJob{key: key, name: name, action: a, created: created, seen: created}
	}
	js := []driftJob{
		job("n/one", "apply", v1alpha1.JobActionApply, at(0)),
		job("n/one", "d1", v1alpha1.JobActionDrift, objs[0].due.Add(2*time.Second)),
		job("n/two", "d1", v1alpha1.JobActionDrift, objs[1].due),
		job("n/two", "d2", v1alpha1.JobActionDrift, objs[1].due.Add(time.Minute)),
		job("n/early", "d1", v1alpha1.JobActionDrift, objs[3].due.Add(-5*time.Second)),
		job("other/x", "d1", v1alpha1.JobActionDrift, at(time.Minute)),
		job("n/late", "d1", v1alpha1.JobActionDrift, end.Add(time.Second)), // after the window
	}
	c := countDrift(objs, js, end, time.Second)
	if c.total != 4 || c.others != 1 || c.notDue != 1 {
		t.Errorf("total %d others %d notDue %d, want 4 1 1", c.total, c.others, c.notDue)
	}
	if strings.Join(c.more, ",") != "n/two (2)" {
		t.Errorf("more: %v", c.more)
	}
	if strings.Join(c.none, ",") != "n/none" {
		t.Errorf("none: %v", c.none)
	}
	if len(c.early) != 1 || !strings.HasPrefix(c.early[0], "n/early") {
		t.Errorf("early: %v", c.early)
	}
	if len(c.delays) != 3 || c.delays[0] != -5 || c.delays[2] != 2 {
		t.Errorf("delays: %v", c.delays)
	}
	// Created within the tolerance (whole seconds) is not early.
	js = []driftJob{job("n/one", "d1", v1alpha1.JobActionDrift, objs[0].due.Add(-500*time.Millisecond))}
	if c := countDrift(objs[:1], js, end, time.Second); len(c.early) != 0 {
		t.Errorf("within the tolerance: %v", c.early)
	}
}

// Spans run from a check's due time to settle after its record; an object
// due without a finished and recorded Job keeps its span open to the end.
func TestDriftSpans(t *testing.T) {
	objs := []driftObject{{key: "n/a", due: at(10 * time.Minute)}, {key: "n/b", due: at(20 * time.Minute)}, {key: "n/c", due: at(25 * time.Minute)}}
	end := at(30 * time.Minute)
	js := []driftJob{
		{key: "n/a", action: v1alpha1.JobActionDrift, created: at(10*time.Minute + time.Second), seen: at(10*time.Minute + time.Second),
			finished: at(10*time.Minute + 2*time.Second), recorded: at(10*time.Minute + 3*time.Second)},
		{key: "n/b", action: v1alpha1.JobActionDrift, created: at(20 * time.Minute), seen: at(20 * time.Minute)}, // never recorded
		{key: "n/a", action: v1alpha1.JobActionApply, seen: at(time.Minute), finished: at(time.Minute), recorded: at(time.Minute)},
	}
	got := driftSpans(objs, js, end, 10*time.Second)
	want := []span{{at(10*time.Minute - time.Second), at(10*time.Minute + 13*time.Second)}, {at(20*time.Minute - time.Second), end}}
	if len(got) != len(want) {
		t.Fatalf("spans %v, want %v", got, want)
	}
	for i := range want {
		if !got[i].from.Equal(want[i].from) || !got[i].to.Equal(want[i].to) {
			t.Errorf("span %d: %s-%s, want %s-%s", i, got[i].from.Sub(t0), got[i].to.Sub(t0), want[i].from.Sub(t0), want[i].to.Sub(t0))
		}
	}
}

// A step that meets a span counts as during, any other as between; a
// write between spans is described.
func TestAttribute(t *testing.T) {
	s := func(d time.Duration, reqs map[string]float64) reqSample { return reqSample{at: at(d), reqs: reqs} }
	samples := []reqSample{
		s(0, map[string]float64{"get secrets": 1}),
		s(time.Second, map[string]float64{"get secrets": 3}),                                                                               // between: reads
		s(2*time.Second, map[string]float64{"get secrets": 3, "create jobs": 1}),                                                           // during
		s(3*time.Second, map[string]float64{"get secrets": 3, "create jobs": 1, "create events": 2}),                                       // during (the span's end)
		s(5*time.Second, map[string]float64{"get secrets": 3, "create jobs": 1, "create events": 2, "update terraformclusters/status": 1}), // between: a write
	}
	spans := []span{{at(1500 * time.Millisecond), at(2500 * time.Millisecond)}}
	a := attribute(samples, spans)
	if a.during["create jobs"] != 1 || a.during["create events"] != 2 || a.during["get secrets"] != 0 {
		t.Errorf("during %v", a.during)
	}
	if a.between["get secrets"] != 2 || a.between["update terraformclusters/status"] != 1 {
		t.Errorf("between %v", a.between)
	}
	if a.betweenTime != 3*time.Second {
		t.Errorf("between time %s", a.betweenTime)
	}
	if len(a.betweenWrites) != 1 || !strings.Contains(a.betweenWrites[0], "update terraformclusters/status=1") {
		t.Errorf("between writes %v", a.betweenWrites)
	}
	if w := sumCounts(writeCounts(a.between)); w != 1 {
		t.Errorf("writes between: %v", w)
	}
}

// The jitter the scenario expects is the manager's own.
func TestDriftObjectDue(t *testing.T) {
	o := newDriftObject("n/a", "some-uid", at(0), 30*time.Minute)
	if want := at(30*time.Minute + drift.Jitter("some-uid", 30*time.Minute)); !o.due.Equal(want) {
		t.Fatalf("due %s, want %s", o.due, want)
	}
}

// -smoke runs every scenario but drift, which lasts its interval; the full
// run ends with it; -scenarios still wins over -smoke.
func TestSmokeLeavesOutDrift(t *testing.T) {
	var stderr strings.Builder
	c, err := parseFlags([]string{"-smoke"}, &stderr)
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	if c.has("drift") || !c.has("capi") {
		t.Errorf("-smoke runs %v", c.Scenarios)
	}
	if sc := smokeConfig().Scenarios; strings.Contains(strings.Join(sc, ","), "drift") {
		t.Errorf("TestBenchSmoke runs %v", sc)
	}
	if c, err = parseFlags(nil, &stderr); err != nil || c.Scenarios[len(c.Scenarios)-1] != "drift" {
		t.Errorf("the full run: %v, %v", c.Scenarios, err)
	}
	if c, err = parseFlags([]string{"-smoke", "-scenarios=drift"}, &stderr); err != nil || !c.has("drift") || len(c.Scenarios) != 1 {
		t.Errorf("-smoke -scenarios=drift: %v, %v", c.Scenarios, err)
	}
}

// Source GETs per --sync-period pass: a pass's stretch (its tick plus
// passWidth) takes the reads of the steps that meet it, and is clean when
// no drift span meets it; reads outside the stretches and the spans are
// the reads left between checks (issue 25).
func TestDriftPassReads(t *testing.T) {
	const period = 2 * time.Minute
	sample := func(d time.Duration, reads float64) reqSample { return reqSample{at: at(d), reads: reads} }
	samples := []reqSample{
		sample(90*time.Second, 0),
		sample(2*time.Minute+2*time.Second, 1), // the first pass
		sample(2*time.Minute+31*time.Second, 1),
		sample(3*time.Minute, 2),               // between checks, outside the passes
		sample(4*time.Minute+5*time.Second, 3), // the second pass, during a check
		sample(4*time.Minute+10*time.Second, 5),
		sample(5*time.Minute, 5),
	}
	spans := []span{{at(4 * time.Minute), at(4*time.Minute + 20*time.Second)}}
	passes, outside := driftPassReads(samples, spans, t0, period, at(5*time.Minute))
	want := []passReads{{tick: at(period), reads: 1, clean: true}, {tick: at(2 * period), reads: 3, clean: false}}
	if len(passes) != len(want) {
		t.Fatalf("passes %+v, want %+v", passes, want)
	}
	for i := range want {
		if !passes[i].tick.Equal(want[i].tick) || passes[i].reads != want[i].reads || passes[i].clean != want[i].clean {
			t.Fatalf("pass %d: %+v, want %+v", i, passes[i], want[i])
		}
	}
	if outside != 1 {
		t.Fatalf("outside the passes: %v, want 1", outside)
	}
}
