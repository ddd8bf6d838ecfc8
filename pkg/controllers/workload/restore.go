package workload

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/slots"
	"github.com/captf/captf/pkg/statebackup"
)

// SPEC O5 in the reconcile: the annotation captf.io/restore-state=<serial>
// runs a restore Job (`captf runner restore`) once per value.
// statebackup.DecideRestore decides from the annotation, the value last
// acted on (status.observedRestore), the restore Jobs that exist, the kept
// backups (status.stateBackups) and whether a Job runs; restoreStep
// gathers and writes. A value acted on (a Job started, whatever its
// outcome, or refused) is not acted on again while the annotation keeps
// it. The restore Job waits for any running Job of the object and takes a
// slot of the Apply class (O4): an operator's request, like a spec change,
// behind destroys. A restore does not make an apply due: the next apply
// runs when it would anyway, against the restored state
// (docs/operator-guide.md).

// restoreStep records finished restore Jobs (status.lastRestore, the
// StateRestored or StateRestoreFailed event, RestoreJobSucceeded) and
// starts the restore Job a new captf.io/restore-state value asks for, or
// refuses it. It returns the object as stored when it had to update it.
func (c *Controller) restoreStep(ctx context.Context, w *workload, creds credentialResult) (*workload, error) {
	now := c.clock.Now()
	set, err := c.jobsOf(w)
	if err != nil {
		return w, err
	}
	c.recordRestores(w, set, now)
	d := statebackup.DecideRestore(restoreInput(w, set))
	switch {
	case d.Reason == statebackup.RestoreDone:
		w.status.ObservedRestore = restoreToken(w) // heals a lost status write
		return w, nil
	case d.Refused:
		refuseRestore(w, d, now)
		return w, nil
	case d.Reason == statebackup.RestoreNotApplied:
		setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreWaiting,
			"annotation %s waits for the first apply to finish: the object has no state backups yet", v1alpha1.AnnotationRestoreState)
		return w, nil
	case d.Reason == statebackup.RestoreBusy:
		setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreWaiting,
			"the restore of state serial %d waits for %s Job %s to end", d.Serial, jobs.ActionOf(set.running), set.running.Name)
		return w, nil
	case !d.Due:
		return w, nil
	}
	if why := restoreBlocked(w, creds); why != "" {
		setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreWaiting,
			"the restore of state serial %d waits: %s", d.Serial, why)
		return w, nil
	}
	if !c.restoreSlot(w, d.Serial, now, false) {
		return w, nil
	}
	// About to start a Job: confirm from the API server, not the cache.
	if set, err = c.freshJobs(ctx, w); err != nil {
		return w, err
	}
	if d = statebackup.DecideRestore(restoreInput(w, set)); !d.Due {
		return w, nil // the next pass (the Job's event) says why
	}
	if ok, err := c.lockStep(ctx, w, set, v1alpha1.JobActionRestore); err != nil || !ok {
		return w, err
	}
	if !c.restoreSlot(w, d.Serial, now, true) {
		return w, nil
	}
	if w, err = c.prepareStart(ctx, w); err != nil {
		return w, err
	}
	gen := w.obj.GetGeneration()
	plan := runPlan{attempt: nextAttempt(w, set, v1alpha1.JobActionRestore, gen), restore: restoreOf(w, d.Serial)}
	j, err := c.createJob(ctx, w, v1alpha1.JobActionRestore, creds, plan)
	c.releaseSlot(w, j, err)
	if err != nil || j == nil {
		return w, err
	}
	w.status.ObservedRestore = restoreToken(w)
	w.status.LastRestoredSerial = &d.Serial
	setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreRunning,
		"restore Job %s pushes state backup serial %d (%s)", j.Name, d.Serial, plan.restore.Secrets[0])
	klog.FromContext(ctx).Info("Started a state restore", "job", klog.KObj(j), "serial", d.Serial)
	return w, nil
}

