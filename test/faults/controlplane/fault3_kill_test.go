package faultscp

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestManagerKilledDuringDeletion is fault 3: a batch of objects whose
// apply Jobs have finished is deleted in chunks while the manager is
// SIGKILLed at random moments and restarted (sometimes killed again during
// its start-up), and destroy Jobs are finished a random moment after they
// appear. The schedule comes from a seeded random source (logged;
// CAPTF_FAULTS_SEED replays it). Checked throughout and at the end:
//
//   - each deletion completes exactly once: one destroy Job per object,
//     counted on every Job ever created (a watch from the start), not on
//     what the garbage collector leaves;
//   - the mirror is deleted with its last owner and not before: while an
//     object whose destroy has not succeeded exists in a namespace, the
//     mirror exists and carries its owner reference (polled);
//   - finalizers go last: an object disappears only after its destroy Job
//     succeeded, and its owner reference has left the mirror by then;
//   - nothing is left behind: no object, no mirror, and (garbage
//     collector) no Job.
func TestManagerKilledDuringDeletion(t *testing.T) {
	e := framework.Get(t)
	preserveLogs(t, e)
	ctx := framework.Context(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CAPTF_FAULTS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAPTF_FAULTS_SEED: %v", err)
		}
		seed = v
	}
	t.Logf("seed %d (CAPTF_FAULTS_SEED=%d replays this schedule)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	kills := size(5, 20)
	nsCount, perNS := size(2, 4), size(4, 6)
	args := []string{"--sync-period=20s", "--identity-resync=10s", "--workers=4"}

	var (
		mu         sync.Mutex
		finishing  = map[types.UID]bool{} // destroy Job set (or being set) succeeded
		gone       = map[types.UID]time.Time{}
		violations []string
	)
	violate := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(violations) < 50 {
			violations = append(violations, time.Now().Format("15:04:05.000 ")+fmt.Sprintf(format, args...))
		}
	}
	destroys := make(chan framework.JobRecord, 4096)
	rec := e.RecordJobs(t, func(j framework.JobRecord) {
		if j.Action == v1alpha1.JobActionDestroy {
			select {
			case destroys <- j:
			default:
				violate("test: destroy Job queue full")
			}
		}
	})

	m := startManager(t, e, args...)
	cur := m
	f := fixture(t, e, m)
	d := sourceData(21)
	h := hashOf(d)
	ref := f.Source(d)
	nss := createNamespaces(t, e, "kill", nsCount, nil)
	inNS := map[string]bool{}
	for _, ns := range nss {
		inNS[ns] = true
	}
	identity := framework.Name("deletion")
	createIdentity(t, e, identity, ref, framework.List(nss...))
	type spec struct {
		ns, name string
		machine  bool
	}
	var specs []spec
	for _, ns := range nss {
		for i := range perNS {
			if i%2 == 0 {
				specs = append(specs, spec{ns, fmt.Sprintf("c%d", i), false})
			} else {
				specs = append(specs, spec{ns, fmt.Sprintf("m%d", i), true})
			}
		}
	}
	objs := make([]object, len(specs))
	if err := framework.Parallel(len(specs), 8, func(i int) error {
		var err error
		if specs[i].machine {
			objs[i], err = createMachine(ctx, e, specs[i].ns, specs[i].name, identity)
		} else {
			objs[i], err = createCluster(ctx, e, specs[i].ns, specs[i].name, identity)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ours := map[types.UID]object{}
	for _, o := range objs {
		ours[o.UID] = o
	}
	// Stops the manager running at the end; when the test failed half-way,
	// deletes what is left.
	running := []*framework.Manager{m}
	cleanUp(t, e, &running, &nss, identity)

	// Every object applied: apply Jobs finished, mirrors current with every
	// owner reference.
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "apply Jobs", func(*snapshot) (bool, string) { return everyObjectHasApply(rec, objs) })
	finishApplyJobs(t, e, rec, objs)
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "applied", func(s *snapshot) (bool, string) {
		if ok, msg := s.conditionAll(v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded); !ok {
			return false, msg
		}
		return s.mirrorsConverged(identity, h, nss)
	})

	// Watchers: objects disappearing, and the mirror invariant.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer func() { stopWatch(); watchers.Wait() }()
	onGone := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		mo, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		o, ok := ours[mo.GetUID()]
		if !ok {
			return
		}
		mu.Lock()
		gone[o.UID] = time.Now()
		fin := finishing[o.UID]
		mu.Unlock()
		if !fin {
			violate("%s disappeared before its destroy Job succeeded (finalizer removed too early)", o)
		}
		mirror, err := e.Kube.CoreV1().Secrets(o.Namespace).Get(watchCtx, credentials.MirrorName(identity), metav1.GetOptions{})
		if err == nil && hasOwner(mirror, o.UID) {
			violate("%s is gone but its owner reference is still on the mirror (V3: the finalizer must go last)", o)
		}
	}
	cf := captfinformers.NewSharedInformerFactory(e.Captf, 0)
	for _, inf := range []cache.SharedIndexInformer{
		cf.Infrastructure().V1alpha1().TerraformClusters().Informer(),
		cf.Infrastructure().V1alpha1().TerraformMachines().Informer(),
	} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: onGone}); err != nil {
			t.Fatal(err)
		}
	}
	cf.Start(watchCtx.Done())
	// The informers stop only when watchCtx ends: cancel it first, or a
	// t.Fatal below would wait in Shutdown forever (the cold side-by-side
	// run of issue 21 hung here for 38 minutes on a failed restart).
	defer func() { stopWatch(); cf.Shutdown() }()
	cf.WaitForCacheSync(watchCtx.Done())
	checks := 0
	watchers.Go(func() {
		for watchCtx.Err() == nil {
			for _, ns := range nss {
				checkMirrorInvariant(watchCtx, e, ns, identity, ours, func(uid types.UID) bool {
					mu.Lock()
					defer mu.Unlock()
					return finishing[uid]
				}, violate)
			}
			mu.Lock()
			checks++
			mu.Unlock()
			select {
			case <-watchCtx.Done():
			case <-time.After(150 * time.Millisecond):
			}
		}
	})
	// Destroy Jobs are finished a random moment after they appear, as
	// their pods would end.
	finRNG := rand.New(rand.NewPCG(seed, 1))
	watchers.Go(func() {
		for {
			var j framework.JobRecord
			select {
			case <-watchCtx.Done():
				return
			case j = <-destroys:
			}
			if !inNS[j.Namespace] {
				continue
			}
			mu.Lock()
			delay := time.Duration(finRNG.Int64N(int64(1500 * time.Millisecond)))
			mu.Unlock()
			watchers.Go(func() {
				select {
				case <-watchCtx.Done():
					return
				case <-time.After(delay):
				}
				mu.Lock()
				finishing[j.Owner] = true
				mu.Unlock()
				var err error
				for attempt := 0; attempt < 20; attempt++ {
					if err = e.FinishJob(watchCtx, j.Namespace, j.Name, ""); err == nil || watchCtx.Err() != nil {
						return
					}
					time.Sleep(500 * time.Millisecond)
				}
				violate("test: could not finish destroy Job %s: %v", j, err)
			})
		}
	})
	progress := func() string {
		mu.Lock()
		defer mu.Unlock()
		destroyJobs := 0
		for _, j := range rec.Jobs(nil) {
			if j.Action == v1alpha1.JobActionDestroy && inNS[j.Namespace] {
				destroyJobs++
			}
		}
		return fmt.Sprintf("%d destroy Jobs created, %d finished, %d of %d objects gone", destroyJobs, len(finishing), len(gone), len(objs))
	}

	// Delete in chunks, killing the manager at a random moment after each.
	order := rng.Perm(len(objs))
	deletionStart := time.Now()
	startupKills := 0
	var startups []time.Duration
	for i := range kills {
		chunk := order[i*len(objs)/kills : (i+1)*len(objs)/kills]
		var names []string
		for _, idx := range chunk {
			if err := deleteObject(ctx, e, objs[idx]); err != nil {
				t.Fatalf("deleting %s: %v", objs[idx], err)
			}
			names = append(names, objs[idx].Namespace+"/"+objs[idx].Name)
		}
		wait := time.Duration(rng.Int64N(int64(2500 * time.Millisecond)))
		time.Sleep(wait)
		requireAlive(t, cur, "before it was killed")
		cur.Kill()
		t.Logf("kill %d/%d: %s after deleting %v; %s", i+1, kills, wait.Round(time.Millisecond), names, progress())
		if rng.IntN(4) == 0 {
			early := time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))
			mm := e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Args: args, NoWait: true})
			time.Sleep(early)
			mm.Kill()
			startupKills++
			t.Logf("  and killed its successor %s into its start-up", early.Round(time.Millisecond))
		}
		started := time.Now()
		cur = startManager(t, e, args...)
		running[0] = cur
		startups = append(startups, time.Since(started).Round(time.Millisecond))
	}
	t.Logf("%d kills (+%d during start-up); restarts took %v to /readyz; %s", kills, startupKills, startups, progress())

	// Every deletion completes.
	waitSnapshot(t, e, identity, nss, time.Duration(size(3, 5))*time.Minute, "every deletion completed", func(s *snapshot) (bool, string) {
		if len(s.objects) > 0 || len(s.mirrors) > 0 {
			var left []string
			for _, o := range s.objects {
				left = append(left, fmt.Sprintf("%s (%s)", o, framework.Describe(o.Conditions)))
				if len(left) == 3 {
					break
				}
			}
			return false, fmt.Sprintf("%d objects left (%s), mirrors in %v; %s", len(s.objects), strings.Join(left, "; "), sortedKeys(s.mirrors), progress())
		}
		return true, ""
	})
	took := time.Since(deletionStart).Round(time.Millisecond)
	requireAlive(t, cur, "at the end")
	// The last disappearance event may still be on its way.
	framework.Eventually(t, time.Minute, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(gone) == len(objs), fmt.Sprintf("%d of %d deletions observed", len(gone), len(objs))
	})
	stopWatch()
	watchers.Wait()

	mu.Lock()
	for _, v := range violations {
		t.Errorf("violation: %s", v)
	}
	t.Logf("mirror invariant checked %d times over %d namespaces", checks, len(nss))
	mu.Unlock()
	wantDestroy := map[types.UID]int{}
	for _, o := range objs {
		wantDestroy[o.UID] = 1
	}
	requireOneJobEach(t, e, rec, objs, wantDestroy)
	// Nothing left behind: the garbage collector removes the Jobs of
	// objects that are gone.
	framework.Eventually(t, 2*time.Minute, func() (bool, string) {
		n, err := jobsStillThere(ctx, e, nss)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d Jobs left in the namespaces", n)
	})
	var removed, created int
	for _, km := range framework.KeptManagers() {
		log := km.Log()
		removed += strings.Count(log, `"Removed finalizer"`)
		created += strings.Count(log, `"Created Job"`)
	}
	t.Logf("fault 3: %d objects deleted across %d kills in %s; manager logs (all managers of the package so far): %d \"Removed finalizer\", %d \"Created Job\"",
		len(objs), kills+startupKills, took, removed, created)
}

