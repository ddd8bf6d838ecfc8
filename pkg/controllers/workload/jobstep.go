package workload

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// jobSet is what the Job cache holds for one object.
type jobSet struct {
	all []*batchv1.Job
	// running is a Job that has not finished, if any (at most one runs, J1).
	// A Job whose outcome is decided (FailureTarget, SuccessCriteriaMet) may
	// still have a pod releasing Terraform's state lock; it runs until
	// Complete or Failed.
	running *batchv1.Job
	// latest is the most recently created Job.
	latest *batchv1.Job
}

func (c *Controller) jobsOf(w *workload) (jobSet, error) {
	all, err := index.JobsOf(c.jobIndexer, w.obj.GetUID())
	if err != nil {
		return jobSet{}, err
	}
	return newJobSet(all), nil
}

func newJobSet(all []*batchv1.Job) jobSet {
	s := jobSet{all: all}
	for _, j := range all {
		if !jobs.Finished(j) {
			s.running = j
		}
		if s.latest == nil || newer(j, s.latest) {
			s.latest = j
		}
	}
	return s
}

// freshJobs lists the object's Jobs from the API server, not the cache. The
// Job cache can lag a Job this manager just created, so every decision that
// would start a Job or drop the finalizer is confirmed from a fresh list
// first (at most one Job runs per object, J1; no finalizer goes before a
// destroy, J8). These decisions are rare, so the list is cheap overall.
func (c *Controller) freshJobs(ctx context.Context, w *workload) (jobSet, error) {
	list, err := c.kube.BatchV1().Jobs(w.obj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
	if err != nil {
		return jobSet{}, fmt.Errorf("listing Jobs: %w", err)
	}
	var mine []*batchv1.Job
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == w.obj.GetUID() {
			mine = append(mine, &list.Items[i])
		}
	}
	return newJobSet(mine), nil
}

// newer orders Jobs by creation, then by generation, then by name.
func newer(a, b *batchv1.Job) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	ga, _ := jobs.GenerationOf(a)
	gb, _ := jobs.GenerationOf(b)
	if ga != gb {
		return ga > gb
	}
	return a.Name > b.Name
}

// find returns the Job with action for generation (any generation when < 0).
func (s jobSet) find(action v1alpha1.JobAction, generation int64) *batchv1.Job {
	var found *batchv1.Job
	for _, j := range s.all {
		if jobs.ActionOf(j) != action {
			continue
		}
		if g, _ := jobs.GenerationOf(j); generation >= 0 && g != generation {
			continue
		}
		if found == nil || newer(j, found) {
			found = j
		}
	}
	return found
}

// jobCondition sets ApplyJobSucceeded from a Job's outcome (J7).
func (c *Controller) jobCondition(w *workload, j *batchv1.Job, now time.Time) {
	out, msg := jobs.Status(j)
	action := jobs.ActionOf(j)
	gen, _ := jobs.GenerationOf(j)
	switch out {
	case jobs.Running:
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning, "%s Job %s (generation %d) is running", action, j.Name, gen)
	case jobs.Succeeded:
		reason := v1alpha1.ReasonApplySucceeded
		if action == v1alpha1.JobActionDestroy {
			reason = v1alpha1.ReasonDestroySucceeded
		}
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, reason, "%s Job %s (generation %d) succeeded", action, j.Name, gen)
	case jobs.DeadlineExceeded:
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonJobDeadlineExceeded,
			"%s Job %s (generation %d) ran past spec.jobs.activeDeadlineSeconds: %s; delete the Job to retry", action, j.Name, gen, msg)
	default:
		reason := v1alpha1.ReasonApplyFailed
		if action == v1alpha1.JobActionDestroy {
			reason = v1alpha1.ReasonDestroyFailed
		}
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, reason,
			"%s Job %s (generation %d) failed: %s; see its logs, and delete the Job to retry", action, j.Name, gen, msg)
	}
}

