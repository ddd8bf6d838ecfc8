package workload

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/trim"
)

// waitRequeue is how soon a deletion that waits for its identity (V2) is
// looked at again even if no event arrives.
const waitRequeue = time.Minute

// sync reconciles one object of kind k. The path of a key, top to bottom:
//
//  1. take one snapshot of the status;
//  2. the pass: syncNormal (credentialStep in credentials.go, then
//     applyStep in apply.go) or syncDeleting (deleting.go); they set
//     conditions and queue events on w, and write mirrors and Jobs; then
//     lastRunStep (lastrun.go) records the newest recorded run's result
//     in status.lastRun, once per Job (O1), and driftCondition
//     (drift.go) DriftDetected from a drift check's (O7);
//  3. summarize Ready, emit the events of what changed (emitEvents, the one
//     event point), write the status once if it changed;
//  4. a finished deletion releases its mirrors and the finalizer last (V3).
func (c *Controller) sync(ctx context.Context, k *kind, key cache.ObjectName) error {
	logger := klog.FromContext(ctx).WithValues("object", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	w, err := k.get(key)
	if apierrors.IsNotFound(err) {
		// Gone: the garbage collector removes its Jobs, and a mirror whose
		// every owner is gone. The delete handler enqueued it, so this is
		// after any pass of it: forget what was kept about it (B15).
		c.forget(k, key)
		return nil
	}
	if err != nil {
		return err
	}
	// P1: the source read may be one that began after this key was last
	// added, shared with the rest of a resync pass.
	w.since = c.queues[k.name].AddedAt(key)
	deleting := w.obj.GetDeletionTimestamp() != nil
	if deleting && !hasFinalizer(w) {
		return nil
	}
	before := w.status.DeepCopy()
	c.resolveContract(w)
	c.reportPaused(w)
	var release bool
	var passErr error
	if deleting {
		release, passErr = c.syncDeleting(ctx, w)
	} else {
		w, passErr = c.syncNormal(ctx, w)
	}
	if passErr == nil && !release {
		// K11: the block-move mark goes once no Job starts or runs.
		w, passErr = c.releaseMove(ctx, w)
	}
	c.settleSlot(w, passErr) // O4: a Job no longer due stops waiting
	// O1: status.lastRun of the newest recorded run, read once per Job.
	passErr = errors.Join(passErr, c.lastRunStep(ctx, w))
	if !release {
		// O5: a new serial a failed apply or destroy, or a drift check,
		// wrote; once per recorded Job (a successful apply's is read by
		// outputsStep).
		passErr = errors.Join(passErr, c.backupStep(ctx, w))
	}
	driftCondition(w, c.clock.Now()) // O7: DriftDetected from a drift run
	summarize(w, c.clock.Now())
	c.emitEvents(w, before)
	c.deleteRunSecrets(ctx, w, before)
	recorded := w.recorded
	w, statusErr := c.writeStatus(ctx, w, before)
	if statusErr == nil {
		c.emit(recorded)
	}
	if err := errors.Join(passErr, statusErr); err != nil || !release {
		return err
	}
	return c.release(ctx, w)
}

// syncNormal is the pass of a non-deleting object: the credential step on
// every pass (M6), the Cluster API dependencies and inputs (K2-K6,
// contract.go), then the apply Job (J1), then the drift check (O7,
// drift.go), then the outputs of a new
// successful apply (T4, outputs.go), then the Cluster API fields and
// status from them (T5, K7, capi.go), then InputsApplied (K1, K6,
// contract.go). It returns the object as stored
// when it had to update it (the finalizer, the Cluster API fields).
func (c *Controller) syncNormal(ctx context.Context, w *workload) (*workload, error) {
	creds, err := c.credentialStep(ctx, w)
	if err != nil {
		return w, err
	}
	if err := c.dependencyStep(ctx, w); err != nil {
		return w, err
	}
	// O5: a captf.io/restore-state value not acted on yet, before the
	// apply (upstream's priority: restore, destroy, apply, ...).
	if w, err = c.restoreStep(ctx, w, creds); err != nil {
		return w, err
	}
	if w, err = c.applyStep(ctx, w, creds); err != nil {
		return w, err
	}
	// O8: the plans' phases when no gated apply decided them.
	if err := c.planStep(ctx, w); err != nil {
		return w, err
	}
	// O7: a drift check once the generation is applied and idle.
	if w, err = c.driftStep(ctx, w, creds); err != nil {
		return w, err
	}
	// T5: a standalone object is provisioned by its recorded success,
	// whatever its outputs read gives.
	latchProvisioned(w, contract.Outputs{})
	if err := c.outputsStep(ctx, w); err != nil {
		return w, err
	}
	if w, err = c.contractOutputsStep(ctx, w); err != nil {
		return w, err
	}
	// K1, K6 (upstream A1-171): last, once provisioned is latched, so a
	// machine provisioned on this pass is already reported as pinned.
	reportInputsApplied(w, c.clock.Now())
	return w, nil
}

// release ends a deletion (V3): the object's owner references leave its
// mirrors (the last one deletes the mirror), then the finalizer goes.
func (c *Controller) release(ctx context.Context, w *workload) error {
	if err := c.releaseMirrors(ctx, w, func(string) bool { return true }); err != nil {
		return err
	}
	c.emitEvents(w, w.status) // the MirrorRemoved events of the release
	if _, err := c.setFinalizer(ctx, w, false); err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Removed finalizer", "finalizer", v1alpha1.FinalizerDestroy)
	return nil
}

// writeStatus writes w's status when it differs from before or from the
// last write (S3-style: no write on an unchanged pass) and returns the
// object as stored.
func (c *Controller) writeStatus(ctx context.Context, w *workload, before *v1alpha1.WorkloadStatus) (*workload, error) {
	key, uid := w.key(), w.obj.GetUID()
	if !c.written.NeedsWrite(key, uid, *before, *w.status) {
		return w, nil
	}
	var last *v1alpha1.WorkloadStatus
	if l, ok := c.written.Last(key, uid); ok {
		last = &l
	}
	stored, err := w.kind.updateStatus(ctx, w)
	if err != nil {
		return w, fmt.Errorf("updating status: %w", err)
	}
	record := stored.status.DeepCopy()
	// One copy of the strings every object's status repeats (issue 25).
	trim.InternStatus(record)
	c.written.Record(key, uid, stored.obj.GetResourceVersion(), *record, loop.Shown(w.kind.informer.GetStore(), key))
	// T7: a run counts once, when the write that records it succeeds.
	countRecorded(stored.status, before, last)
	countRestores(stored.status, before, last) // O5
	return stored, nil
}

// forget drops what the controller keeps about kind k's object key, which
// is gone (SPEC B15): its status record, its queue stamps and its backoff.
func (c *Controller) forget(k *kind, key cache.ObjectName) {
	c.written.Forget(key)
	c.runSecretsGone.set(k.name, key, nil)
	if q, ok := c.queues[k.name]; ok {
		q.Drop(key)
	}
}

// hasFinalizer reports whether w carries captf.io/destroy.
func hasFinalizer(w *workload) bool {
	return slices.Contains(w.obj.GetFinalizers(), v1alpha1.FinalizerDestroy)
}

// setFinalizer adds or removes captf.io/destroy and returns the stored
// object, carrying over the status and events computed so far on this pass.
func (c *Controller) setFinalizer(ctx context.Context, w *workload, present bool) (*workload, error) {
	if hasFinalizer(w) == present {
		return w, nil
	}
	return c.updateMeta(ctx, w, "finalizers", func() { setFinalizerOn(w, present) })
}

// setFinalizerOn adds or removes captf.io/destroy on w's object (no write).
func setFinalizerOn(w *workload, present bool) {
	fs := slices.DeleteFunc(slices.Clone(w.obj.GetFinalizers()), func(f string) bool { return f == v1alpha1.FinalizerDestroy })
	if present {
		fs = append(fs, v1alpha1.FinalizerDestroy)
	}
	w.obj.SetFinalizers(fs)
}

// updateMeta applies mutate to w's object (its finalizers and the
// annotations the manager owns), writes what mutate changed and returns
// the stored object, carrying over the status and events computed so far
// on this pass. The write is a merge patch of the changed fields alone,
// with w's resourceVersion as a precondition (patch.go: w is a trimmed
// cached copy, B12).
func (c *Controller) updateMeta(ctx context.Context, w *workload, what string, mutate func()) (*workload, error) {
	status := w.status.DeepCopy()
	rv := w.obj.GetResourceVersion()
	finalizers, annotations := slices.Clone(w.obj.GetFinalizers()), maps.Clone(w.obj.GetAnnotations())
	mutate()
	patch, err := metaPatch(rv, finalizers, w.obj.GetFinalizers(), annotations, w.obj.GetAnnotations())
	if err != nil {
		return w, err
	}
	stored, err := w.kind.patch(ctx, w, patch)
	if err != nil {
		return w, fmt.Errorf("updating %s: %w", what, err)
	}
	return keepPass(stored, w, status), nil
}

// keepPass carries what w's pass computed over to stored, the object a
// metadata or spec write of the pass returned, whose status is as it was
// before the pass: status, the events queued (for now and for after the
// status write) and the contract state.
func keepPass(stored, w *workload, status *v1alpha1.WorkloadStatus) *workload {
	*stored.status = *status
	stored.events, stored.recorded, stored.contract = w.events, w.recorded, w.contract
	return stored
}
