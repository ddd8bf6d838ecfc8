package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// jobsIdentity is the jobs scenario's identity.
const jobsIdentity = "bench-jobs"

// jobsWatch follows every manager-made Job through one cluster-wide
// watch: when each was created, the most unfinished at once, and the
// Jobs waiting for the finisher.
type jobsWatch struct {
	mu      sync.Mutex
	open    map[string]bool // namespace/name of unfinished Jobs
	maxOpen int
	created []time.Time // arrival of each ADDED event
	err     error
}

func (w *jobsWatch) run(ctx context.Context, b *bench, finish chan<- *batchv1.Job) error {
	sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=true"}
	l, err := b.e.kube.BatchV1().Jobs("").List(ctx, sel)
	if err != nil {
		return err
	}
	sel.ResourceVersion = l.ResourceVersion
	wi, err := b.e.kube.BatchV1().Jobs("").Watch(ctx, sel)
	if err != nil {
		return err
	}
	go func() {
		defer wi.Stop()
		defer close(finish)
		for ev := range wi.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			w.mu.Lock()
			switch {
			case ev.Type == watch.Error || !ok:
				w.err = fmt.Errorf("job watch: %v", ev.Object)
			case ev.Type == watch.Deleted:
				delete(w.open, j.Namespace+"/"+j.Name)
			case jobs.Finished(j):
				delete(w.open, j.Namespace+"/"+j.Name)
			case ev.Type == watch.Added:
				w.created = append(w.created, time.Now())
				w.open[j.Namespace+"/"+j.Name] = true
			}
			w.maxOpen = max(w.maxOpen, len(w.open))
			w.mu.Unlock()
			if ev.Type == watch.Added && ok && !jobs.Finished(j) {
				select {
				case finish <- j:
				case <-ctx.Done():
					return
				}
			}
		}
		w.mu.Lock()
		if ctx.Err() == nil && w.err == nil {
			w.err = fmt.Errorf("the Job watch ended early")
		}
		w.mu.Unlock()
	}()
	return nil
}

// finisher completes each Job hold after it was created, as the Job
// controller would when its pod succeeds (there is no node here).
func (b *bench) finisher(ctx context.Context, in <-chan *batchv1.Job, hold time.Duration, errs chan<- error) {
	var wg sync.WaitGroup
	for j := range in {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-time.After(hold):
			case <-ctx.Done():
				return
			}
			if err := b.e.fw.FinishJob(ctx, j.Namespace, j.Name, ""); err != nil && ctx.Err() == nil {
				select {
				case errs <- fmt.Errorf("finishing Job %s/%s: %w", j.Namespace, j.Name, err):
				default:
				}
			}
		}()
	}
	wg.Wait()
}

