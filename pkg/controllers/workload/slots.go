package workload

import (
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/slots"
)

// SPEC O4 in the reconcile: the controller counts running Jobs from its
// Job cache by index, pkg/slots decides and orders the waiters, and the
// two places where a Job is about to start (applyJob, startDestroy) ask
// it. A Job event that frees a slot wakes only the waiters that can use
// it; no event scans the objects.

// indexActiveJobs indexes the Jobs that have not finished (suspended ones
// too: the manager is starting them, K5) and whose controller is a
// workload object, under activeAll and under their cluster's key.
const indexActiveJobs = "captf.io/active-jobs"

// activeAll is the indexActiveJobs key of every running Job; a cluster's
// key is "<namespace>/<name>", never this.
const activeAll = "*"

// reservationTTL ends a reservation whose Job never appears in the cache
// (deleted before the cache saw it): far longer than the cache's lag.
const reservationTTL = 2 * time.Minute

// slotKey names the object a Job runs for: what the queue needs to wake
// it, and its UID, so a re-created object is another waiter.
type slotKey struct {
	kind string
	name cache.ObjectName
	uid  types.UID
}

func slotKeyOf(w *workload) slotKey {
	return slotKey{kind: w.kind.name, name: w.key(), uid: w.obj.GetUID()}
}

// slotState is the controller's part of O4.
type slotState struct {
	pool *slots.Pool[slotKey]
	// asked holds the objects whose pass, now running, asked for a slot
	// and waits: the others are forgotten after their pass (settleSlot).
	mu    sync.Mutex
	asked map[slotKey]bool
}

// workloadGroup is the API group of the Jobs' controllers.
var workloadGroup = v1alpha1.SchemeGroupVersion.Group

// jobController returns a Job's controller reference when it is a
// workload object.
func jobController(j *batchv1.Job) *metav1.OwnerReference {
	ref := metav1.GetControllerOfNoCopy(j)
	if ref == nil {
		return nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != workloadGroup {
		return nil
	}
	switch ref.Kind {
	case v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool:
		return ref
	}
	return nil
}

// jobCluster is the key of the cluster whose cap j counts under: its
// captf.io/cluster annotation; for a Job of a TerraformCluster created
// before the annotation, the cluster itself; else "".
func jobCluster(j *batchv1.Job, ref *metav1.OwnerReference) string {
	if n := j.Annotations[v1alpha1.AnnotationJobCluster]; n != "" {
		return j.Namespace + "/" + n
	}
	if ref.Kind == v1alpha1.KindTerraformCluster {
		return j.Namespace + "/" + ref.Name
	}
	return ""
}

func activeJobKeys(obj interface{}) ([]string, error) {
	j, ok := obj.(*batchv1.Job)
	if !ok || jobs.Finished(j) {
		return nil, nil
	}
	ref := jobController(j)
	if ref == nil {
		return nil, nil
	}
	keys := []string{activeAll}
	if cl := jobCluster(j, ref); cl != "" {
		keys = append(keys, cl)
	}
	return keys, nil
}

// slotClusterName is the TerraformCluster whose cap w's Jobs count under:
// itself, or a machine's or pool's cluster (SPEC 1.2, K2); "" when it has
// none.
func slotClusterName(w *workload) string {
	if w.kind.name == v1alpha1.KindTerraformCluster {
		return w.obj.GetName()
	}
	if cl := w.contract.cluster; cl != nil {
		return cl.Name
	}
	return ""
}

func slotCluster(w *workload) string {
	if n := slotClusterName(w); n != "" {
		return w.obj.GetNamespace() + "/" + n
	}
	return ""
}

// newSlots builds the pool over the Job cache and registers the index
// and handlers that keep it current; before the informers start.
func (c *Controller) newSlots(inf Informers) error {
	jobInf := inf.Jobs.Informer()
	if _, ok := jobInf.GetIndexer().GetIndexers()[indexActiveJobs]; !ok {
		if err := jobInf.AddIndexers(cache.Indexers{indexActiveJobs: activeJobKeys}); err != nil {
			return err
		}
	}
	c.slots = &slotState{asked: map[slotKey]bool{}}
	c.slots.pool = slots.NewPool(slots.Config[slotKey]{
		GlobalLimit:  c.opts.MaxActiveJobs,
		ClusterLimit: func(cluster string) int { limit, _ := c.clusterLimit(cluster); return limit },
		Active:       c.activeJobs,
		Wake: func(keys []slotKey) {
			for _, k := range keys {
				c.Enqueue(k.kind, k.name)
			}
		},
		TTL:      reservationTTL,
		Observer: slotMetrics{},
	})
	if err := c.handle(jobInf, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.jobSeen(obj) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			c.jobSeen(newObj)
			if o, ok := oldObj.(*batchv1.Job); ok && !jobs.Finished(o) {
				if n, ok := newObj.(*batchv1.Job); ok && jobs.Finished(n) {
					c.jobGone(n)
				}
			}
		},
		DeleteFunc: func(obj interface{}) {
			if j, ok := loop.Unwrap(obj).(*batchv1.Job); ok && !jobs.Finished(j) {
				c.jobGone(j)
			}
		},
	}); err != nil {
		return err
	}
	for _, k := range c.kinds {
		if err := c.handle(k.informer, cache.ResourceEventHandlerFuncs{
			DeleteFunc: func(obj interface{}) {
				if m, ok := loop.Unwrap(obj).(metav1.Object); ok {
					c.slots.pool.Forget(slotKey{kind: k.name, name: cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}, uid: m.GetUID()}, c.clock.Now())
				}
			},
		}); err != nil {
			return err
		}
	}
	// A cluster's new spec.maxActiveJobs may let its waiters in.
	return c.handle(inf.Clusters.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1alpha1.TerraformCluster)
			n, ok2 := newObj.(*v1alpha1.TerraformCluster)
			if ok1 && ok2 && ptr.Deref(o.Spec.MaxActiveJobs, 0) != ptr.Deref(n.Spec.MaxActiveJobs, 0) {
				c.slots.pool.Freed(n.Namespace+"/"+n.Name, c.clock.Now())
			}
		},
	})
}