// checkMirrorInvariant reads the namespace's mirror, then its objects: an
// object that still exists and whose destroy has not been set succeeded
// existed, undestroyed, when the mirror was read, so the mirror must have
// existed then and carried its owner reference.
func checkMirrorInvariant(ctx context.Context, e *framework.Env, ns, identity string, ours map[types.UID]object, finishing func(types.UID) bool, violate func(string, ...any)) {
	mirror, err := e.Kube.CoreV1().Secrets(ns).Get(ctx, credentials.MirrorName(identity), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		mirror, err = nil, nil
	}
	if err != nil {
		return
	}
	var uids []types.UID
	clusters, err := e.Captf.InfrastructureV1alpha1().TerraformClusters(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, c := range clusters.Items {
		uids = append(uids, c.UID)
	}
	machines, err := e.Captf.InfrastructureV1alpha1().TerraformMachines(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, m := range machines.Items {
		uids = append(uids, m.UID)
	}
	for _, uid := range uids {
		o, ok := ours[uid]
		if !ok || finishing(uid) {
			continue
		}
		switch {
		case mirror == nil:
			violate("the mirror in %s was gone while %s existed with its destroy not yet succeeded", ns, o)
		case !hasOwner(mirror, uid):
			violate("the mirror in %s lacked the owner reference of %s before its destroy succeeded (owners %v)", ns, o, framework.OwnerNames(mirror))
		}
	}
}

func hasOwner(s *corev1.Secret, uid types.UID) bool {
	return credentials.HasOwnerReference(s.OwnerReferences, uid)
}