// applyStep starts the apply Job for an unapplied generation once
// credentials are ready (J1), keeps the finalizer on an object that has
// started one (J8), and reports ApplyJobSucceeded (J7). It returns the
// object as stored when it had to update it.
func (c *Controller) applyStep(ctx context.Context, k *kind, w *workload, creds credentialResult) (*workload, error) {
	now := c.clock.Now()
	set, err := c.jobsOf(w)
	if err != nil {
		return w, err
	}
	if start, _ := c.reportApply(w, set, creds, now); !start {
		return c.keepFinalizer(ctx, k, w, set)
	}
	// About to start a Job: confirm from the API server, not the cache.
	if set, err = c.freshJobs(ctx, w); err != nil {
		return w, err
	}
	start, reapply := c.reportApply(w, set, creds, now)
	if !start {
		return c.keepFinalizer(ctx, k, w, set)
	}
	// The finalizer goes first: an object whose apply Job exists must never
	// be deleted without a destroy.
	if w, err = c.setFinalizer(ctx, k, w, true); err != nil {
		return w, err
	}
	j, err := c.createJob(ctx, w, v1alpha1.JobActionApply, creds, reapply)
	if err != nil {
		return w, err
	}
	if j != nil {
		c.jobCondition(w, j, now)
	}
	return w, nil
}

// keepFinalizer sets the finalizer on an object that has an apply Job:
// infrastructure may exist, so its deletion must destroy it (J8).
func (c *Controller) keepFinalizer(ctx context.Context, k *kind, w *workload, set jobSet) (*workload, error) {
	if set.find(v1alpha1.JobActionApply, -1) == nil {
		return w, nil
	}
	return c.setFinalizer(ctx, k, w, true)
}

// recordLatest points status.lastJob at the newest Job seen, so it heals
// after a pass that created a Job but failed to write status.
func recordLatest(w *workload, set jobSet) {
	if set.latest == nil {
		return
	}
	gen, _ := jobs.GenerationOf(set.latest)
	w.status.LastJob = &v1alpha1.JobReference{Name: set.latest.Name, Action: jobs.ActionOf(set.latest), Generation: gen}
}

// reportApply sets ApplyJobSucceeded from set and reports whether a new
// apply Job should start: the generation has no apply Job yet, none runs,
// credentials are ready and there is an image (J1); or the object re-applies
// on rotation (C6), in which case reapply numbers the new Job.
func (c *Controller) reportApply(w *workload, set jobSet, creds credentialResult, now time.Time) (start bool, reapply int) {
	recordLatest(w, set)
	gen := w.obj.GetGeneration()
	current := set.find(v1alpha1.JobActionApply, gen)
	switch {
	case current != nil:
		c.jobCondition(w, current, now)
		if n := reapplyNumber(w, set, current, creds); n > 0 {
			return true, n
		}
		return false, 0
	case set.running != nil:
		g, _ := jobs.GenerationOf(set.running)
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
			"%s Job %s (generation %d) is running; generation %d is applied after it ends", jobs.ActionOf(set.running), set.running.Name, g, gen)
		return false, 0
	case !creds.ready:
		if set.latest != nil {
			c.jobCondition(w, set.latest, now)
		} else {
			setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
				"no apply Job until IdentityAllowed and CredentialsMirrored are True")
		}
		return false, 0
	case w.source.Image == "":
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
			"spec.source.image is not set: no Job can run")
		return false, 0
	}
	return true, 0
}

// reapplyNumber implements C6: when the object opts in
// (spec.jobs.reapplyOnRotation), no Job runs, credentials are ready, and
// newest, the newest apply Job of this generation, started with another
// source hash than the mirror's now, it returns the number of the next
// re-apply Job (one per rotation: that Job records the new hash); else 0.
// Never called during a deletion.
func reapplyNumber(w *workload, set jobSet, newest *batchv1.Job, creds credentialResult) int {
	if !w.jobs.ReapplyOnRotation || !creds.ready || creds.hash == "" || set.running != nil || w.source.Image == "" {
		return 0
	}
	gen := w.obj.GetGeneration()
	if newest == nil || !jobs.Finished(newest) {
		return 0
	}
	if h := jobs.SourceHashOf(newest); h == "" || h == creds.hash {
		return 0
	}
	// Number after the highest so far: a deleted earlier Job must not make
	// the next number collide with one that exists.
	n := 0
	for _, j := range set.all {
		if g, _ := jobs.GenerationOf(j); jobs.ActionOf(j) == v1alpha1.JobActionApply && g == gen {
			n = max(n, jobs.ReapplyOf(j))
		}
	}
	return n + 1
}

