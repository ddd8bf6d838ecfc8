package workload

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/bounded"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runclass"
)

// SPEC O1: how a run ended, read once when its Job's run is recorded. The
// decisions are runclass's; this file gathers and writes.
const (
	// podPageLimit bounds each page of the pods listed for one Job (B11):
	// its own, and one more to tell whether others claim it.
	podPageLimit = 2
	// podPages bounds the pages: pods a tenant made to claim the Job (its
	// label) are skipped a page at a time, and past this many pages the
	// pod is left unread.
	podPages = 4
)

// lastRunStep records status.lastRun (O1) for the newest recorded run
// (status.lastApply or status.lastDestroy, T7, recorded earlier in this
// pass) when lastRun does not describe its Job yet, and queues the
// RunFinished and PlanSummary events. It follows the record, not the Job
// cache, like outputsStep: a steady pass makes no request and writes
// nothing, and each recorded Job is read once. Gather: the Job from the
// cache and its pod uncached (readRunPod); decide: runclass; write: the
// pass's status write. A Job gone before it was read is recorded from the
// record alone (runclass.Gone), never as an interruption.
func (c *Controller) lastRunStep(ctx context.Context, w *workload) error {
	action, rec := newestRun(w.status)
	if rec == nil || rec.JobName == adoptedJobName || describes(w.status.LastRun, rec) {
		return nil
	}
	if last, ok := c.written.Last(w.key(), w.obj.GetUID()); ok && describes(last.LastRun, rec) {
		// Written by this process; the cache has not caught up with that
		// write yet: keep it rather than read (and report) again.
		w.status.LastRun = last.LastRun.DeepCopy()
		w.status.Source = last.Source.DeepCopy()
		return nil
	}
	j := c.cachedJob(w, rec.JobName)
	run := runclass.Gone(rec)
	var pod runclass.Pod
	if j != nil {
		var err error
		if pod, err = c.readRunPod(ctx, j); err != nil {
			return err
		}
		run = runclass.Finished(j, pod)
	}
	l := runclass.NewRecord(action, rec, run)
	if j != nil && j.Status.StartTime != nil {
		l.StartTime = ptr.To(metav1.NewTime(j.Status.StartTime.UTC()))
	}
	w.status.LastRun = l
	c.reportRun(ctx, w, j, l, run.Document)
	if action == v1alpha1.JobActionApply && rec.Outcome == v1alpha1.RunSucceeded && run.Result != nil {
		pin(w, run.Result.Image, runclass.DigestOf(pod.ImageID))
	}
	return nil
}

// pin records status.source after a successful apply that ran image, as
// the runner's document names it, whose pod ran digest (O6, A3-70..A3-72):
// only for the image the spec names now, so neither a spec changed since
// nor a document the module image wrote can pin another image; the digest
// is the kubelet's. A machine pins once per image, a cluster or pool on
// each apply (runclass.Repin).
func pin(w *workload, image, digest string) {
	if image == "" || image != w.source.Image {
		return
	}
	if digest == "" {
		w.warn(v1alpha1.EventDigestUnknown, "the apply's pod reported no pullable digest for image %s (loaded on the node, not pulled?): its runs are not pinned", image)
		return
	}
	if src, changed := runclass.Repin(w.kind.name, w.status.Source, image, digest); changed {
		w.status.Source = src
		w.normal(v1alpha1.EventDigestPinned, "image %s pinned to %s (status.source.imageDigest)", image, digest)
	}
}

// reportRun queues the events of a newly recorded run: RunFinished on the
// object and on its Job while it exists, PlanSummary when Terraform
// planned changes (O1, A3-73), JobInterrupted on the object when the run
// was interrupted (O2, A7-13: the condition that says so is replaced as
// soon as the retry starts, in the same pass, so the event is what keeps
// it). lastRunStep calls it once per recorded Job, so each is reported
// once, not on every pass. The words are runclass's, from the redacted
// record alone (X1).
func (c *Controller) reportRun(ctx context.Context, w *workload, j *batchv1.Job, l *v1alpha1.LastRun, doc runclass.Document) {
	typ := corev1.EventTypeWarning
	if l.Outcome == v1alpha1.RunSucceeded {
		typ = corev1.EventTypeNormal
	}
	msg := runclass.Summary(l)
	// Once the status recording the run is written: a pass done again
	// after a failed write reports it once (section 10).
	w.eventOnceWritten(w.robj, typ, v1alpha1.EventRunFinished, "%s", msg)
	if j != nil {
		w.eventOnceWritten(j, typ, v1alpha1.EventRunFinished, "%s", msg)
	}
	if p := runclass.Plan(l.Changes); p != "" {
		w.eventOnceWritten(w.robj, corev1.EventTypeNormal, v1alpha1.EventPlanSummary, "%s Job %s planned %s", l.Operation, l.Job, p)
	}
	if l.Error != nil && l.Error.Kind == v1alpha1.RunErrorInterrupted {
		w.eventOnceWritten(w.robj, corev1.EventTypeWarning, v1alpha1.EventJobInterrupted, "%s Job %s (generation %d, attempt %d) was %s; an interruption is retried at once and not counted as a failure (up to %d in a row)",
			l.Operation, l.Job, l.Generation, l.Attempt, runclass.Headline(l), maxFreeInterruptions)
	}
	klog.FromContext(ctx).Info("Recorded a finished run", "job", l.Job, "operation", l.Operation,
		"outcome", l.Outcome, "steps", len(l.Steps), "resultDocument", doc)
}

