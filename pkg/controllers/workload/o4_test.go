package workload

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

func withCaps(global, cluster int) func(*Options) {
	return func(o *Options) { o.MaxActiveJobs, o.ClusterMaxActiveJobs = global, cluster }
}

// queuedNames takes every key out of kind's queue and returns the names.
func (f *fixture) queuedNames(kind string) []string {
	q := f.c.queues[kind]
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		out = append(out, k.Name)
	}
	return out
}

// endJob finishes Job name (finishJob), puts it in the cache, and
// delivers the update to the controller's Job handler, as the informer
// would.
func (f *fixture) endJob(name string) {
	f.t.Helper()
	obj, ok, err := f.inf.Jobs.Informer().GetIndexer().GetByKey(testNS + "/" + name)
	require.NoError(f.t, err)
	require.True(f.t, ok, "Job %s not in the cache", name)
	f.finishJob(name, jobSucceeded)
	o, err := f.Kube.Tracker().Get(jobsGVR, testNS, name)
	require.NoError(f.t, err)
	done := o.(*batchv1.Job)
	require.NoError(f.t, f.inf.Jobs.Informer().GetIndexer().Update(done))
	if !jobs.Finished(obj.(*batchv1.Job)) {
		f.c.jobGone(done)
	}
}

// countJobLists counts the LISTs of Jobs (the fresh read before a start).
func (f *fixture) countJobLists() *atomic.Int32 {
	var n atomic.Int32
	f.prependKubeReactor("list", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return &n
}

// skey is the slot key of kind's object o.
func skey(kind string, o metav1.Object) slotKey {
	return slotKey{kind: kind, name: cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}, uid: o.GetUID()}
}

// newJobLike is j with the conditions of outcome.
func newJobLike(j *batchv1.Job, outcome jobOutcome) *batchv1.Job {
	out := j.DeepCopy()
	ref := metav1.GetControllerOf(j)
	tmpl := newJob(ref.Kind, &metav1.ObjectMeta{Name: ref.Name, UID: ref.UID, Namespace: j.Namespace}, jobs.ActionOf(j), 1, outcome)
	out.Status = tmpl.Status
	return out
}

// catchUpJobs puts the Jobs the fake API server holds into the cache and
// tells the controller's Job handler, as the informer would.
func (f *fixture) catchUpJobs() {
	f.t.Helper()
	f.catchUp()
	for _, o := range f.inf.Jobs.Informer().GetIndexer().List() {
		f.c.jobSeen(o)
	}
}

func requireWaiting(t *testing.T, f *fixture, wantIn ...string) metav1.Condition {
	t.Helper()
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForJobSlot)
	for _, s := range wantIn {
		require.Contains(t, c.Message, s)
	}
	return c
}

// O4: with --max-active-jobs=1 and one Job running (from the cache alone,
// as after a restart), a due apply does not start: WaitingForJobSlot,
// naming the cap, with no request but its status write (no fresh Job
// read, no finalizer). The Job's end wakes it, and it starts.
func TestO4GlobalCapHoldsApply(t *testing.T) {
	f := newFixture(t, withCaps(1, 0))
	c0, c1 := newCluster("c0", withFinalizer), newCluster("c1")
	running := newJob(v1alpha1.KindTerraformCluster, c0, v1alpha1.JobActionApply, 1, jobRunning)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c0, c1, running)
	f.seed(newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c0), refOf(v1alpha1.KindTerraformCluster, c1)))
	f.catchUp()
	lists := f.countJobLists()

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
	require.Zero(t, lists.Load(), "a waiting object reads no Job list")
	c := requireWaiting(t, f, "--max-active-jobs", "(1 at once)", "apply Job for generation 1", "destroys first")
	require.NotContains(t, c.Message, "cluster's")
	require.True(t, f.c.slots.pool.Waiting(skey(v1alpha1.KindTerraformCluster, c1)))

	// Another pass changes nothing: no write.
	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, f.writes())

	// c0's Job ends: c1 is woken, and starts.
	f.queuedNames(v1alpha1.KindTerraformCluster)
	f.endJob(running.Name)
	require.Equal(t, []string{"c1"}, f.queuedNames(v1alpha1.KindTerraformCluster))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Equal(t, []string{jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1)}, f.createdJobNames())
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	require.False(t, f.c.slots.pool.Waiting(skey(v1alpha1.KindTerraformCluster, c1)))
	require.Positive(t, lists.Load(), "the start reads the Job list (J1)")
}