// createJob creates the Job for action at w's generation. An existing Job of
// that name (a previous pass's create not yet in the cache) counts as
// created. It returns nil without error when the namespace is terminating.
func (c *Controller) createJob(ctx context.Context, w *workload, action v1alpha1.JobAction, creds credentialResult, reapply int) (*batchv1.Job, error) {
	job := jobs.Build(jobs.Params{
		OwnerAPIVersion:       v1alpha1.SchemeGroupVersion.String(),
		OwnerKind:             w.kind,
		OwnerName:             w.obj.GetName(),
		OwnerUID:              w.obj.GetUID(),
		Namespace:             w.obj.GetNamespace(),
		Generation:            w.obj.GetGeneration(),
		Action:                action,
		ModuleImage:           w.source.Image,
		RunnerImage:           c.opts.RunnerImage,
		MirrorName:            creds.mirror,
		Env:                   w.jobs.Env,
		ActiveDeadlineSeconds: ptr.Deref(w.jobs.ActiveDeadlineSeconds, 0),
		SourceHash:            creds.hash,
		Identity:              creds.identity,
		Reapply:               reapply,
	})
	created, err := c.kube.BatchV1().Jobs(job.Namespace).Create(ctx, job, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		c.echoes.wrote(cache.ObjectName{Namespace: created.Namespace, Name: created.Name}, created.ResourceVersion)
		klog.FromContext(ctx).Info("Created Job", "job", klog.KObj(created), "action", action, "generation", w.obj.GetGeneration(), "reapply", reapply)
	case apierrors.IsAlreadyExists(err):
		created = job
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		if action == v1alpha1.JobActionDestroy {
			c.destroyImpossible(w, c.clock.Now())
		} else {
			setCondition(w, c.clock.Now(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed,
				"namespace %s is terminating: no apply Job can be created in it", w.obj.GetNamespace())
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("creating %s Job %s: %w", action, job.Name, err)
	}
	w.status.LastJob = &v1alpha1.JobReference{Name: job.Name, Action: action, Generation: w.obj.GetGeneration()}
	return created, nil
}

// namespaceTerminating reports whether namespace is being deleted.
func (c *Controller) namespaceTerminating(namespace string) bool {
	n, err := c.namespaces.Get(namespace)
	return err == nil && (n.DeletionTimestamp != nil || n.Status.Phase == corev1.NamespaceTerminating)
}

// destroyImpossible reports a deletion in a terminating namespace whose
// destroy Job cannot be created. When the object's last Job was a destroy
// that the namespace's deletion has taken with it, its outcome is unknown:
// the message says so rather than guess.
func (c *Controller) destroyImpossible(w *workload, now time.Time) {
	ns, uid := w.obj.GetNamespace(), w.obj.GetUID()
	if last := w.status.LastJob; last != nil && last.Action == v1alpha1.JobActionDestroy {
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed,
			"namespace %s is terminating and took destroy Job %s with it, so its outcome is unknown and no new destroy Job can be created here; "+
				"if it succeeded (see the provider), set annotation %s=%s to release the object",
			ns, last.Name, v1alpha1.AnnotationAbandonInfrastructure, uid)
		return
	}
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed,
		"namespace %s is terminating: no destroy Job can be created in it; set annotation %s=%s to release the object without a destroy (its infrastructure is left as it is)",
		ns, v1alpha1.AnnotationAbandonInfrastructure, uid)
}

