package jobcaps

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

const (
	maxActive = 5
	objects   = 50
)

// jobWatch follows every Job of a namespace through a watch, so each
// state the API server went through is seen, not a sample of them: after
// each event it counts the Jobs that have not finished and keeps the
// largest count, and it records the order Jobs were created in.
type jobWatch struct {
	mu       sync.Mutex
	open     map[string]*batchv1.Job // unfinished Jobs by name
	maxOpen  int
	created  []*batchv1.Job // in the order of their ADDED events
	events   int
	watchErr error
}

func (w *jobWatch) run(ctx context.Context, f *framework.Fixture, ns string) {
	sel := metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=true"}
	l, err := f.Env.Kube.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		f.T.Fatal(err)
	}
	if len(l.Items) != 0 {
		f.T.Fatalf("the namespace is new, yet it has %d Jobs", len(l.Items))
	}
	sel.ResourceVersion = l.ResourceVersion
	wi, err := f.Env.Kube.BatchV1().Jobs(ns).Watch(ctx, sel)
	if err != nil {
		f.T.Fatal(err)
	}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			w.mu.Lock()
			j, ok := ev.Object.(*batchv1.Job)
			switch {
			case ev.Type == watch.Error || !ok:
				if ctx.Err() == nil {
					w.watchErr = fmt.Errorf("watch: %v", ev.Object)
				}
			case ev.Type == watch.Added:
				w.created = append(w.created, j)
				fallthrough
			case ev.Type == watch.Modified:
				if jobs.Finished(j) {
					delete(w.open, j.Name)
				} else {
					w.open[j.Name] = j
				}
			case ev.Type == watch.Deleted:
				delete(w.open, j.Name)
			}
			w.events++
			w.maxOpen = max(w.maxOpen, len(w.open))
			w.mu.Unlock()
		}
		w.mu.Lock()
		if ctx.Err() == nil && w.watchErr == nil {
			w.watchErr = fmt.Errorf("the Job watch ended early")
		}
		w.mu.Unlock()
	}()
}

// snapshot returns the unfinished Jobs and the number of Jobs created.
func (w *jobWatch) snapshot() (open []*batchv1.Job, created int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, j := range w.open {
		open = append(open, j)
	}
	return open, len(w.created)
}

func (w *jobWatch) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watchErr != nil {
		t.Fatal(w.watchErr)
	}
	if w.maxOpen > maxActive {
		t.Fatalf("O4: %d Jobs were unfinished at once; --max-active-jobs=%d", w.maxOpen, maxActive)
	}
}

// capsOptions run a manager with --max-active-jobs=5.
var capsOptions = framework.ManagerOptions{User: controlplane.Manager, Args: []string{
	fmt.Sprintf("--max-active-jobs=%d", maxActive), "--workers=4",
}}

// ownManager returns a fixture with a manager of its own, stopped when the
// test ends: the package's tests must not see two managers act at once,
// and TestO4RestartStartsNoExtraJob restarts its manager.
func ownManager(t *testing.T) *framework.Fixture {
	e := framework.Get(t)
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: e.StartManager(t, capsOptions), Settle: 90 * time.Second}
}

func condition(c *v1alpha1.TerraformCluster) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
}