// O4: destroys first. With the one slot taken, an apply waits, then a
// destroy; the slot that frees wakes the destroy alone, and an apply that
// asks before the destroy's pass yields to it.
func TestO4DestroysOvertakeApplies(t *testing.T) {
	f := newFixture(t, withCaps(1, 0))
	c0, apply, gone := newCluster("c0", withFinalizer), newCluster("apply"), newCluster("gone", deleting)
	running := newJob(v1alpha1.KindTerraformCluster, c0, v1alpha1.JobActionApply, 1, jobRunning)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c0, apply, gone, running,
		newJob(v1alpha1.KindTerraformCluster, gone, v1alpha1.JobActionApply, 1, jobSucceeded))
	f.catchUp()

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "apply"))
	requireWaiting(t, f, "the apply Job")
	f.resetActions()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "gone"))
	requireWaiting(t, f, "the destroy Job")
	require.Empty(t, f.createdJobs())

	f.queuedNames(v1alpha1.KindTerraformCluster)
	f.endJob(running.Name)
	require.Equal(t, []string{"gone"}, f.queuedNames(v1alpha1.KindTerraformCluster), "the slot goes to the destroy, though the apply waited longer")

	// The apply asks first: the one free slot is the destroy's.
	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "apply"))
	require.Empty(t, f.createdJobs())
	require.Empty(t, f.writes(), "still waiting, nothing changed")
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "gone"))
	require.Equal(t, []string{jobs.Name(v1alpha1.KindTerraformCluster, "gone", gone.UID, v1alpha1.JobActionDestroy, 1)}, f.createdJobNames())

	// With the destroy's Job running, the apply still waits; its end
	// wakes the apply.
	f.catchUpJobs()
	require.Zero(t, f.c.slots.pool.Reserved(), "the Job in the cache ended the reservation")
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "apply"))
	require.Empty(t, f.createdJobs())
	f.queuedNames(v1alpha1.KindTerraformCluster)
	f.endJob(jobs.Name(v1alpha1.KindTerraformCluster, "gone", gone.UID, v1alpha1.JobActionDestroy, 1))
	require.Equal(t, []string{"apply"}, f.queuedNames(v1alpha1.KindTerraformCluster))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "apply"))
	require.Len(t, f.createdJobs(), 1)
}

// O4: the per-cluster cap counts the Jobs of the cluster and of its
// machines and pools; --cluster-max-active-jobs applies where the
// TerraformCluster sets no spec.maxActiveJobs, which raises it. A Job
// records its cluster (captf.io/cluster), so the cache can count it.
func TestO4ClusterCap(t *testing.T) {
	f := newFixture(t, withCaps(0, 1))
	label := func(o metav1.Object) { o.SetLabels(map[string]string{v1alpha1.LabelClusterName: "c"}) }
	cl := newCluster("c", withFinalizer)
	m1 := workloadOf(v1alpha1.KindTerraformMachine, "m1", label).(*v1alpha1.TerraformMachine)
	p1 := workloadOf(v1alpha1.KindTerraformMachinePool, "p1", label).(*v1alpha1.TerraformMachinePool)
	other := workloadOf(v1alpha1.KindTerraformMachine, "other").(*v1alpha1.TerraformMachine)
	running := newJob(v1alpha1.KindTerraformCluster, cl, v1alpha1.JobActionApply, 1, jobRunning)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), cl, m1, p1, other, running)
	f.catchUp()

	require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
	requireWaiting(t, f, "--cluster-max-active-jobs for TerraformCluster c", "its machines and its pools", "(1 at once)")
	// A machine of no cluster has only the cluster-wide cap (none here).
	f.resetActions()
	require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "other"))
	require.Len(t, f.createdJobs(), 1)
	_, has := f.createdJobs()[0].Annotations[v1alpha1.AnnotationJobCluster]
	require.False(t, has)

	// spec.maxActiveJobs: 2 lets m1 in, and wakes it.
	f.queuedNames(v1alpha1.KindTerraformMachine)
	raised := cl.DeepCopy()
	raised.Spec.MaxActiveJobs = ptr.To[int32](2)
	_, err := f.Captf.InfrastructureV1alpha1().TerraformClusters(testNS).Update(f.Ctx, raised, metav1.UpdateOptions{})
	require.NoError(t, err)
	f.catchUp()
	f.c.slots.pool.Freed(testNS+"/c", f.Clock.Now()) // the cluster handler's call
	require.Equal(t, []string{"m1"}, f.queuedNames(v1alpha1.KindTerraformMachine))
	f.resetActions()
	require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))
	require.Len(t, f.createdJobs(), 1)
	require.Equal(t, "c", f.createdJobs()[0].Annotations[v1alpha1.AnnotationJobCluster])

	// The pool is the third Job of cluster c: it waits, naming the spec.
	f.catchUpJobs()
	require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))
	requireWaiting(t, f, "TerraformCluster c's spec.maxActiveJobs", "(2 at once)")
	require.Empty(t, f.createdJobs())
}

