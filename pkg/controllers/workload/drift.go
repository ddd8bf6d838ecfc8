package workload

import (
	"context"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/drift"
	"github.com/captf/captf/pkg/slots"
)

// SPEC O7 in the reconcile: pkg/drift decides when a drift check is due;
// driftStep gathers its inputs from the status records and the Job cache,
// starts the drift Job at slots.Background priority (only below 80% of
// the caps, O4) or requeues the key for the time it is due, and
// driftCondition reports DriftDetected from the recorded run. A pass with
// nothing due makes no request and writes nothing.

// driftStep records finished drift Jobs in status.lastDriftCheck and
// starts the next drift Job when it is due: the generation applied, no
// Job running, credentials and dependencies ready, not paused. It returns
// the object as stored when it had to update it.
func (c *Controller) driftStep(ctx context.Context, w *workload, creds credentialResult) (*workload, error) {
	now := c.clock.Now()
	set, err := c.jobsOf(w)
	if err != nil {
		return w, err
	}
	recordRuns(w, set, v1alpha1.JobActionDrift, now)
	d := drift.Decide(c.driftInput(w, set), now)
	if !d.Due {
		if !d.Next.IsZero() {
			c.requeueAt(w, d.Next, now)
		}
		return w, nil
	}
	if paused(w) || !creds.ready || !w.contract.deps.Ready || w.source.Image == "" {
		return w, nil // the apply's condition says why; no check until then
	}
	// O4: a Background Job waits below 80% of the caps, silently: it is
	// no spec change, and ApplyJobSucceeded stays what the apply left.
	if !c.backgroundSlot(w, now, false) {
		return w, nil
	}
	// About to start a Job: confirm from the API server, not the cache.
	if set, err = c.freshJobs(ctx, w); err != nil {
		return w, err
	}
	recordRuns(w, set, v1alpha1.JobActionDrift, now)
	if !drift.Decide(c.driftInput(w, set), now).Due {
		return w, nil
	}
	if ok, err := c.lockStep(ctx, w, set, v1alpha1.JobActionDrift); err != nil || !ok {
		return w, err
	}
	if !c.backgroundSlot(w, now, true) {
		return w, nil
	}
	if w, err = c.prepareStart(ctx, w); err != nil {
		return w, err
	}
	plan := runPlan{attempt: nextAttempt(w, set, v1alpha1.JobActionDrift, w.obj.GetGeneration()), remediation: driftRow(w)}
	j, err := c.createJob(ctx, w, v1alpha1.JobActionDrift, creds, plan)
	c.releaseSlot(w, j, err)
	return w, err
}

// driftInput gathers what pkg/drift decides from: the interval (the
// object's spec.drift, its cluster's spec.defaults.drift, the flag), the
// UID, whether the generation's apply succeeded and no Job runs, and the
// newest finish of an apply or drift check.
func (c *Controller) driftInput(w *workload, set jobSet) drift.Input {
	var own, inherited *int32
	if s := v1alpha1.DriftOf(w.robj); s != nil {
		own = s.IntervalSeconds
	}
	if cl := w.contract.cluster; cl != nil && w.kind.name != v1alpha1.KindTerraformCluster && cl.Spec.Defaults != nil && cl.Spec.Defaults.Drift != nil {
		inherited = cl.Spec.Defaults.Drift.IntervalSeconds
	}
	in := drift.Input{
		Interval: drift.Interval(own, inherited, c.opts.DriftDefaultInterval),
		UID:      string(w.obj.GetUID()),
		Busy:     set.running != nil,
	}
	apply := w.status.LastApply
	in.Applied = apply != nil && apply.Outcome == v1alpha1.RunSucceeded && coversGeneration(w, apply) && !inputsChanged(w, apply)
	if apply != nil {
		in.LastRun = apply.FinishTime.Time
	}
	if chk := w.status.LastDriftCheck; chk != nil && chk.FinishTime.After(in.LastRun) {
		in.LastRun = chk.FinishTime.Time
	}
	return in
}

// backgroundSlot asks the Job caps for a Background slot (take: reserve
// it). Unlike an apply's wait it sets no condition: a drift check is not
// what the object's conditions describe, and a capped check waits without
// writes; the pool wakes the key when a slot frees.
func (c *Controller) backgroundSlot(w *workload, now time.Time, take bool) bool {
	ask := slots.Ask[slotKey]{Key: slotKeyOf(w), Class: slots.Background, Cluster: slotCluster(w)}
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
	return false
}