// TestO4MaxActiveJobs: 50 standalone clusters become due at once under
// --max-active-jobs=5. At no point do more than 5 Jobs run (every state
// of the Job list, from a watch); the others wait with WaitingForJobSlot;
// each finished Job lets the next one start with no resync to help (the
// sync period is the default 10m); midway a deleted cluster's destroy
// takes the next free slot ahead of the 20-odd applies that waited
// longer; in the end all 50 have applied.
func TestO4MaxActiveJobs(t *testing.T) {
	began := time.Now()
	f := ownManager(t)
	ns := f.Env.CreateNamespace(t, "caps", nil)
	id := f.Identity(f.Source(framework.DefaultData("o4-secret")), framework.List(ns))

	w := &jobWatch{open: map[string]*batchv1.Job{}}
	ctx, cancel := context.WithCancel(f.Ctx)
	defer cancel()
	w.run(ctx, f, ns)

	var names []string
	for i := range objects {
		names = append(names, f.Cluster(ns, fmt.Sprintf("c%02d", i), id).Name)
	}
	ownerOf := func(j *batchv1.Job) string {
		if ref := metav1.GetControllerOf(j); ref != nil {
			return ref.Name
		}
		return ""
	}
	// saturated waits until maxActive Jobs are unfinished and the Job
	// list is quiet: the cap is reached, the rest wait.
	saturated := func(what string) []*batchv1.Job {
		t.Helper()
		var open []*batchv1.Job
		f.WaitFor(what, func() (bool, string) {
			w.check(t)
			open, _ = w.snapshot()
			return len(open) == maxActive, fmt.Sprintf("%d unfinished Jobs", len(open))
		})
		return open
	}
	applied := map[string]bool{}
	finished := 0
	finish := func(j *batchv1.Job) {
		t.Helper()
		finished++
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
		if jobs.ActionOf(j) == v1alpha1.JobActionApply {
			applied[ownerOf(j)] = true
		}
	}

	// The first wave: exactly the cap starts; the others say why they wait.
	open := saturated("the first 5 Jobs")
	f.WaitFor("45 clusters waiting for a slot", func() (bool, string) {
		l, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).List(f.Ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for i := range l.Items {
			if c := condition(&l.Items[i]); c != nil && c.Reason == string(v1alpha1.ReasonWaitingForJobSlot) && c.Status == metav1.ConditionUnknown {
				n++
			}
		}
		return n == objects-maxActive, fmt.Sprintf("%d waiting", n)
	})
	if _, created := w.snapshot(); created != maxActive {
		t.Fatalf("O4: %d Jobs created under --max-active-jobs=%d", created, maxActive)
	}

	// Finish Jobs a few at a time; each freed slot starts the next.
	var victim string
	destroyChecked := false
	for len(applied) < objects {
		if victim == "" && len(applied) >= 20 {
			// Midway, with 5 applies running and about 25 waiting: delete an
			// applied cluster. Its destroy waits too, then takes the first
			// slot that frees, though every apply waited longer.
			for n := range applied {
				victim = n
				break
			}
			f.WaitCondition("applied "+victim, f.ClusterConds(ns, victim), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
			if err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Delete(f.Ctx, victim, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			c := f.WaitCondition("destroy of "+victim+" waiting", f.ClusterConds(ns, victim), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForJobSlot)
			t.Logf("%s: %s", victim, c.Message)
			_, before := w.snapshot()
			finish(open[0])
			f.WaitFor("the next Job", func() (bool, string) {
				w.check(t)
				_, created := w.snapshot()
				return created > before, "none yet"
			})
			w.mu.Lock()
			next := w.created[before]
			w.mu.Unlock()
			if ownerOf(next) != victim || jobs.ActionOf(next) != v1alpha1.JobActionDestroy {
				t.Fatalf("O4: the slot went to %s's %s Job, not to %s's destroy", ownerOf(next), jobs.ActionOf(next), victim)
			}
			open = saturated("the destroy running with 4 applies")
			finish(next)
			f.WaitFor(victim+" gone", func() (bool, string) {
				_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Get(f.Ctx, victim, metav1.GetOptions{})
				return err != nil, "still there"
			})
			destroyChecked = true
			open = saturated("5 applies after the destroy")
			continue
		}
		// Finish two of the five, so the manager always has Jobs running
		// while it starts others; the freed slots are taken at once.
		for _, j := range open[:min(2, len(open))] {
			finish(j)
		}
		total := objects // Jobs that will ever exist: the applies and the destroy
		if victim != "" {
			total++
		}
		want := min(maxActive, total-finished)
		f.WaitFor("the freed slots taken", func() (bool, string) {
			w.check(t)
			o, c := w.snapshot()
			open = o
			return len(o) == want, fmt.Sprintf("%d unfinished (want %d), %d created", len(o), want, c)
		})
	}
	if !destroyChecked {
		t.Fatal("the destroy was never checked")
	}
	for _, n := range names {
		if n == victim {
			continue
		}
		f.WaitCondition("applied "+n, f.ClusterConds(ns, n), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	}
	w.check(t)
	w.mu.Lock()
	t.Logf("O4: %d Jobs created, at most %d unfinished at once over %d watch events; took %s", len(w.created), w.maxOpen, w.events, time.Since(began).Round(time.Second))
	if w.maxOpen != maxActive {
		t.Errorf("the cap was never reached: at most %d Jobs at once", w.maxOpen)
	}
	w.mu.Unlock()
}
