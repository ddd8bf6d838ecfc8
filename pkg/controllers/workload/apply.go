package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/drift"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/plans"
	"github.com/captf/captf/pkg/slots"
)

// reportJob sets ApplyJobSucceeded from a Job (J7): running, or its
// outcome as reportRecord words it.
func (c *Controller) reportJob(w *workload, j *batchv1.Job, now time.Time) {
	action := jobs.ActionOf(j)
	if rec := recordOf(j, now); rec != nil {
		_, msg := jobs.Status(j)
		c.reportRecord(w, action, rec, msg, time.Time{}, now)
		return
	}
	gen, _ := jobs.GenerationOf(j)
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
		"%s Job %s (generation %d, attempt %d) is running", action, j.Name, gen, jobs.AttemptOf(j))
}

// applyStep starts the apply Job for an unapplied generation once
// credentials are ready (J1), retries a failed one (T7), keeps the
// finalizer on an object that has started one (J8), reports
// ApplyJobSucceeded (J7), and prunes finished Jobs (T7). It returns the
// object as stored when it had to update it.
func (c *Controller) applyStep(ctx context.Context, w *workload, creds credentialResult) (*workload, error) {
	now := c.clock.Now()
	cached, err := c.jobsOf(w)
	if err != nil {
		return w, err
	}
	if suspendedRun(cached.running) {
		// K5: a start interrupted between the Job and its run Secret.
		if err := c.resumeRun(ctx, w, cached.running); err != nil {
			return w, err
		}
	}
	// O2: how the newest run ended, before deciding from it; a running
	// Job whose image cannot be pulled is ended and recorded.
	if err := c.classifyRuns(ctx, w, cached, now, v1alpha1.JobActionApply); err != nil {
		return w, err
	}
	cached = c.pullStep(ctx, w, cached, now)
	w, err = c.applyJob(ctx, w, creds, cached, now)
	// T7: decided from the cache, so a pass with nothing to prune makes
	// no request.
	return w, errors.Join(err, c.prune(ctx, w, cached))
}

func (c *Controller) applyJob(ctx context.Context, w *workload, creds credentialResult, set jobSet, now time.Time) (*workload, error) {
	start, _ := c.decideApply(w, set, creds, now)
	if !start {
		return c.keepFinalizer(ctx, w, set)
	}
	if paused(w) {
		// T5: no Job while paused; the credentials stay mirrored.
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
			"generation %d is not applied: %s and the apply Job starts", w.obj.GetGeneration(), pauseNote(w))
		return c.keepFinalizer(ctx, w, set)
	}
	w, g, err := c.approvalGate(ctx, w, creds, set, now)
	if err != nil || g.wait {
		return w, err
	}
	// O4: a Job beyond a cap waits, before any request.
	if !c.slotFree(w, slots.Apply, v1alpha1.JobActionApply, now) {
		return c.keepFinalizer(ctx, w, set)
	}
	// About to start a Job: confirm from the API server, not the cache.
	set, err = c.freshJobs(ctx, w)
	if err != nil {
		return w, err
	}
	start, plan := c.decideApply(w, set, creds, now)
	if !start {
		return c.keepFinalizer(ctx, w, set)
	}
	if g.approved != nil {
		plan.planName, plan.planHash = g.approved.Name, g.approved.Hash // O8
	}
	plan.guardDeletes = g.guard
	if w.status.LastApply == nil && set.find(v1alpha1.JobActionApply, -1) == nil {
		// K11: a moved or restored copy whose state records this spec as
		// applied adopts it instead of applying again.
		// O5: a state retained by an earlier object is adopted, or waits.
		rec, blocked, err := c.firstApplyState(ctx, w, w.contract.inputs.Hash(), now)
		if err != nil || blocked {
			return w, err
		}
		if rec != nil {
			c.reportRecord(w, v1alpha1.JobActionApply, rec, "", time.Time{}, now)
			return c.setFinalizer(ctx, w, true)
		}
	}
	// O3: a lock a finished Job left is released; anyone else's waits.
	if ok, err := c.lockStep(ctx, w, set, v1alpha1.JobActionApply); err != nil || !ok {
		return w, err
	}
	// O4: the slot is reserved last, just before the writes of a start.
	if !c.takeSlot(w, slots.Apply, v1alpha1.JobActionApply, now) {
		return c.keepFinalizer(ctx, w, set)
	}
	// T1, J8: a Job that cannot run (RunnerNotFound) sets no finalizer.
	if plan.runner, err = c.ensureRunner(ctx, w); err != nil || plan.runner == "" {
		c.releaseSlot(w, nil, err)
		if err != nil {
			return w, err
		}
		return c.keepFinalizer(ctx, w, set)
	}
	// The finalizer goes first: an object whose apply Job exists must never
	// be deleted without a destroy; and the block-move mark (K11).
	if w, err = c.prepareStart(ctx, w); err != nil {
		return w, err
	}
	j, err := c.createJob(ctx, w, v1alpha1.JobActionApply, creds, plan)
	c.releaseSlot(w, j, err)
	if err != nil {
		return w, err
	}
	if j != nil {
		c.reportJob(w, j, now)
		if plan.remediation > 0 && plan.trigger == "" {
			w.normal(v1alpha1.EventDriftRemediationStarted, "apply Job %s puts back the drift that drift Job %s found (%d of at most %d in a row)",
				j.Name, w.status.LastDriftCheck.JobName, plan.remediation, drift.MaxRemediations)
		}
	}
	return w, nil
}

