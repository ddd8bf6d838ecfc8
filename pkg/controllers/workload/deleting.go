package workload

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/slots"
)

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
// destroy Job, retry a failed one after its backoff or on captf.io/retry
// (T7), and once it succeeds report release, so that sync cleans up (V3)
// and removes the finalizer after writing the status. A destroy whose
// identity cannot be used waits (V2) unless the object carries the abandon
// annotation with its UID.
func (c *Controller) syncDeleting(ctx context.Context, w *workload) (release bool, _ error) {
	now := c.clock.Now()
	if uid := w.obj.GetUID(); w.obj.GetAnnotations()[v1alpha1.AnnotationAbandonInfrastructure] == string(uid) {
		suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
		w.warn(v1alpha1.EventInfrastructureAbandoned, "Annotation %s names this object's UID: removing finalizer %s without a destroy Job; its infrastructure is left as it is, "+
			"and its Terraform state stays in Secret %s/%s (lock Lease %s)",
			v1alpha1.AnnotationAbandonInfrastructure, v1alpha1.FinalizerDestroy, w.obj.GetNamespace(), jobs.StateSecretName(suffix), jobs.StateLeaseName(suffix))
		// The state stays: not collected with the object.
		return true, c.disownState(ctx, w)
	}
	if deletionForMove(w) {
		// K11: clusterctl move deletes the source copy of what it moved; the
		// infrastructure now belongs to the target's copy. The state is
		// kept (clusterctl deletes the copy it moved itself).
		w.normal(v1alpha1.EventMovedAway, "Deleted by clusterctl move (annotation %s): no destroy Job; the infrastructure and its state belong to the moved copy",
			v1alpha1.AnnotationDeleteForMove)
		return true, c.disownState(ctx, w)
	}
	if !v1alpha1.StatePolicyOf(w.robj).DeletionPolicy.Destroys() {
		// O5: no destroy; the state and its backups stay (retain.go).
		return c.retainDeletion(ctx, w)
	}
	cached, err := c.jobsOf(w)
	if err != nil {
		return false, err
	}
	if suspendedRun(cached.running) {
		// K5: a start interrupted between the Job and its run Secret.
		if err := c.resumeRun(ctx, w, cached.running); err != nil {
			return false, err
		}
	}
	// O2: how the newest runs ended, before deciding from them; a running
	// Job whose image cannot be pulled is ended and recorded.
	if err := c.classifyRuns(ctx, w, cached, now, v1alpha1.JobActionApply, v1alpha1.JobActionDestroy); err != nil {
		return false, err
	}
	cached = c.pullStep(ctx, w, cached, now)
	set := cached
	if set.running == nil && set.find(v1alpha1.JobActionDestroy, -1) == nil && w.status.LastDestroy == nil {
		// The next step starts a destroy Job or drops the finalizer:
		// confirm from the API server, not the cache.
		if set, err = c.freshJobs(ctx, w); err != nil {
			return false, err
		}
	}
	release, err = c.destroyStep(ctx, w, set, now)
	if release || err != nil {
		return release, err
	}
	// T7: a destroy retried for days leaves no more than keepFinished
	// failed Jobs behind.
	return false, c.prune(ctx, w, cached)
}

// destroyStep decides the deletion from set and the records (T7).
func (c *Controller) destroyStep(ctx context.Context, w *workload, set jobSet, now time.Time) (release bool, _ error) {
	recordRuns(w, set, v1alpha1.JobActionApply, now)
	rec := recordRuns(w, set, v1alpha1.JobActionDestroy, now)
	gen := w.obj.GetGeneration()
	switch {
	case set.find(v1alpha1.JobActionApply, -1) == nil && w.status.LastJob == nil && w.status.LastApply == nil:
		// The finalizer was set but no apply Job was ever created: nothing
		// to destroy.
		return true, nil
	case set.running != nil && jobs.ActionOf(set.running) != v1alpha1.JobActionDestroy && jobs.ActionOf(set.running) != "":
		// An apply, a drift check (O7) or a restore (O5) ends before the
		// destroy starts.
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
			"waiting for %s Job %s to end before destroying", jobs.ActionOf(set.running), set.running.Name)
		return false, nil
	case endedRun(set.running, rec):
		// O2: ended for its image; its deletion completes first (J1).
		c.reportRecord(w, v1alpha1.JobActionDestroy, rec, "", retryAt(rec, countRun(w, set, rec)), now)
		return false, nil
	case set.running != nil:
		c.reportJob(w, set.running, now)
		return false, nil
	}
	retry, retryNew := retryRequested(w, set)
	plan := runPlan{attempt: nextAttempt(w, set, v1alpha1.JobActionDestroy, gen)}
	if retryNew {
		plan.retry = retry
	}
	if rec != nil {
		if rec.Outcome == v1alpha1.RunSucceeded {
			c.reportRecord(w, v1alpha1.JobActionDestroy, rec, "", time.Time{}, now)
			// T2: the state goes with the infrastructure, before the finalizer.
			return true, c.deleteState(ctx, w)
		}
		// A failed destroy is retried after its backoff; a new generation
		// restarts the count and runs at once, and so does an interrupted
		// destroy (O2).
		count := countRun(w, set, rec)
		plan.interruptions = nextInterruptions(rec, count, gen)
		next := destroyRetryAt(rec, count, gen, now)
		c.reportRecord(w, v1alpha1.JobActionDestroy, rec, detailOf(set, rec), next, now)
		if !retryNew && now.Before(next) {
			c.requeueAt(w, next, now)
			return false, nil
		}
		// A retry runs the recorded generation again; a new generation's
		// first destroy is not one.
		switch {
		case rec.Generation != gen:
		case retryNew:
			plan.trigger = metrics.TriggerAnnotation
		case count.interrupted:
			plan.trigger = metrics.TriggerInterrupt
		default:
			plan.trigger = metrics.TriggerBackoff
		}
	}
	// K4: a cluster's destroy waits for the machines and pools of the
	// cluster; their deletion enqueues it again.
	if blocked, err := c.deletionBlocked(w); err != nil || blocked {
		return false, err
	}
	if !set.fresh {
		// O4: a Job beyond a cap waits, before any request.
		if !c.slotFree(w, slots.Destroy, v1alpha1.JobActionDestroy, now) {
			return false, nil
		}
		// About to start a Job: confirm from the API server, not the cache
		// (J1: one Job at a time).
		fresh, err := c.freshJobs(ctx, w)
		if err != nil {
			return false, err
		}
		return c.destroyStep(ctx, w, fresh, now)
	}
	return false, c.startDestroy(ctx, w, set, plan)
}