// jobSeen ends the reservation of a Job that is in the cache now.
func (c *Controller) jobSeen(obj interface{}) {
	j, ok := obj.(*batchv1.Job)
	if !ok || jobs.Finished(j) {
		return
	}
	if ref := jobController(j); ref != nil {
		c.slots.pool.Seen(slotKey{kind: ref.Kind, name: cache.ObjectName{Namespace: j.Namespace, Name: ref.Name}, uid: ref.UID})
	}
}

// jobGone wakes the waiters for the slot a finished or deleted Job frees.
func (c *Controller) jobGone(j *batchv1.Job) {
	if ref := jobController(j); ref != nil {
		c.slots.pool.Freed(jobCluster(j, ref), c.clock.Now())
	}
}

// activeJobs returns the objects whose Jobs run, under cluster's cap or
// ("") all, from the index. Only a live object's Jobs count, each object
// once (SPEC B2): a Job that names a deleted or foreign controller, or
// one more Job of the same object, takes no slot.
func (c *Controller) activeJobs(cluster string) map[slotKey]bool {
	key := cluster
	if key == "" {
		key = activeAll
	}
	objs, err := c.jobIndexer.ByIndex(indexActiveJobs, key)
	if err != nil {
		utilruntime.HandleError(err)
		return nil
	}
	out := make(map[slotKey]bool, len(objs))
	for _, o := range objs {
		j, ok := o.(*batchv1.Job)
		if !ok {
			continue
		}
		ref := jobController(j)
		if ref == nil {
			continue
		}
		k, ok := c.kinds[ref.Kind]
		if !ok {
			continue
		}
		owner, found, err := k.informer.GetIndexer().GetByKey(j.Namespace + "/" + ref.Name)
		if err != nil || !found {
			continue
		}
		if m, ok := owner.(metav1.Object); !ok || m.GetUID() != ref.UID {
			continue
		}
		out[slotKey{kind: ref.Kind, name: cache.ObjectName{Namespace: j.Namespace, Name: ref.Name}, uid: ref.UID}] = true
	}
	return out
}

// clusterLimit returns the cap of cluster ("<namespace>/<name>") and
// whether its spec.maxActiveJobs sets it (else --cluster-max-active-jobs).
func (c *Controller) clusterLimit(cluster string) (int, bool) {
	o, found, err := c.kinds[v1alpha1.KindTerraformCluster].informer.GetIndexer().GetByKey(cluster)
	if err == nil && found {
		if tc, ok := o.(*v1alpha1.TerraformCluster); ok && tc.Spec.MaxActiveJobs != nil {
			return int(*tc.Spec.MaxActiveJobs), true
		}
	}
	return c.opts.ClusterMaxActiveJobs, false
}