// gate is what O8's approvals let an apply do.
type gate struct {
	// approved is the approved plan to apply (--expect-plan), nil for none.
	approved *plans.Plan
	// guard: apply with the destructive guard (--guard-deletes).
	guard bool
	// wait: no apply Job now (a plan Job, a plan, or an approval first).
	wait bool
}

// approvalGate is O8's gate before an apply Job: under applyPolicy Manual
// a plan Job, a plan and its approval come first (planGate); a guarded
// cluster's deletions and replacements wait for approval (guardGate).
// Any other object applies as it is. It returns the object as stored when
// a gate had to update it.
func (c *Controller) approvalGate(ctx context.Context, w *workload, creds credentialResult, set jobSet, now time.Time) (*workload, gate, error) {
	switch {
	case gated(w):
		w, approved, err := c.planGate(ctx, w, creds, set, now)
		return w, gate{approved: approved, wait: approved == nil}, err
	case guarded(w):
		w, approved, guard, err := c.guardGate(ctx, w, set, now)
		return w, gate{approved: approved, guard: guard, wait: approved == nil && !guard}, err
	}
	return w, gate{}, nil
}

// keepFinalizer sets the finalizer on an object that has applied:
// infrastructure may exist, so its deletion must destroy it (J8).
func (c *Controller) keepFinalizer(ctx context.Context, w *workload, set jobSet) (*workload, error) {
	if set.find(v1alpha1.JobActionApply, -1) == nil && w.status.LastApply == nil {
		return w, nil
	}
	return c.setFinalizer(ctx, w, true)
}

// recordLatest points status.lastJob at the newest Job seen, so it heals
// after a pass that created a Job but failed to write status.
func recordLatest(w *workload, set jobSet) {
	if set.latest == nil {
		return
	}
	if last := w.status.LastJob; last != nil && last.Name == set.latest.Name {
		return
	}
	gen, _ := jobs.GenerationOf(set.latest)
	w.status.LastJob = &v1alpha1.JobReference{Name: set.latest.Name, Action: jobs.ActionOf(set.latest), Generation: gen}
}

// decideApply records finished apply Jobs in status.lastApply (T7), sets
// ApplyJobSucceeded, and decides whether a new apply Job should start and
// which:
//
//   - the generation has no finished apply and none runs (J1), attempt 1;
//   - a new captf.io/retry value (T7), the next attempt at once;
//   - a rotation of the credentials of an object that re-applies on it
//     (C6), a re-apply at once;
//   - the generation's last apply failed and its backoff has passed (T7),
//     the next attempt; before then the key is requeued for that time.
//
// A succeeded generation never runs again by itself, even when its Job is
// gone: the record says it finished. Every start needs ready credentials
// and an image.
func (c *Controller) decideApply(w *workload, set jobSet, creds credentialResult, now time.Time) (bool, runPlan) {
	recordLatest(w, set)
	rec := recordRuns(w, set, v1alpha1.JobActionApply, now)
	gen := w.obj.GetGeneration()
	retry, retryNew := retryRequested(w, set)
	if set.running != nil {
		c.reportRunning(w, set, rec, now)
		return false, runPlan{}
	}
	done := coversGeneration(w, rec) // T5: the manager's own field write is not a new generation
	plan := runPlan{attempt: nextAttempt(w, set, v1alpha1.JobActionApply, gen)}
	remedy := remediation(w) // O7
	if retryNew {
		plan.retry = retry
	}
	if done {
		count := countRun(w, set, rec) // O2
		plan.interruptions = nextInterruptions(rec, count, gen)
		var next time.Time
		// O8: an apply that applied nothing by design (another plan than
		// the approved one, or the destructive guard) is not a failure.
		changed := planChangedRun(w.status.LastRun, rec) || destructiveRun(w.status.LastRun, rec)
		if rec.Outcome != v1alpha1.RunSucceeded && !count.interrupted && !changed {
			next = retryAt(rec, count)
		}
		c.reportRecord(w, v1alpha1.JobActionApply, rec, detailOf(set, rec), next, now)
		switch n := reapplyNumber(w, set, rec, creds); {
		case retryNew:
			plan.trigger = metrics.TriggerAnnotation
		case n > 0:
			plan.reapply = n
		case inputsChanged(w, rec):
			// K6: the inputs rendered now differ from the recorded run's
			// (a MachinePool's replicas, a cluster's exports, a pool's
			// bootstrap data): the next attempt applies them at once.
		case changed:
			// O8: the apply found another plan, or deletions under the
			// guard, and applied nothing: a new plan at once, no backoff
			// (A3-69).
		case rec.Outcome == v1alpha1.RunSucceeded && remedy > 0:
			// O7: a drift check under Remediate found drift.
			plan.remediation = remedy
		case rec.Outcome == v1alpha1.RunSucceeded:
			return false, runPlan{}
		case count.interrupted:
			// O2: an interrupted run is retried at once, not counted.
			plan.trigger = metrics.TriggerInterrupt
		case now.Before(next):
			c.requeueAt(w, next, now)
			return false, runPlan{}
		default:
			plan.trigger = metrics.TriggerBackoff
			plan.remediation = int(rec.DriftRemediation) // O7: still the same row
		}
	}
	if c.applyBlocked(w, set, creds, done, now) {
		return false, runPlan{}
	}
	return true, plan
}