// restoreInput gathers what statebackup.DecideRestore decides from.
func restoreInput(w *workload, set jobSet) statebackup.RestoreInput {
	v, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationRestoreState]
	in := statebackup.RestoreInput{Value: v, Set: ok, Observed: w.status.ObservedRestore, Token: retryToken(v), Busy: set.running != nil,
		Applied: w.status.LastApply != nil}
	for _, j := range set.all {
		// An apply recorded later in this pass (applyStep) counts too.
		in.Applied = in.Applied || (jobs.ActionOf(j) == v1alpha1.JobActionApply && jobs.Finished(j))
		if s, ok := jobs.RestoreSerialOf(j); ok && jobs.ActionOf(j) == v1alpha1.JobActionRestore {
			in.JobSerials = append(in.JobSerials, s)
		}
	}
	for _, b := range w.status.StateBackups {
		in.Kept = append(in.Kept, b.Serial)
	}
	return in
}

// restoreToken is the form of the annotation's value kept in
// status.observedRestore (as captf.io/retry's: hashed past 128 bytes).
func restoreToken(w *workload) string {
	return retryToken(w.obj.GetAnnotations()[v1alpha1.AnnotationRestoreState])
}

// restoreBlocked says why a due restore cannot start yet, "" when it can:
// paused, credentials not ready (init needs the module's providers), no
// image.
func restoreBlocked(w *workload, creds credentialResult) string {
	switch {
	case paused(w):
		return pauseNote(w)
	case !creds.ready:
		return "IdentityAllowed and CredentialsMirrored are not True"
	case w.source.Image == "":
		return "spec.source.image is not set"
	}
	return ""
}

// refuseRestore records a value that names no kept backup as acted on,
// with no Job (SPEC O5): RestoreJobSucceeded False and a Warning event.
func refuseRestore(w *workload, d statebackup.RestoreDecision, now time.Time) {
	w.status.ObservedRestore = restoreToken(w)
	var kept []int64
	for _, b := range w.status.StateBackups {
		kept = append(kept, b.Serial)
	}
	var msg string
	if d.Reason == statebackup.RestoreNotASerial {
		msg = fmt.Sprintf("annotation %s is not a state serial (a decimal number); no restore Job runs; kept backups: %v (status.stateBackups)", v1alpha1.AnnotationRestoreState, kept)
	} else {
		msg = fmt.Sprintf("annotation %s names serial %d, which is not among the kept backups %v (status.stateBackups); no restore Job runs", v1alpha1.AnnotationRestoreState, d.Serial, kept)
	}
	setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRestoreBackupNotFound, "%s", msg)
	w.warn(v1alpha1.EventStateRestoreFailed, "%s", msg)
}

// restoreOf is the backup of serial the restore Job mounts: its Secrets
// by part, as status.stateBackups lists it.
func restoreOf(w *workload, serial int64) *jobs.Restore {
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	r := &jobs.Restore{Serial: serial}
	for _, b := range w.status.StateBackups {
		if b.Serial != serial {
			continue
		}
		for i := 0; i < max(int(b.Parts), 1); i++ {
			r.Secrets = append(r.Secrets, statebackup.PartName(suffix, serial, i))
		}
	}
	return r
}

// restoreSlot asks the Job caps for an Apply-class slot for the restore
// (O4; take: reserve it). A wait is reported on RestoreJobSucceeded, not
// on ApplyJobSucceeded: the apply's record stays what it says.
func (c *Controller) restoreSlot(w *workload, serial int64, now time.Time, take bool) bool {
	ask := slots.Ask[slotKey]{Key: slotKeyOf(w), Class: slots.Apply, Cluster: slotCluster(w)}
	var o slots.Outcome
	if take {
		o = c.slots.pool.Take(ask, now)
	} else {
		o = c.slots.pool.Peek(ask, now)
	}
	if o.Start {
		return true
	}
	c.slots.mu.Lock()
	c.slots.asked[slotKeyOf(w)] = true
	c.slots.mu.Unlock()
	setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForJobSlot,
		"the restore of state serial %d waits for a Job slot (%d at once); it starts when a slot frees, after destroys (waiting since %s)",
		serial, o.Limit, o.Since.UTC().Format(time.RFC3339))
	return false
}

