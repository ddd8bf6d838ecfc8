package workload

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/statelock"
)

// lockRequeue is how soon an object whose state is locked by something
// else is looked at again: nothing reports the lock's release.
const lockRequeue = time.Minute

// lockStep runs before a Job of w starts (SPEC O3): it reads the state's
// lock Lease uncached, releases a lock a finished Job of w left behind
// (its pod was killed while Terraform held it; ForceUnlocked), or one a
// Job of w deleted while it ran left (its name is one of w's Job names
// and its pod, read then, is gone), and holds
// the Job back while anything else holds it (StateReadable=False,
// StateLocked; never broken; True, StateRead, once it is free). set is w's fresh Job set. It reports whether
// the Job may start.
func (c *Controller) lockStep(ctx context.Context, w *workload, set jobSet, action v1alpha1.JobAction) (bool, error) {
	ns := w.obj.GetNamespace()
	name := jobs.StateLeaseName(jobs.StateSuffix(w.kind.name, w.obj.GetName()))
	lease, err := c.uncached.Kube.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	var facts statelock.Lease
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return false, fmt.Errorf("reading the state lock %s/%s: %w", ns, name, err)
	default:
		facts = statelock.Lease{Exists: true, Info: lease.Annotations[statelock.AnnotationLockInfo]}
		if lease.Spec.HolderIdentity != nil {
			facts.Holder = *lease.Spec.HolderIdentity
		}
	}
	own := make([]statelock.Job, 0, len(set.all))
	for _, j := range set.all {
		own = append(own, statelock.Job{Name: j.Name, Finished: jobs.Finished(j)})
	}
	obj := statelock.Object{Kind: w.kind.name, Name: w.obj.GetName(), UID: w.obj.GetUID()}
	d := statelock.Decide(facts, own, obj)
	if d.Action == statelock.ReadPod {
		if facts.Pod, err = c.holderPod(ctx, ns, d.Pod); err != nil {
			return false, err
		}
		d = statelock.Decide(facts, own, obj)
	}
	switch d.Action {
	case statelock.Wait:
		if d.Requeue {
			// The holder's Job is gone and its pod still runs (it
			// terminates, or was orphaned): nothing reports its end.
			klog.FromContext(ctx).Info("The state lock is held by the pod of a deleted Job of this object, which still runs; waiting", "lease", klog.KRef(ns, name), "pod", d.Pod)
			c.queues[w.kind.name].Wake(w.key(), lockRequeue)
		}
		return false, nil // J1: its Job still runs
	case statelock.Locked:
		if !meta.IsStatusConditionFalse(w.status.Conditions, string(v1alpha1.ConditionStateReadable)) {
			w.warn(v1alpha1.EventStateLocked, "The state lock %s is held by something other than a Job of this object (%s); the %s Job waits, and captf never breaks it", name, d.Message, action)
		}
		setCondition(w, c.clock.Now(), v1alpha1.ConditionStateReadable, metav1.ConditionFalse, v1alpha1.ReasonStateLocked,
			"the state lock Lease %s: %s; the %s Job starts once it is released (if it is stale: tofu force-unlock, or delete the Lease)", name, d.Message, action)
		c.queues[w.kind.name].Wake(w.key(), lockRequeue)
		return false, nil
	case statelock.ForceUnlock:
		lease.Spec.HolderIdentity = nil
		delete(lease.Annotations, statelock.AnnotationLockInfo)
		// The resourceVersion read is the precondition: a lock taken since
		// is not released.
		if _, err := c.kube.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
			return false, fmt.Errorf("releasing the state lock %s/%s of Job %s: %w", ns, name, d.Job, err)
		}
		metrics.ForceUnlocks.Inc()
		klog.FromContext(ctx).Info("Released a stale state lock", "lease", klog.KRef(ns, name), "job", d.Job, "jobDeleted", d.Deleted)
		ended := "has finished"
		if d.Deleted {
			ended = "was deleted and its pod no longer runs"
		}
		w.warn(v1alpha1.EventForceUnlocked, "Released the state lock %s: %s, and Job %s %s", name, d.Message, d.Job, ended)
	}
	if meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionStateReadable)) != nil {
		// Upstream's True reason (A1-158) once a lock that held a Job back
		// is free; an object whose state was never locked by anything
		// else has no StateReadable (no write for it on every Job start).
		setCondition(w, c.clock.Now(), v1alpha1.ConditionStateReadable, metav1.ConditionTrue, v1alpha1.ReasonStateRead,
			"the state lock Lease %s is not held by anything else", name)
	}
	return true, nil
}

// holderPod reads whether the pod named pod, the holder of a lock whose
// Job is gone, still runs (O3): an uncached LIST of the pods of that name
// (the manager may list pods, not get them; B11: one pod at most, within
// the response budget). A pod that is not there, or has ended, no longer
// holds the lock.
func (c *Controller) holderPod(ctx context.Context, ns, pod string) (statelock.Pod, error) {
	list, err := c.uncached.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String(), Limit: 1})
	if err != nil {
		return statelock.PodUnread, fmt.Errorf("reading pod %s/%s, the holder of a state lock: %w", ns, pod, err)
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Name == pod && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return statelock.PodRuns, nil
		}
	}
	return statelock.PodGone, nil
}