// O4, B2: only the manager's own Jobs take slots: a running Job whose
// controller is gone or foreign takes none, and an object's extra Jobs
// count once. A tenant cannot fill the cap with Jobs it writes.
func TestO4ForgedJobsTakeNoSlot(t *testing.T) {
	f := newFixture(t, withCaps(2, 0))
	c0, c1 := newCluster("c0", withFinalizer), newCluster("c1")
	var seeds []*batchv1.Job
	for i := range 3 {
		j := newJob(v1alpha1.KindTerraformCluster, c0, v1alpha1.JobActionApply, int64(i+1), jobRunning)
		seeds = append(seeds, j)
	}
	ghost := newCluster("ghost")
	for i := range 5 {
		j := newJob(v1alpha1.KindTerraformCluster, ghost, v1alpha1.JobActionApply, int64(i+1), jobRunning)
		seeds = append(seeds, j)
	}
	// A live object's name with another UID (a deleted predecessor's).
	stale := newCluster("c1")
	stale.UID = "uid-old"
	seeds = append(seeds, newJob(v1alpha1.KindTerraformCluster, stale, v1alpha1.JobActionApply, 9, jobRunning))
	// A foreign controller.
	foreign := newJob(v1alpha1.KindTerraformCluster, c0, v1alpha1.JobActionApply, 10, jobRunning)
	foreign.OwnerReferences[0].APIVersion = "example.com/v1"
	seeds = append(seeds, foreign)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c0, c1)
	for _, s := range seeds {
		f.seed(s)
	}
	f.catchUp()
	require.Len(t, f.c.activeJobs(""), 1, "c0 counts once; the ghost's, the predecessor's and the foreign Jobs not at all")

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Len(t, f.createdJobs(), 1, "one of two slots is free")
}

// O4: an object that waits and then asks for no slot (it was paused) is
// forgotten, and the waiter behind it is woken for the free slot.
func TestO4WaiterThatNoLongerAsksMovesTheQueue(t *testing.T) {
	f := newFixture(t, withCaps(1, 0))
	c0, first, second := newCluster("c0", withFinalizer), newCluster("first"), newCluster("second")
	running := newJob(v1alpha1.KindTerraformCluster, c0, v1alpha1.JobActionApply, 1, jobRunning)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c0, first, second, running)
	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "first"))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "second"))
	require.Empty(t, f.createdJobs())

	f.queuedNames(v1alpha1.KindTerraformCluster)
	f.endJob(running.Name)
	require.Equal(t, []string{"first"}, f.queuedNames(v1alpha1.KindTerraformCluster))
	// first is paused before its pass: it asks for nothing, leaves the
	// queue, and second gets the slot.
	paused := first.DeepCopy()
	paused.Annotations[v1alpha1.AnnotationPaused] = "true"
	require.NoError(t, f.inf.Clusters.Informer().GetIndexer().Update(paused))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "first"))
	require.Equal(t, []string{"second"}, f.queuedNames(v1alpha1.KindTerraformCluster))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "second"))
	require.Equal(t, []string{jobs.Name(v1alpha1.KindTerraformCluster, "second", second.UID, v1alpha1.JobActionApply, 1)}, f.createdJobNames())
	require.False(t, f.c.slots.pool.Waiting(skey(v1alpha1.KindTerraformCluster, first)))
}

// O4: the race of two workers that each see one free slot: the count,
// the decision and the reservation are one step, so of many objects
// deciding at once on the real sync path, exactly as many start as slots
// were free, whatever the Job cache shows meanwhile.
func TestO4ConcurrentSyncsNeverExceedTheCap(t *testing.T) {
	const n, limit = 24, 3
	f := newFixture(t, withCaps(limit, 0))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)))
	var names []string
	var refs []metav1.OwnerReference
	for i := range n {
		c := newCluster(fmt.Sprintf("c%02d", i), withFinalizer)
		f.seed(c)
		names = append(names, c.Name)
		refs = append(refs, refOf(v1alpha1.KindTerraformCluster, c))
	}
	// The shared writes are in place (the mirror, the runner), so the
	// passes race on the slots alone.
	f.seed(newMirror(identityName, testNS, sourceData(), refs...))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, names[0]))
	f.c.slots.pool.Release(skey(v1alpha1.KindTerraformCluster, newCluster(names[0])), "", f.Clock.Now())
	require.NoError(t, f.Kube.Tracker().Delete(jobsGVR, testNS, f.createdJobNames()[0]))
	f.catchUp()
	errs := make(chan error, n)
	for _, name := range names {
		go func() { errs <- f.sync(v1alpha1.KindTerraformCluster, name) }()
	}
	for range n {
		require.NoError(t, <-errs)
	}
	require.Len(t, f.createdJobs(), limit, "created: %v", f.createdJobNames())
	require.Equal(t, limit, f.c.slots.pool.Reserved(), "the Jobs are not in the cache yet")
	// The cache catches up: the reservations end and nobody else starts.
	f.catchUpJobs()
	require.Zero(t, f.c.slots.pool.Reserved())
	for _, name := range names {
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, name))
	}
	require.Empty(t, f.createdJobs())
	waiting := 0
	for _, name := range names {
		if f.c.slots.pool.Waiting(skey(v1alpha1.KindTerraformCluster, newCluster(name))) {
			waiting++
		}
	}
	require.Equal(t, n-limit, waiting)
	for _, s := range f.statusWrites() {
		for _, c := range s.Conditions {
			require.False(t, strings.Contains(c.Message, secretValue))
		}
	}
}
