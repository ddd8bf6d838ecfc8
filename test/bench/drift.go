package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	mgr "github.com/captf/captf/pkg/manager"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// driftIdentity is the drift scenario's identity.
const driftIdentity = "bench-drift"

// driftSettle is how long after a drift Job's completion and record the
// manager may still write for it (its events go out on their own client).
const driftSettle = 10 * time.Second

// drift measures SPEC O7 at scale (issue 24): -drift-objects standalone
// clusters with a module in -drift-namespaces namespaces, under a manager
// with --drift-default-interval=-drift-interval and its default Job cap.
// A finisher completes every Job; a drift Job's pod ends with the runner's
// document of a check that found no drift. Once every cluster has applied
// and the manager is idle, the scenario watches until one interval, the
// largest jitter and a slack have passed since the last apply, sampling
// the manager's requests every second. Checks: each cluster gets exactly
// one drift Job in that window (the Jobs the interval implies), none
// before it is due, and the manager writes nothing while no check is due
// or being recorded. Workload objects of earlier scenarios that ran Jobs
// are paused first (cluster.x-k8s.io/paused), so their checks do not fall
// into the window.
func (b *bench) drift(ctx context.Context) error {
	run, err := b.driftObserve(ctx)
	if err != nil {
		return err
	}
	if err := run.dump(filepath.Join(b.e.dir, "drift-run.json")); err != nil {
		fmt.Fprintf(b.log, "drift: saving the observations: %v\n", err)
	}
	b.driftReport(run)
	return nil
}

