package faultscp

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestLeaderFailover is fault 4: two managers share a Lease; the leader is
// SIGKILLed just after n objects were created (work pending). The other
// takes over within the lease duration plus slack, and every object
// converges with exactly one apply Job and every status write made. Then,
// with a third manager standing by, the new leader is stopped gracefully
// (SIGTERM) while a rotation and deletions are pending: it releases the
// Lease on its way out, so the standby takes over in about a retry period
// instead of a lease duration, and finishes the work.
func TestLeaderFailover(t *testing.T) {
	e := framework.Get(t)
	preserveLogs(t, e)
	ctx := framework.Context(t)
	const (
		leaseDuration = 15 * time.Second
		retryPeriod   = 2 * time.Second
		// slack is generous: a loaded 2-core machine delays processes by
		// seconds.
		slack = 30 * time.Second
	)
	leaseNS := "captf-system" // manifests/rbac lets the manager use Leases there
	lease := framework.Name("faults-le")
	args := []string{"--leader-elect=true", "--leader-election-namespace=" + leaseNS, "--leader-election-id=" + lease,
		"--leader-election-lease-duration=" + leaseDuration.String(), "--leader-election-renew-deadline=10s",
		"--leader-election-retry-period=" + retryPeriod.String(),
		"--sync-period=1m", "--identity-resync=5s", "--workers=4"}
	n := size(30, 100)
	rec := e.RecordJobs(t, nil)

	a := startManager(t, e, args...)
	b := startManager(t, e, args...)
	var leader, standby *framework.Manager
	framework.Eventually(t, time.Minute, func() (bool, string) {
		switch {
		case leaderIdentity(a) != "":
			leader, standby = a, b
		case leaderIdentity(b) != "":
			leader, standby = b, a
		}
		return leader != nil, "no manager says it acquired leadership"
	})
	if leaderIdentity(standby) != "" {
		t.Fatalf("both managers say they acquired leadership")
	}
	holder := func() string {
		l, err := e.Kube.CoordinationV1().Leases(leaseNS).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	if h := holder(); h != leaderIdentity(leader) {
		t.Fatalf("the Lease holder is %q, the leader's log says %q", h, leaderIdentity(leader))
	}

	f := fixture(t, e, leader)
	d1 := sourceData(31)
	h1 := hashOf(d1)
	ref := f.Source(d1)
	labels := map[string]string{"faults.captf.io/leader": framework.Name("f4")}
	nss := createNamespaces(t, e, "le", max(1, n/3), labels)
	identity := framework.Name("failover")
	createIdentity(t, e, identity, ref, selectorOf(labels))
	var c *framework.Manager // the third manager, started later
	managers := []*framework.Manager{nil, b, a}
	cleanUp(t, e, &managers, &nss, identity)

	// Work pending: n objects, and the leader killed at once.
	objs := make([]object, n)
	if err := framework.Parallel(n, 8, func(i int) error {
		var err error
		objs[i], err = createCluster(ctx, e, nss[i%len(nss)], fmt.Sprintf("c%03d", i), identity)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	leader.Kill()
	killed := time.Now()
	pending := 0
	for _, o := range objs {
		if len(rec.Of(o.UID, v1alpha1.JobActionApply)) == 0 {
			pending++
		}
	}
	t.Logf("SIGKILLed the leader just after creating %d objects; %d of them had no apply Job yet", n, pending)
	takeover := waitTakeover(t, e, standby, leaseNS, lease, killed, leaseDuration+retryPeriod+slack)
	t.Logf("fault 4: the standby took over %s after the leader was SIGKILLed (lease duration %s, retry period %s)",
		takeover.Round(10*time.Millisecond), leaseDuration, retryPeriod)
	if takeover > leaseDuration+retryPeriod+slack {
		t.Errorf("takeover took %s, more than the lease duration %s plus slack", takeover, leaseDuration)
	}
	newLeader := standby

	// No lost writes: every object converges, with exactly one apply Job,
	// and once the Jobs end every status says so.
	took := waitConverged(t, e, newLeader, rec, identity, h1, nss, objs)
	finishApplyJobs(t, e, rec, objs)
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "applied", func(s *snapshot) (bool, string) {
		return s.conditionAll(v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	})
	t.Logf("fault 4: converged %s after the takeover; %s", took, writesReport(newLeader, n))
	requireOneJobEach(t, e, rec, objs, map[types.UID]int{})

	// A graceful stop with a third manager standing by, while a rotation
	// and deletions are pending.
	c = startManager(t, e, args...)
	managers[0] = c
	if leaderIdentity(c) != "" {
		t.Fatalf("the third manager acquired leadership while another leads")
	}
	var (
		mu        sync.Mutex
		finishing = map[types.UID]bool{}
	)
	deleted := objs[:n/3]
	wantDestroy := map[types.UID]int{}
	for _, o := range deleted {
		wantDestroy[o.UID] = 1
	}
	finishCtx, stopFinishing := context.WithCancel(ctx)
	defer stopFinishing()
	var finishers sync.WaitGroup
	defer finishers.Wait()
	e.RecordJobs(t, func(j framework.JobRecord) {
		if j.Action != v1alpha1.JobActionDestroy || wantDestroy[j.Owner] == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if finishing[j.Owner] {
			return
		}
		finishing[j.Owner] = true
		finishers.Go(func() {
			for attempt := 0; attempt < 30 && finishCtx.Err() == nil; attempt++ {
				if err := e.FinishJob(finishCtx, j.Namespace, j.Name, ""); err == nil {
					return
				}
				time.Sleep(time.Second)
			}
		})
	})
	d2 := sourceData(32)
	h2 := hashOf(d2)
	f.SetSource(ref, d2)
	for _, o := range deleted {
		if err := deleteObject(ctx, e, o); err != nil {
			t.Fatal(err)
		}
	}
	oldHolder := leaderIdentity(newLeader)
	stopping := time.Now()
	newLeader.Stop(t)
	exited := time.Now()
	if err := newLeader.Wait(); err != nil {
		t.Errorf("the leader did not exit cleanly on SIGTERM: %v", err)
	}
	if !strings.Contains(newLeader.Log(), "Released the leader Lease") {
		t.Errorf("the leader did not log releasing the Lease on SIGTERM")
	}
	if h := holder(); h == oldHolder {
		t.Errorf("the Lease still names the stopped leader %q: it was not released", h)
	}
	graceful := waitTakeover(t, e, c, leaseNS, lease, exited, leaseDuration+retryPeriod+slack)
	t.Logf("fault 4: graceful stop took %s (SIGTERM to exit, controllers drained, Lease released); the standby took over %s after the exit, %s after the SIGTERM",
		exited.Sub(stopping).Round(10*time.Millisecond), graceful.Round(10*time.Millisecond), time.Since(stopping).Round(10*time.Millisecond))
	if graceful >= 10*time.Second {
		t.Errorf("takeover after a graceful stop took %s: a released Lease is taken within a retry period (%s), an unreleased one only after the lease duration (%s)",
			graceful, retryPeriod, leaseDuration)
	}

	// The new leader finishes the pending work: deleted objects destroyed
	// once each, the rest rotated with their owner references.
	remaining := objs[n/3:]
	took = waitConverged(t, e, c, rec, identity, h2, nss, remaining)
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "deletions", func(s *snapshot) (bool, string) {
		left := 0
		for _, o := range deleted {
			if _, ok := s.objects[o.UID]; ok {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d of %d deleted objects still there", left, len(deleted))
	})
	t.Logf("fault 4: after the graceful handover the rotation and %d deletions completed %s after the takeover; %s", len(deleted), took, writesReport(c, n))
	stopFinishing()
	requireOneJobEach(t, e, rec, objs, wantDestroy)
	requireAlive(t, c, "at the end")
}

// waitTakeover polls (every 50ms, so the figure is not inflated by the
// polling) until m's log says it acquired the Lease, and returns the time
// from since to the acquisition as the Lease records it (acquireTime, set
// by the new holder), or to the log line if the Lease cannot be read.
func waitTakeover(t *testing.T, e *framework.Env, m *framework.Manager, ns, name string, since time.Time, timeout time.Duration) time.Duration {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for leaderIdentity(m) == "" {
		requireAlive(t, m, "while waiting to take over")
		if time.Now().After(deadline) {
			holder := ""
			if l, err := e.Kube.CoordinationV1().Leases(ns).Get(framework.Context(t), name, metav1.GetOptions{}); err == nil && l.Spec.HolderIdentity != nil {
				holder = *l.Spec.HolderIdentity
			}
			t.Fatalf("no takeover within %s (Lease holder %q)", timeout, holder)
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := time.Since(since)
	l, err := e.Kube.CoordinationV1().Leases(ns).Get(framework.Context(t), name, metav1.GetOptions{})
	if err != nil || l.Spec.AcquireTime == nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != leaderIdentity(m) {
		return seen
	}
	return l.Spec.AcquireTime.Sub(since)
}