// applyBlocked reports, and says on ApplyJobSucceeded, why an apply that
// is due cannot start yet: its dependencies (K2, K4), its credentials
// (I1, C1), its image, or variables the CRD cannot check (T3). done: the
// generation's apply was recorded, whose condition stays.
func (c *Controller) applyBlocked(w *workload, set jobSet, creds credentialResult, done bool, now time.Time) bool {
	switch {
	case !w.contract.deps.Ready:
		if !done {
			setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
				"no apply Job until DependenciesReady is True (%s)", w.contract.deps.Reason)
		}
		return true
	case !creds.ready:
		if !done {
			if a := jobs.ActionOf(set.latest); set.latest != nil && a != v1alpha1.JobActionDrift && a != v1alpha1.JobActionRestore {
				c.reportJob(w, set.latest, now)
			} else {
				setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
					"no apply Job until IdentityAllowed and CredentialsMirrored are True")
			}
		}
		return true
	case w.source.Image == "":
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet,
			"spec.source.image is not set: no Job can run")
		return true
	}
	if err := jobs.ValidateVariables(v1alpha1.VariablesOf(w.robj)); err != nil {
		// T3: what the CRD cannot check is reported here; no Job runs.
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonInvalidVariables,
			"%v: fix spec.variables and the apply Job starts (SPEC T3)", err)
		return true
	}
	return false
}

// inputsChanged reports whether the contract inputs rendered this pass
// differ from those rec, the newest finished apply, ran with (K6). A
// record without an inputs hash (made before they were recorded) is not
// taken for a change, so an upgrade starts no Jobs by itself; nor is a
// provisioned machine's, whose inputs are pinned (K5).
func inputsChanged(w *workload, rec *v1alpha1.RunRecord) bool {
	in := w.contract.inputs
	return in != nil && w.contract.deps.Ready && rec.InputsHash != "" && rec.InputsHash != in.Hash()
}

// reapplyNumber implements C6: when the object opts in
// (spec.jobs.reapplyOnRotation), no Job runs, credentials are ready, and
// rec, the newest finished apply of this generation, started with another
// source hash than the mirror's now, it returns the number of the next
// re-apply Job (one per rotation: that Job records the new hash); else 0.
// Deciding from the record, not the Job, keeps this right when the Job is
// gone (T7). Never called during a deletion.
func reapplyNumber(w *workload, set jobSet, rec *v1alpha1.RunRecord, creds credentialResult) int {
	if !w.jobs.ReapplyOnRotation || !creds.ready || creds.hash == "" || set.running != nil || w.source.Image == "" {
		return 0
	}
	gen := w.obj.GetGeneration()
	if !coversGeneration(w, rec) || rec.SourceHash == "" || rec.SourceHash == creds.hash {
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

// paused reports whether w's Jobs are paused: by Cluster API's pause
// annotation on the object (T5), or by its Cluster's spec.paused (K3).
func paused(w *workload) bool { return w.contract.paused }

// pauseNote says what pauses w and how to resume it.
func pauseNote(w *workload) string {
	if _, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationPaused]; ok {
		return fmt.Sprintf("the object carries annotation %s; remove it", v1alpha1.AnnotationPaused)
	}
	return w.contract.pausedBy + "; unpause it"
}

// reportPaused sets the Paused condition (T5, K3).
func (c *Controller) reportPaused(w *workload) {
	if !paused(w) {
		setCondition(w, c.clock.Now(), v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused,
			"annotation %s is not set", v1alpha1.AnnotationPaused)
		return
	}
	until := "it is removed"
	if _, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationPaused]; !ok {
		until = "the Cluster is unpaused"
	}
	setCondition(w, c.clock.Now(), v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused,
		"%s: no apply or destroy Job starts until %s; credentials stay mirrored", w.contract.pausedBy, until)
}
