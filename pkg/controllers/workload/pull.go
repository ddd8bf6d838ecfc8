package workload

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runclass"
)

// SPEC O2 (A3-88): a Job whose pod cannot pull an image is ended within a
// minute and recorded as ImagePullFailed, naming the image, instead of
// waiting for its deadline. Nothing watches pods: a running Job none of
// whose pods is ready (the Job cache keeps status.ready) has its pod read
// uncached (readRunPod: bounded pages, only the pod the Job controls) when
// runclass.PullGrace has passed since it started, then at growing
// intervals (nextPullCheck), and at once when its generation is outdated
// (docs/design.md, "Run results").

// A pod not ready without a pull failure yet (unscheduled, or a first pull
// still timing out on an unreachable registry) is read again after
// pullRecheck, then at doubling intervals up to pullRecheckMax.
const (
	pullRecheck    = 10 * time.Second
	pullRecheckMax = 10 * time.Minute
)

// pullCheck decides whether the pass reads the pod of j, the object's
// running Job, for a pull failure, and when to look again (zero: not). A
// Job that finished, is being deleted, waits suspended for its run Secret
// (K5) or has a ready pod (it runs Terraform) is not read.
func pullCheck(j *batchv1.Job, generation int64, now time.Time) (read bool, next time.Time) {
	if j == nil || jobs.Finished(j) || j.DeletionTimestamp != nil || ptr.Deref(j.Spec.Suspend, false) || ptr.Deref(j.Status.Ready, 0) > 0 {
		return false, time.Time{}
	}
	start := j.CreationTimestamp.Time
	if j.Status.StartTime != nil {
		start = j.Status.StartTime.Time
	}
	if g, ok := jobs.GenerationOf(j); ok && g < generation {
		return true, nextPullCheck(start, now)
	}
	if due := start.Add(runclass.PullGrace); now.Before(due) {
		return false, due
	}
	return true, nextPullCheck(start, now)
}

// nextPullCheck is the first of start + PullGrace + pullRecheck·(2^k - 1)
// (k = 0, 1, 2...: 30 s, 40 s, 60 s, 100 s...) after now, at most
// pullRecheckMax after now.
func nextPullCheck(start, now time.Time) time.Time {
	t := start.Add(runclass.PullGrace)
	for d := pullRecheck; !t.After(now); d *= 2 {
		if d > pullRecheckMax {
			return now.Add(pullRecheckMax)
		}
		t = t.Add(d)
	}
	return t
}

// pullStep ends the object's running Job when its pod waits for an image it
// cannot pull (runclass.StopForPull) and records the run as failed with
// error kind image-pull: status.lastApply or lastDestroy, status.lastRun
// and the RunFinished event, so it takes the failure backoff (T7) and
// reportRecord words ImagePullFailed. It returns set without that Job. A
// read or delete that fails is logged and tried again at the next check,
// not an error of the pass: the check is not worth holding up the rest.
func (c *Controller) pullStep(ctx context.Context, w *workload, set jobSet, now time.Time) jobSet {
	j := set.running
	read, next := pullCheck(j, w.obj.GetGeneration(), now)
	if read && jobs.ActionOf(j) != "" {
		ended, err := c.endForPull(ctx, w, j, now)
		if err != nil {
			// A best-effort check: the rest of the pass goes on, and the
			// check comes back at next.
			klog.FromContext(ctx).Info("Could not check a running Job for an image pull failure", "job", klog.KObj(j), "err", err)
		}
		if ended {
			return set.without(j)
		}
	}
	if !next.IsZero() {
		c.requeueAt(w, next, now)
	}
	return set
}

// endForPull reads the pod of j, the object's running Job, and when it
// cannot pull an image ends the Job and records its run; ended says so.
func (c *Controller) endForPull(ctx context.Context, w *workload, j *batchv1.Job, now time.Time) (ended bool, _ error) {
	pod, err := c.readRunPod(ctx, j)
	if err != nil || !runclass.StopForPull(j, pod.PullFailure, w.obj.GetGeneration(), now) {
		return false, err
	}
	if err := c.endJob(ctx, j); err != nil {
		return false, err
	}
	action := jobs.ActionOf(j)
	rec := runRecord(j, v1alpha1.RunFailed, now)
	*statusRecord(w.status, action) = rec
	run := runclass.Pulled(pod.PullFailure)
	l := runclass.NewRecord(action, rec, run)
	if j.Status.StartTime != nil {
		l.StartTime = ptr.To(metav1.NewTime(j.Status.StartTime.UTC()))
	}
	w.status.LastRun = l
	c.reportRun(ctx, w, j, l, run.Document)
	return true, nil
}

// endJob deletes a running Job whose image cannot be pulled, with a UID
// precondition, in the foreground: the Job stays (being deleted, so still
// the object's one running Job, J1) until its pod is gone, in case the
// kubelet's last pull succeeded meanwhile. Its pod never ran Terraform
// before that, so it holds no state lock.
func (c *Controller) endJob(ctx context.Context, j *batchv1.Job) error {
	uid := j.UID
	err := c.kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationForeground),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("ending Job %s, whose image cannot be pulled: %w", j.Name, err)
	}
	klog.FromContext(ctx).Info("Ended a Job whose image cannot be pulled", "job", klog.KObj(j))
	return nil
}

// endedRun reports whether j, a Job that has not finished, is the run rec
// records: a Job the manager ended (pullStep) whose deletion has not
// completed. It still counts as the object's running Job (J1), but is
// reported from its record.
func endedRun(j *batchv1.Job, rec *v1alpha1.RunRecord) bool {
	return j != nil && rec != nil && rec.JobName == j.Name
}