// driftCondition sets DriftDetected from status.lastRun when it describes
// the newest drift check (O7, A1-163), and queues DriftDetected or
// DriftResolved when that changes what the condition says. It keeps the
// condition as it was while lastRun is another run's: a later apply does
// not say whether the drift is still there; the next check does.
func driftCondition(w *workload, now time.Time) {
	l, chk := w.status.LastRun, w.status.LastDriftCheck
	if l == nil || chk == nil || l.Operation != v1alpha1.JobActionDrift || !describes(l, chk) {
		return
	}
	var old *metav1.Condition
	if o := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionDriftDetected)); o != nil {
		old = o.DeepCopy() // SetStatusCondition changes it in place
	}
	what := fmt.Sprintf("drift Job %s", l.Job)
	switch {
	case l.Outcome != v1alpha1.RunSucceeded || l.Drift == nil:
		setCondition(w, now, v1alpha1.ConditionDriftDetected, metav1.ConditionUnknown, v1alpha1.ReasonDriftNotChecked,
			"%s did not finish its plan (%s); see status.lastRun; the next check is due an interval after it", what, l.Outcome)
	case driftFound(l.Drift) && driftAction(w) == v1alpha1.DriftRemediate && int(chk.DriftRemediation) < drift.MaxRemediations:
		setCondition(w, now, v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftRemediating,
			"%s found drift: %s; an apply puts it back (%d of at most %d in a row)", what, driftSummary(l.Drift), chk.DriftRemediation+1, drift.MaxRemediations)
	case driftFound(l.Drift) && driftAction(w) == v1alpha1.DriftRemediate:
		setCondition(w, now, v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported,
			"%s found drift: %s; %d applies in a row did not remove it: reported, not applied, until a check finds none or the spec changes", what, driftSummary(l.Drift), drift.MaxRemediations)
	case driftFound(l.Drift):
		setCondition(w, now, v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported,
			"%s found drift: %s; reported, not applied", what, driftSummary(l.Drift))
	default:
		setCondition(w, now, v1alpha1.ConditionDriftDetected, metav1.ConditionFalse, v1alpha1.ReasonNoDrift,
			"%s found no drift", what)
	}
	cur := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionDriftDetected))
	if old != nil && old.Status == cur.Status && old.Message == cur.Message {
		return
	}
	switch {
	case cur.Status == metav1.ConditionTrue:
		w.warn(v1alpha1.EventDriftDetected, "%s", cur.Message)
	case cur.Status == metav1.ConditionFalse && old != nil && old.Status == metav1.ConditionTrue:
		w.normal(v1alpha1.EventDriftResolved, "%s", cur.Message)
	}
}

func driftFound(d *v1alpha1.RunDrift) bool {
	return d.Create+d.Update+d.Replace+d.Delete > 0
}

// driftSummary words a drift: the counts, then the addresses the run
// named (at most 16; addresses only, X1).
func driftSummary(d *v1alpha1.RunDrift) string {
	s := fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete", d.Create, d.Update, d.Replace, d.Delete)
	if len(d.Resources) > 0 {
		s += " (" + strings.Join(d.Resources, ", ") + ")"
	}
	return s
}

// runningDrift reports whether j is a drift Job (O7): it holds back an
// apply like any running Job, but says nothing about the apply.
func runningDrift(set jobSet) bool {
	return set.running != nil && jobs.ActionOf(set.running) == v1alpha1.JobActionDrift
}

// driftAction is w's drift action: its spec.drift.action, else, for a
// pool, its cluster's spec.defaults.drift.action; Report when none. A
// machine reports only (the CRD refuses Remediate on it; a cluster's
// default does not reach it).
func driftAction(w *workload) v1alpha1.DriftAction {
	if w.kind.name == v1alpha1.KindTerraformMachine {
		return v1alpha1.DriftReport
	}
	if s := v1alpha1.DriftOf(w.robj); s != nil && s.Action != "" {
		return s.Action
	}
	if cl := w.contract.cluster; cl != nil && w.kind.name == v1alpha1.KindTerraformMachinePool && cl.Spec.Defaults != nil && cl.Spec.Defaults.Drift != nil && cl.Spec.Defaults.Drift.Action != "" {
		return cl.Spec.Defaults.Drift.Action
	}
	return v1alpha1.DriftReport
}

// lastCheckFoundDrift returns the newest drift check when it is newer
// than the newest apply and status.lastRun says it found drift.
func lastCheckFoundDrift(w *workload) *v1alpha1.RunRecord {
	a, chk, l := w.status.LastApply, w.status.LastDriftCheck, w.status.LastRun
	if chk == nil || (a != nil && !a.FinishTime.Before(&chk.FinishTime)) {
		return nil
	}
	if l == nil || !describes(l, chk) || l.Outcome != v1alpha1.RunSucceeded || l.Drift == nil || !driftFound(l.Drift) {
		return nil
	}
	return chk
}

// driftRow is the row of drift remediations a drift Job starting now
// continues (O7, A3-59): the newest apply's number when it came after the
// last check (0: an apply of a spec change ends the row); else the last
// check's row while it found drift; 0 once a check found none.
func driftRow(w *workload) int {
	a, chk := w.status.LastApply, w.status.LastDriftCheck
	if chk == nil || (a != nil && !a.FinishTime.Before(&chk.FinishTime)) {
		if a == nil {
			return 0
		}
		return int(a.DriftRemediation)
	}
	if found := lastCheckFoundDrift(w); found != nil {
		return int(found.DriftRemediation)
	}
	return 0
}

// remediation returns the number in its row of the apply the newest drift
// check calls for, 0 for none: the check came after the newest apply and
// found drift, the action is Remediate, and fewer than
// drift.MaxRemediations applies are in the row.
func remediation(w *workload) int {
	chk := lastCheckFoundDrift(w)
	if chk == nil || !drift.Remediate(driftAction(w) == v1alpha1.DriftRemediate, true, int(chk.DriftRemediation)) {
		return 0
	}
	return int(chk.DriftRemediation) + 1
}