// slotFree says whether w's Job of class would start, before the reads a
// start needs (the fresh Job list): a waiting object costs no request.
// When it would not, it reports WaitingForJobSlot.
func (c *Controller) slotFree(w *workload, class slots.Class, action v1alpha1.JobAction, now time.Time) bool {
	o := c.slots.pool.Peek(slots.Ask[slotKey]{Key: slotKeyOf(w), Class: class, Cluster: slotCluster(w)}, now)
	if o.Start {
		return true
	}
	c.slotWaits(w, class, action, o, now)
	return false
}

// takeSlot reserves a slot for w's Job of class, or reports
// WaitingForJobSlot and returns false. A start that created no Job must
// call releaseSlot.
func (c *Controller) takeSlot(w *workload, class slots.Class, action v1alpha1.JobAction, now time.Time) bool {
	o := c.slots.pool.Take(slots.Ask[slotKey]{Key: slotKeyOf(w), Class: class, Cluster: slotCluster(w)}, now)
	if o.Start {
		return true
	}
	c.slotWaits(w, class, action, o, now)
	return false
}

// releaseSlot gives back the slot of a start that created no Job (no
// runner, a terminating namespace). A start that failed with an error
// keeps it: the Job may exist, and the retry of the same object takes
// the same slot; else the reservation's TTL ends it.
func (c *Controller) releaseSlot(w *workload, created *batchv1.Job, err error) {
	if created == nil && err == nil {
		c.slots.pool.Release(slotKeyOf(w), slotCluster(w), c.clock.Now())
	}
}

// slotWaits records that w's pass asked and waits, and reports it.
func (c *Controller) slotWaits(w *workload, class slots.Class, action v1alpha1.JobAction, o slots.Outcome, now time.Time) {
	c.slots.mu.Lock()
	c.slots.asked[slotKeyOf(w)] = true
	c.slots.mu.Unlock()
	var held string
	switch o.Scope {
	case slots.Cluster:
		name := slotClusterName(w)
		if _, fromSpec := c.clusterLimit(w.obj.GetNamespace() + "/" + name); fromSpec {
			held = "TerraformCluster " + name + "'s spec.maxActiveJobs"
		} else {
			held = "--cluster-max-active-jobs for TerraformCluster " + name
		}
		held += ", which counts the Jobs of the cluster, its machines and its pools"
	default:
		held = "--max-active-jobs, which counts every Job of the manager"
	}
	var why string
	if o.Hold == slots.Reserved {
		why = "drift and refresh Jobs start only while fewer than 80% of the slots are taken"
	} else {
		why = "it starts when a slot frees: destroys first, then applies, each in the order they began to wait"
	}
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForJobSlot,
		"the %s Job for generation %d waits for a slot under %s (%d at once); %s (waiting since %s)",
		action, w.obj.GetGeneration(), held, o.Limit, why, o.Since.UTC().Format(time.RFC3339))
}

// settleSlot ends the wait of an object whose pass asked for no slot: its
// Job is no longer due (it started, it is paused, its spec went back),
// and the waiters behind it move up. A failed pass changes nothing: it is
// retried.
func (c *Controller) settleSlot(w *workload, passErr error) {
	k := slotKeyOf(w)
	c.slots.mu.Lock()
	asked := c.slots.asked[k]
	delete(c.slots.asked, k)
	c.slots.mu.Unlock()
	if passErr == nil && !asked {
		c.slots.pool.Forget(k, c.clock.Now())
	}
}

// slotMetrics reports waits to the metrics (SPEC O4).
type slotMetrics struct{}

func (slotMetrics) Waiting(class slots.Class, scope slots.Scope, n int) {
	metrics.JobsWaitingForSlot.WithLabelValues(class.String(), scope.String()).Set(float64(n))
}

func (slotMetrics) WaitBegan(class slots.Class, scope slots.Scope) {
	metrics.JobSlotWaits.WithLabelValues(class.String(), scope.String()).Inc()
}

func (slotMetrics) WaitEnded(class slots.Class, waited time.Duration) {
	metrics.JobSlotWaitSeconds.WithLabelValues(class.String()).Observe(waited.Seconds())
}