// newestRun returns the newest of the recorded runs: the one that
// finished last, the destroy when both finished at once, then the apply
// over a drift check (O7: at most one Job runs, so ties are records
// written at once by an adoption); a restore (O5) that finished after all
// of them (or in the same second).
func newestRun(st *v1alpha1.WorkloadStatus) (v1alpha1.JobAction, *v1alpha1.RunRecord) {
	a, d := st.LastApply, st.LastDestroy
	if r := st.LastRestore; r != nil && after(r, a) && after(r, d) && after(r, st.LastDriftCheck) {
		return v1alpha1.JobActionRestore, r
	}
	switch {
	case d != nil && (a == nil || !d.FinishTime.Before(&a.FinishTime)):
		return v1alpha1.JobActionDestroy, d
	case st.LastPlan != nil && (a == nil || a.FinishTime.Before(&st.LastPlan.FinishTime)) &&
		(st.LastDriftCheck == nil || st.LastDriftCheck.FinishTime.Before(&st.LastPlan.FinishTime)):
		return v1alpha1.JobActionPlan, st.LastPlan // O8
	case st.LastDriftCheck != nil && (a == nil || a.FinishTime.Before(&st.LastDriftCheck.FinishTime)):
		return v1alpha1.JobActionDrift, st.LastDriftCheck
	case a != nil:
		return v1alpha1.JobActionApply, a
	}
	return "", nil
}

// after reports whether r finished no earlier than other (or other is
// nil): records keep whole seconds, and a restore starts only once no
// other Job runs.
func after(r, other *v1alpha1.RunRecord) bool {
	return other == nil || !r.FinishTime.Before(&other.FinishTime)
}

// describes reports whether l is the lastRun of rec's Job: the key is the
// Job's name, which is unique per action, generation and attempt, and a
// recorded Job is never recorded again (T7).
func describes(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord) bool {
	return l != nil && l.Job == rec.JobName
}

// cachedJob returns the finished Job named name of w from the Job cache,
// nil when it is not there (gone) or has not finished.
func (c *Controller) cachedJob(w *workload, name string) *batchv1.Job {
	set, err := c.jobsOf(w)
	if err != nil {
		return nil
	}
	for _, j := range set.all {
		if j.Name == name && jobs.Finished(j) {
			return j
		}
	}
	return nil
}

// readRunPod reads the pod of Job j uncached and keeps its bounded facts
// (B1, B11): pages of at most podPageLimit pods labelled with the Job's
// controller UID, each response within MaxResponseBytes, of which only a
// pod the Job controls counts (a tenant can label its own pods to claim
// the Job), and only when it is the one. A read refused (RBAC) or over its
// budget, or more pages than podPages, is recorded as unread; other
// errors fail the pass, which is retried.
func (c *Controller) readRunPod(ctx context.Context, j *batchv1.Job) (runclass.Pod, error) {
	opts := metav1.ListOptions{LabelSelector: batchv1.ControllerUidLabel + "=" + string(j.UID), Limit: podPageLimit}
	var own []runclass.Pod
	for page := 0; ; page++ {
		if page == podPages {
			klog.FromContext(ctx).Info("Too many pods claim a finished Job; its run is recorded without its result document", "job", klog.KObj(j))
			return runclass.Pod{Unread: true}, nil
		}
		list, err := c.uncached.Kube.CoreV1().Pods(j.Namespace).List(ctx, opts)
		switch {
		case apierrors.IsForbidden(err) || bounded.KindOf(err) != 0:
			klog.FromContext(ctx).Info("Cannot read the pod of a finished Job; its run is recorded without its result document", "job", klog.KObj(j), "err", err)
			return runclass.Pod{Unread: true}, nil
		case err != nil:
			return runclass.Pod{}, fmt.Errorf("reading the pod of Job %s: %w", j.Name, err)
		}
		for i := range list.Items {
			if ref := metav1.GetControllerOfNoCopy(&list.Items[i]); ref != nil && ref.UID == j.UID {
				own = append(own, runclass.FromPod(&list.Items[i], jobs.ContainerName))
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	if len(own) != 1 {
		return runclass.Pod{Claims: len(own)}, nil
	}
	return own[0], nil
}