// recordRestores records the newest finished restore Job in
// status.lastRestore and, when it is a Job not recorded before, sets
// RestoreJobSucceeded and queues StateRestored or StateRestoreFailed
// naming the serial. A running restore Job is reported as running.
func (c *Controller) recordRestores(w *workload, set jobSet, now time.Time) {
	before := w.status.LastRestore
	rec := recordRuns(w, set, v1alpha1.JobActionRestore, now)
	if runningRestore(set) {
		serial, _ := jobs.RestoreSerialOf(set.running)
		setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonRestoreRunning,
			"restore Job %s pushes state backup serial %d", set.running.Name, serial)
		return
	}
	if rec == nil || (before != nil && before.JobName == rec.JobName) {
		return
	}
	serial := restoreSerialOf(w, set, rec)
	if rec.Outcome == v1alpha1.RunSucceeded {
		msg := fmt.Sprintf("restore Job %s pushed state backup serial %d back into the backend; the next apply runs against it (a restore starts no apply by itself: set %s to apply now)",
			rec.JobName, serial, v1alpha1.AnnotationRetry)
		setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonStateRestored, "%s", msg)
		w.normal(v1alpha1.EventStateRestored, "%s", msg)
		return
	}
	msg := fmt.Sprintf("restore Job %s of state backup serial %d ended %s; see status.lastRun and its logs; it is not retried for this serial (set %s to another serial)",
		rec.JobName, serial, rec.Outcome, v1alpha1.AnnotationRestoreState)
	setCondition(w, now, v1alpha1.ConditionRestoreJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRestoreFailed, "%s", msg)
	w.warn(v1alpha1.EventStateRestoreFailed, "%s", msg)
}

// restoreSerialOf is the serial rec's Job pushed: its annotation while
// the Job exists, else status.lastRestoredSerial.
func restoreSerialOf(w *workload, set jobSet, rec *v1alpha1.RunRecord) int64 {
	for _, j := range set.all {
		if j.Name == rec.JobName {
			if s, ok := jobs.RestoreSerialOf(j); ok {
				return s
			}
		}
	}
	if w.status.LastRestoredSerial != nil {
		return *w.status.LastRestoredSerial
	}
	return -1
}

// runningRestore reports whether the running Job is a restore Job (O5).
func runningRestore(set jobSet) bool {
	return set.running != nil && jobs.ActionOf(set.running) == v1alpha1.JobActionRestore
}

// countRestores counts in captf_state_restores_total what written, a
// status this process has just stored, records that before (the status
// the write replaced) and last (this process's previous write, nil for
// none) did not: a newly recorded restore Job by its outcome, and a newly
// refused value (SPEC O5, A7-42), as countRecorded does for runs.
func countRestores(written, before, last *v1alpha1.WorkloadStatus) {
	if r := written.LastRestore; r != nil && !sameRun(r, before.LastRestore) && (last == nil || !sameRun(r, last.LastRestore)) {
		result := metrics.RestoreFailed
		if r.Outcome == v1alpha1.RunSucceeded {
			result = metrics.RestoreSucceeded
		}
		metrics.StateRestores.WithLabelValues(result).Inc()
	}
	o := written.ObservedRestore
	if o == "" || o == before.ObservedRestore || (last != nil && o == last.ObservedRestore) {
		return
	}
	if cond := meta.FindStatusCondition(written.Conditions, string(v1alpha1.ConditionRestoreJobSucceeded)); cond != nil && cond.Reason == string(v1alpha1.ReasonRestoreBackupNotFound) {
		metrics.StateRestores.WithLabelValues(metrics.RestoreRefused).Inc()
	}
}