// destroyRetryAt is when the next destroy after the failed rec starts: now
// for a new generation, at once (zero) after an interruption (O2), else
// after its backoff (T7).
func destroyRetryAt(rec *v1alpha1.RunRecord, count runCount, gen int64, now time.Time) time.Time {
	switch {
	case rec.Generation != gen:
		return now
	case count.interrupted:
		return time.Time{}
	}
	return retryAt(rec, count)
}

// startDestroy creates the destroy Job once the credentials are current
// (M6, J8); without them the deletion waits (V2), or, in a terminating
// namespace where nothing can be created, reports that only the operator
// can release the object. set is w's fresh Job set (destroyStep confirmed
// it from the API server).
func (c *Controller) startDestroy(ctx context.Context, w *workload, set jobSet, plan runPlan) error {
	now := c.clock.Now()
	creds, err := c.credentialStep(ctx, w)
	if err != nil {
		return err
	}
	switch {
	case !creds.ready && c.namespaceTerminating(w.obj.GetNamespace()):
		c.destroyImpossible(w, now)
		return nil
	case !creds.ready:
		c.waitForCredentials(w, now)
		return nil
	case paused(w):
		// T5, T2: a paused object gets no destroy Job either.
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
			"the destroy Job waits: %s, or set annotation %s=%s to release the object without a destroy",
			pauseNote(w), v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
		return nil
	case w.source.Image == "":
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed,
			"spec.source.image is not set: no destroy Job can run; set it, or set annotation %s=%s", v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
		return nil
	}
	if err := jobs.ValidateVariables(v1alpha1.VariablesOf(w.robj)); err != nil {
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonInvalidVariables,
			"%v: fix spec.variables and the destroy Job starts (SPEC T3), or set annotation %s=%s", err, v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
		return nil
	}
	// O3: a lock a finished Job left is released; anyone else's waits.
	if ok, err := c.lockStep(ctx, w, set, v1alpha1.JobActionDestroy); err != nil || !ok {
		return err
	}
	// O4: the slot is reserved last, just before the writes of a start.
	if !c.takeSlot(w, slots.Destroy, v1alpha1.JobActionDestroy, now) {
		return nil
	}
	// K11: clusterctl move waits while the destroy runs.
	stored, err := c.prepareStart(ctx, w)
	if err != nil {
		return err
	}
	*w = *stored
	j, err := c.createJob(ctx, w, v1alpha1.JobActionDestroy, creds, plan)
	c.releaseSlot(w, j, err)
	if err != nil {
		return err
	}
	if j != nil {
		c.reportJob(w, j, now)
	}
	return nil
}

// waitForCredentials reports a destroy that waits for its credentials (V2):
// the finalizer stays; allowing the namespace again or the abandon
// annotation releases it. It is looked at again after waitRequeue.
func (c *Controller) waitForCredentials(w *workload, now time.Time) {
	msg := "the destroy Job waits for credentials"
	if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionIdentityAllowed)); cond != nil && cond.Status != metav1.ConditionTrue {
		msg += ": " + cond.Message
	} else if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionCredentialsMirrored)); cond != nil && cond.Status != metav1.ConditionTrue {
		msg += ": " + cond.Message
	}
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed,
		"%s; allow the namespace again, or set annotation %s=%s to remove the finalizer without a destroy", msg, v1alpha1.AnnotationAbandonInfrastructure, w.obj.GetUID())
	c.queues[w.kind.name].AddAfter(w.key(), waitRequeue)
}
