package jobcaps

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// restartObjects is how many clusters wait behind the cap when the
// manager restarts.
const restartObjects = 20

// TestO4RestartStartsNoExtraJob covers O4's "correct across a restart":
// with 5 Jobs running under --max-active-jobs=5 and 15 clusters waiting
// for a slot, the manager is killed and a new one starts. The new one
// counts the running Jobs from its Job cache before it starts any: until
// it is idle it creates no Job (every state of the Job list, from a
// watch), the waiting clusters still say WaitingForJobSlot, and when two
// Jobs finish exactly two more start.
func TestO4RestartStartsNoExtraJob(t *testing.T) {
	f := ownManager(t)
	ns := f.Env.CreateNamespace(t, "capsrestart", nil)
	id := f.Identity(f.Source(framework.DefaultData("o4-restart-secret")), framework.List(ns))

	w := &jobWatch{open: map[string]*batchv1.Job{}}
	ctx, cancel := context.WithCancel(f.Ctx)
	defer cancel()
	w.run(ctx, f, ns)
	for i := range restartObjects {
		f.Cluster(ns, fmt.Sprintf("r%02d", i), id)
	}
	waiting := func() int {
		l, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).List(f.Ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i := range l.Items {
			if c := condition(&l.Items[i]); c != nil && c.Reason == string(v1alpha1.ReasonWaitingForJobSlot) && c.Status == metav1.ConditionUnknown {
				n++
			}
		}
		return n
	}
	f.WaitFor("5 Jobs running, 15 clusters waiting", func() (bool, string) {
		w.check(t)
		open, created := w.snapshot()
		n := waiting()
		return len(open) == maxActive && n == restartObjects-maxActive, fmt.Sprintf("%d unfinished, %d created, %d waiting", len(open), created, n)
	})

	// A crash, not a graceful stop: nothing the old manager does on its
	// way out helps the new one.
	f.Manager.Kill()
	if err := f.Manager.Wait(); err == nil {
		t.Fatal("the killed manager exited cleanly")
	}
	f.Manager = f.Env.StartManager(t, capsOptions)
	f.WaitManagerQuiet(3 * time.Second)
	w.check(t)
	open, created := w.snapshot()
	if created != maxActive || len(open) != maxActive {
		t.Fatalf("O4: after the restart %d Jobs were created in all and %d are unfinished; want %d and %d", created, len(open), maxActive, maxActive)
	}
	if n := waiting(); n != restartObjects-maxActive {
		t.Fatalf("O4: after the restart %d clusters wait for a slot, want %d", n, restartObjects-maxActive)
	}

	// The new manager's slots are right: two finished, two started.
	for _, j := range open[:2] {
		if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitFor("two more Jobs", func() (bool, string) {
		w.check(t)
		o, c := w.snapshot()
		return c == maxActive+2 && len(o) == maxActive, fmt.Sprintf("%d created, %d unfinished", c, len(o))
	})
	f.WaitManagerQuiet(3 * time.Second)
	w.check(t)
	if o, c := w.snapshot(); c != maxActive+2 || len(o) != maxActive {
		t.Fatalf("O4: after two Jobs finished, %d were created in all and %d are unfinished; want %d and %d", c, len(o), maxActive+2, maxActive)
	}
	t.Logf("O4 restart: %d Jobs created before and after the restart, at most %d unfinished at once", maxActive+2, w.maxOpen)
}