// syncDeleting runs the deletion flow of an object with the finalizer (J8):
// wait for a running apply, make the mirror current (M6), create the
// destroy Job, and once it succeeds clean up (V3) and remove the finalizer.
// A destroy whose identity cannot be used waits (V2) unless the object
// carries the abandon annotation with its UID.
func (c *Controller) syncDeleting(ctx context.Context, k *kind, w *workload) error {
	if !hasFinalizer(w) {
		return nil
	}
	logger := klog.FromContext(ctx)
	now := c.clock.Now()
	before := w.status.DeepCopy()
	finish := func() error {
		summarize(w, now)
		var err error
		w, err = c.writeStatus(ctx, k, w, before)
		return err
	}
	release := func() error {
		if err := c.releaseMirrors(ctx, w, func(string) bool { return true }); err != nil {
			return err
		}
		if _, err := c.setFinalizer(ctx, k, w, false); err != nil {
			return err
		}
		logger.Info("Removed finalizer", "finalizer", v1alpha1.FinalizerDestroy)
		return nil
	}

	if uid := w.obj.GetUID(); w.obj.GetAnnotations()[v1alpha1.AnnotationAbandonInfrastructure] == string(uid) {
		c.warn(w, v1alpha1.EventInfrastructureAbandoned, "Annotation %s names this object's UID: removing finalizer %s without a destroy Job; its infrastructure is left as it is",
			v1alpha1.AnnotationAbandonInfrastructure, v1alpha1.FinalizerDestroy)
		return release()
	}
	set, err := c.jobsOf(w)
	if err != nil {
		return err
	}
	if set.running == nil && set.find(v1alpha1.JobActionDestroy, -1) == nil {
		// The next step starts a destroy Job or drops the finalizer:
		// confirm from the API server, not the cache.
		if set, err = c.freshJobs(ctx, w); err != nil {
			return err
		}
	}
	if set.find(v1alpha1.JobActionApply, -1) == nil && w.status.LastJob == nil {
		// The finalizer was set but no apply Job was ever created: nothing
		// to destroy.
		return release()
	}
	if set.running != nil && jobs.ActionOf(set.running) == v1alpha1.JobActionApply {
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
			"waiting for apply Job %s to end before destroying", set.running.Name)
		return finish()
	}
	destroy := set.find(v1alpha1.JobActionDestroy, -1)
	if destroy == nil {
		creds, err := c.credentialStep(ctx, w)
		if err != nil {
			_ = finish()
			return err
		}
		if !creds.ready && c.namespaceTerminating(w.obj.GetNamespace()) {
			// Nothing can be created in a terminating namespace: no mirror,
			// no destroy Job. Only the operator can release the object.
			c.destroyImpossible(w, now)
			return finish()
		}
		if !creds.ready {
			// V2: the finalizer stays; allowing the namespace again or the
			// abandon annotation releases it.
			msg := "the destroy Job waits for credentials"
			if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionIdentityAllowed)); cond != nil && cond.Status != metav1.ConditionTrue {
				msg += ": " + cond.Message
			} else if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionCredentialsMirrored)); cond != nil && cond.Status != metav1.ConditionTrue {
				msg += ": " + cond.Message
			}
			setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed,
				"%s; allow the namespace again, or set annotation %s=%s to remove the finalizer without a destroy", msg, v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
			c.queues[k.name].AddAfter(w.key(), waitRequeue)
			return finish()
		}
		if w.source.Image == "" {
			setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed,
				"spec.source.image is not set: no destroy Job can run; set it, or set annotation %s=%s", v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
			return finish()
		}
		j, err := c.createJob(ctx, w, v1alpha1.JobActionDestroy, creds, 0)
		if err != nil {
			_ = finish()
			return err
		}
		if j != nil {
			c.jobCondition(w, j, now)
		}
		return finish()
	}
	c.jobCondition(w, destroy, now)
	if out, _ := jobs.Status(destroy); out != jobs.Succeeded {
		return finish()
	}
	// V3: cleanup, then the finalizer last.
	if err := finish(); err != nil {
		return err
	}
	return release()
}