// dump writes the run's observations as JSON (kept with -keep), so the
// figures can be worked out again from them.
func (run *driftRun) dump(file string) error {
	type obj struct {
		Key, UID     string
		Applied, Due time.Time
	}
	type job struct {
		Key, Name, Action                 string
		Created, Seen, Finished, Recorded time.Time
	}
	type sample struct {
		At       time.Time
		Requests map[string]float64
	}
	out := struct {
		Objects, Interval, MaxActiveJobs int
		Started, AllApplied, End         time.Time
		Objs                             []obj
		Jobs                             []job
		Samples                          []sample
	}{Objects: run.n, Interval: int(run.interval.Seconds()), MaxActiveJobs: run.capJobs, Started: run.started, AllApplied: run.allApplied, End: run.end}
	for _, o := range run.objs {
		out.Objs = append(out.Objs, obj{o.key, o.uid, o.applied, o.due})
	}
	for _, j := range run.jobs {
		out.Jobs = append(out.Jobs, job{j.key, j.name, string(j.action), j.created, j.seen, j.finished, j.recorded})
	}
	for _, s := range run.samples {
		out.Samples = append(out.Samples, sample{s.at, s.reqs})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}

// driftRun is what one drift scenario observed.
type driftRun struct {
	n, capJobs, paused       int
	interval                 time.Duration
	started, allApplied, end time.Time
	capped                   bool
	objs                     []driftObject
	jobs                     []driftJob
	samples                  []reqSample
	checked, maxOpen, noDoc  int
	podErr                   error
	errs                     []error
}

// driftObserve builds the scenario, waits until every cluster applied and
// the manager is idle, then samples the manager's requests until the
// window's end.
func (b *bench) driftObserve(ctx context.Context) (*driftRun, error) {
	run := &driftRun{n: b.cfg.DriftObjects, interval: b.cfg.DriftInterval, capJobs: mgr.NewOptions().MaxActiveJobs}
	if b.e.mgr != nil {
		b.e.mgr.Terminate()
		b.e.mgr = nil
	}
	var err error
	if run.paused, err = b.pauseRan(ctx); err != nil {
		return nil, fmt.Errorf("pausing the objects of earlier scenarios: %w", err)
	}
	keys, err := b.createDriftClusters(ctx, run.n)
	if err != nil {
		return nil, err
	}
	st := newDriftState()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := b.watchJobs(wctx, st); err != nil {
		return nil, err
	}
	reg, err := b.t.clusters.AddEventHandler(st.recorder())
	if err != nil {
		return nil, err
	}
	defer func() { _ = b.t.clusters.RemoveEventHandler(reg) }()

	run.started = time.Now()
	if _, err := b.e.startManager(ctx, "drift", "--drift-default-interval="+run.interval.String(), fmt.Sprintf("--max-active-jobs=%d", run.capJobs),
		"--sync-period="+b.cfg.DriftSyncPeriod.String()); err != nil {
		return nil, err
	}
	run.allApplied, err = waitFor(ctx, "every cluster applied", b.cfg.Timeout, 200*time.Millisecond, func() (bool, string) {
		done := 0
		for _, k := range keys {
			if c := b.cachedCluster(k); c != nil && c.Status.LastApply != nil && c.Status.LastApply.Outcome == v1alpha1.RunSucceeded {
				done++
			}
		}
		return done == run.n, fmt.Sprintf("%d of %d applied", done, run.n)
	})
	if err != nil {
		b.res.fail("drift: %v", err)
		return nil, err
	}
	first, opened, err := b.e.waitIdle(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		c := b.cachedCluster(k)
		run.objs = append(run.objs, newDriftObject(k, string(c.UID), c.Status.LastApply.FinishTime.Time, run.interval))
	}
	run.end, run.capped = driftWindowEnd(run.objs, run.interval)
	st.resetOpen()
	fmt.Fprintf(b.log, "every cluster applied %s after the manager's start; watching until %s (%s from now)\n",
		run.allApplied.Sub(run.started).Round(time.Millisecond), run.end.Format(time.TimeOnly), time.Until(run.end).Round(time.Second))
	if run.samples, err = b.sampleRequests(ctx, first, opened, run.end, st); err != nil {
		return nil, err
	}
	cancel()
	run.jobs = st.snapshot()
	if run.checked, err = b.driftChecked(ctx, keys); err != nil {
		return nil, err
	}
	st.mu.Lock()
	run.maxOpen, run.noDoc, run.podErr, run.errs = st.maxOpen, st.noDoc, st.podErr, st.errs
	st.mu.Unlock()
	return run, nil
}

// driftReport adds the scenario's rows, checks and notes.
func (b *bench) driftReport(run *driftRun) {
	const sc = "drift"
	counts := countDrift(run.objs, run.jobs, run.end, time.Second)
	spans := driftSpans(run.objs, run.jobs, run.end, driftSettle)
	a := attribute(run.samples, spans)
	lastApply := run.objs[0].applied
	for _, o := range run.objs {
		if o.applied.After(lastApply) {
			lastApply = o.applied
		}
	}
	r, n := b.res, run.n
	r.add(sc, fmt.Sprintf("%d clusters due at once, --max-active-jobs=%d: manager start -> every cluster applied", n, run.capJobs), run.allApplied.Sub(run.started).Seconds(), unitSeconds)
	r.add(sc, fmt.Sprintf("--drift-default-interval=%s: drift Jobs from the manager's start to %s after the last apply (baseline: one per cluster)", run.interval, run.end.Sub(lastApply).Round(time.Second)), float64(counts.total), unitCount).vs(float64(n))
	r.add(sc, "clusters with more than one drift Job (must be 0)", float64(len(counts.more)), unitCount)
	r.add(sc, "clusters due in the window without a drift Job (must be 0)", float64(len(counts.none)), unitCount)
	r.add(sc, "drift Jobs created before their cluster was due (must be 0)", float64(len(counts.early)), unitCount)
	if len(counts.delays) > 0 {
		r.add(sc, "due -> drift Job created, p50", percentile(counts.delays, 0.5), unitSeconds)
		r.add(sc, "due -> drift Job created, max", counts.delays[len(counts.delays)-1], unitSeconds)
	}
	r.add(sc, fmt.Sprintf("most drift Jobs unfinished at once (Background: held back from %d, 80%% of the cap)", run.capJobs*80/100), float64(run.maxOpen), unitCount)
	r.add(sc, "drift checks recorded from the runner's document (DriftDetected=False/NoDrift)", float64(run.checked), unitCount).vs(float64(n))
	during, between := sumCounts(writeCounts(a.during)), sumCounts(writeCounts(a.between))
	r.add(sc, "manager writes while a check was due or being recorded", during, unitCount)
	if counts.total > 0 {
		r.add(sc, "manager writes per drift Job", during/float64(counts.total), unitCount)
		r.add(sc, "manager API requests per drift Job", sumCounts(a.during)/float64(counts.total), unitCount)
	}
	r.add(sc, "time in the window with no check due or being recorded", a.betweenTime.Seconds(), unitSeconds)
	r.add(sc, "manager writes in that time (must be 0)", between, unitCount)
	r.add(sc, "manager API requests in that time", sumCounts(a.between), unitCount)
	b.driftReadRows(run, spans)
	r.Requests = append(r.Requests,
		requestTable{Scenario: sc, What: fmt.Sprintf("while drift checks were due or being recorded (%d drift Jobs)", counts.total), Requests: a.during},
		requestTable{Scenario: sc, What: fmt.Sprintf("between drift checks (%s)", a.betweenTime.Round(time.Second)), Requests: a.between})
	b.driftChecks(run, counts, a, between)
}

// driftChecks records the scenario's failures and notes.
func (b *bench) driftChecks(run *driftRun, counts driftCount, a attribution, between float64) {
	r := b.res
	if len(counts.more) > 0 {
		r.fail("drift: %d clusters got more than one drift Job within one interval (O7: at most the Jobs the interval implies): %s", len(counts.more), joinLimited(counts.more, 5))
	}
	if len(counts.none) > 0 {
		r.fail("drift: %d clusters were due in the window and got no drift Job: %s", len(counts.none), joinLimited(counts.none, 5))
	}
	if len(counts.early) > 0 {
		r.fail("drift: %d drift Jobs started before the interval (O7): %s", len(counts.early), joinLimited(counts.early, 5))
	}
	if between > 0 {
		r.fail("drift: the manager wrote %.0f times while no drift check was due (O7: no writes between checks): %s", between, joinLimited(a.betweenWrites, 5))
	}
	for _, err := range run.errs {
		r.fail("drift: %v", err)
	}
	if run.capped {
		r.note("drift: the window was cut at %s after the first apply, before a second check could be due: the applies spread over more than the slack allows", run.end.Sub(run.objs[0].applied).Round(time.Second))
	}
	if counts.notDue > 0 {
		r.note("drift: %d clusters were due too close to the window's end to require a drift Job", counts.notDue)
	}
	if run.noDoc > 0 {
		r.note("drift: %d drift Jobs ended without a result document, so the manager recorded them as failed checks (DriftDetected=Unknown/DriftNotChecked); the first pod error: %v", run.noDoc, run.podErr)
	}
	if counts.others > 0 {
		r.note("drift: %d drift Jobs of objects from earlier scenarios fell in the window", counts.others)
	}
	if run.paused > 0 {
		r.note("drift: %d workload objects of earlier scenarios that ran Jobs were paused (%s) so their drift checks stay out of the window", run.paused, v1alpha1.AnnotationPaused)
	}
}

// cachedCluster returns the tracker's copy of a cluster, nil if absent.
func (b *bench) cachedCluster(key string) *v1alpha1.TerraformCluster {
	o, ok, _ := b.t.clusters.GetStore().GetByKey(key)
	if !ok {
		return nil
	}
	c, _ := o.(*v1alpha1.TerraformCluster)
	return c
}

// sampleRequests scrapes the manager's request counters every second
// from opened (the idle scrape first, taken at opened) until end, and
// logs progress every minute.
func (b *bench) sampleRequests(ctx context.Context, first faultkit.Metrics, opened, end time.Time, st *driftState) ([]reqSample, error) {
	samples := []reqSample{{at: opened, reqs: first.Requests(), reads: first.Sum("captf_source_reads_total", nil)}}
	lastLog := time.Now()
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		m, err := b.e.mgr.metrics(ctx)
		if err != nil {
			return nil, err
		}
		samples = append(samples, reqSample{at: time.Now(), reqs: m.Requests(), reads: m.Sum("captf_source_reads_total", nil)})
		if time.Since(lastLog) >= time.Minute {
			lastLog = time.Now()
			drift := 0
			for _, j := range st.snapshot() {
				if j.action == v1alpha1.JobActionDrift {
					drift++
				}
			}
			w := writeCounts(samples[len(samples)-1].reqs)
			for k, v := range writeCounts(samples[0].reqs) {
				w[k] -= v
			}
			fmt.Fprintf(b.log, "drift: %s to go: %d drift Jobs so far, manager writes since idle: %s\n",
				time.Until(end).Round(time.Second), drift, faultkit.FormatCounts(nonZero(w)))
		}
	}
	return samples, nil
}

func nonZero(c map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range c {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// driftChecked counts, from a fresh LIST, the clusters whose newest check
// read the runner's document and found no drift.
func (b *bench) driftChecked(ctx context.Context, keys []string) (int, error) {
	list, err := b.e.captf.InfrastructureV1alpha1().TerraformClusters("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	mine := map[string]bool{}
	for _, k := range keys {
		mine[k] = true
	}
	n := 0
	for i := range list.Items {
		c := &list.Items[i]
		cond := meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionDriftDetected))
		if mine[c.Namespace+"/"+c.Name] && c.Status.LastDriftCheck != nil && cond != nil &&
			cond.Status == metav1.ConditionFalse && cond.Reason == string(v1alpha1.ReasonNoDrift) {
			n++
		}
	}
	return n, nil
}