// jobs measures O4's herd: -job-objects standalone clusters with a module
// are created while no manager runs, so all are due at once when a manager
// with --max-active-jobs=-job-cap starts. A finisher completes each Job
// -job-hold after it appears. Figures: Jobs started per second, time until
// every cluster has applied beside the ideal that the cap and the hold
// imply, the most Jobs unfinished at once (a check: never above the cap),
// and then one --sync-period pass, which must write nothing.
func (b *bench) jobs(ctx context.Context) error {
	const sc = "jobs"
	n, capJobs, hold := b.cfg.JobObjects, b.cfg.JobCap, b.cfg.JobHold
	if b.e.mgr != nil {
		b.e.mgr.Terminate()
		b.e.mgr = nil
	}
	nss := make([]string, b.cfg.JobNamespaces)
	for i := range nss {
		nss[i] = fmt.Sprintf("bench-jobs-%03d", i)
	}
	if err := b.createNamespaces(ctx, nss, nil); err != nil {
		return err
	}
	if err := b.createSource(ctx, jobsIdentity, credentialData()); err != nil {
		return err
	}
	if err := b.createIdentity(ctx, jobsIdentity, jobsIdentity, &v1alpha1.AllowedNamespaces{List: nss}); err != nil {
		return err
	}
	keys, err := b.createClusters(ctx, nss, n, "c", jobsIdentity, "example.com/bench-module:1")
	if err != nil {
		return err
	}
	fmt.Fprintf(b.log, "created %d clusters with a module in %d namespaces, no manager running\n", n, len(nss))

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := &jobsWatch{open: map[string]bool{}}
	toFinish := make(chan *batchv1.Job, n)
	finishErrs := make(chan error, 1)
	if err := w.run(wctx, b, toFinish); err != nil {
		return err
	}
	go b.finisher(wctx, toFinish, hold, finishErrs)

	p := b.steadyPeriod()
	started := time.Now()
	if _, err := b.e.startManager(ctx, "jobs", fmt.Sprintf("--max-active-jobs=%d", capJobs),
		"--sync-period="+p.String(), "--identity-resync="+b.cfg.LongPeriod.String()); err != nil {
		return err
	}
	applied := func() (bool, string) {
		done := 0
		for _, k := range keys {
			ns, name, _ := strings.Cut(k, "/")
			if s := b.t.status(kindCluster, ns, name); s != nil && meta.IsStatusConditionTrue(s.Conditions, string(v1alpha1.ConditionApplyJobSucceeded)) {
				done++
			}
		}
		select {
		case err := <-finishErrs:
			b.res.fail("jobs: %v", err)
		default:
		}
		return done == n, fmt.Sprintf("%d of %d applied", done, n)
	}
	allDone, err := waitFor(ctx, "every cluster applied", b.cfg.Timeout, 100*time.Millisecond, applied)
	if err != nil {
		b.res.fail("jobs: %v", err)
		return err
	}
	herd, err := b.e.mgr.metrics(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	created, maxOpen, werr := append([]time.Time(nil), w.created...), w.maxOpen, w.err
	w.mu.Unlock()
	if werr != nil {
		return werr
	}
	sort.Slice(created, func(i, j int) bool { return created[i].Before(created[j]) })
	if len(created) != n {
		b.res.fail("jobs: %d Jobs created for %d clusters due once each", len(created), n)
	}
	if maxOpen > capJobs {
		b.res.fail("jobs: %d Jobs unfinished at once under --max-active-jobs=%d (O4)", maxOpen, capJobs)
	}
	ideal := math.Ceil(float64(n)/float64(capJobs)) * hold.Seconds()
	r := b.res
	r.add(sc, fmt.Sprintf("%d clusters due at once, --max-active-jobs=%d, each Job %s: Jobs created", n, capJobs, hold), float64(len(created)), unitCount).vs(float64(n))
	if len(created) > 0 {
		r.add(sc, "manager start -> first Job", created[0].Sub(started).Seconds(), unitSeconds)
		if span := created[len(created)-1].Sub(created[0]).Seconds(); span > 0 {
			r.add(sc, "Jobs started per second (first -> last Job)", float64(len(created)-1)/span, unitCount).vs(float64(capJobs) / hold.Seconds())
		}
	}
	r.add(sc, "manager start -> every cluster applied (baseline: the cap and the hold alone)", allDone.Sub(started).Seconds(), unitSeconds).vs(ideal)
	r.add(sc, "manager API requests until every cluster applied, per cluster", herd.TotalRequests()/float64(n), unitPer)
	r.requests(sc, fmt.Sprintf("from the manager's start until %d clusters applied", n), herd)
	r.add(sc, fmt.Sprintf("most Jobs unfinished at once (must be <= %d)", capJobs), float64(maxOpen), unitCount)
	cancel()

	d, _, _, err := b.onePass(ctx, "resync tick (--sync-period="+p.String()+")", p, workloadAdds)
	if err != nil {
		return err
	}
	writes := writesOf(d)
	r.add(sc, "writes in the next --sync-period pass (must be 0)", writes, unitCount)
	r.requests(sc, "one resync pass after the herd", d)
	if writes > 0 {
		b.res.fail("jobs: the pass after every cluster applied wrote %.0f times (%s)", writes, faultkit.FormatCounts(d.Requests()))
	}
	return nil
}

// createClusters creates n standalone TerraformClusters of identity and
// image, <prefix><5 digits>, spread over the namespaces nss, and returns
// their namespace/name keys in order.
func (b *bench) createClusters(ctx context.Context, nss []string, n int, prefix, identity, image string) ([]string, error) {
	keys := make([]string, n)
	err := parallel(ctx, n, b.cfg.CreateWorkers, func(ctx context.Context, i int) error {
		ns, name := nss[i%len(nss)], fmt.Sprintf("%s%05d", prefix, i)
		keys[i] = ns + "/" + name
		c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: standalone()},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identity},
				Source: v1alpha1.SourceSpec{Image: image}}}
		_, err := b.e.captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(ctx, c, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating clusters: %w", err)
	}
	return keys, nil
}
