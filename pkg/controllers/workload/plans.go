package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/plans"
	"github.com/captf/captf/pkg/slots"
)

// SPEC O8 in the reconcile: pkg/plans decides; planGate, called by
// applyJob when an apply of a gated target (applyPolicy Manual, applied
// before: the first apply is not gated, A3-63) is due, gathers the plans
// and the plan Job, writes the plans' phases, and starts the plan Job,
// makes the TerraformPlan, waits for approval, or returns the approved
// plan for applyJob to apply with --expect-plan. planStep keeps the
// plans' phases on the passes with no apply due.

// indexPlanOwner indexes TerraformPlans by their controller's UID.
const indexPlanOwner = "captf.io/plan-owner"

func planOwnerKeys(obj interface{}) ([]string, error) {
	p, ok := obj.(*v1alpha1.TerraformPlan)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// gated reports whether w's applies wait for an approved plan.
func gated(w *workload) bool {
	return v1alpha1.ApplyPolicyOf(w.robj) == v1alpha1.ApplyManual && provisioned(w.status)
}

// plansOf returns w's TerraformPlans from the cache.
func (c *Controller) plansOf(w *workload) ([]*v1alpha1.TerraformPlan, error) {
	if c.planIndexer == nil {
		return nil, nil
	}
	objs, err := c.planIndexer.ByIndex(indexPlanOwner, string(w.obj.GetUID()))
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.TerraformPlan, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*v1alpha1.TerraformPlan))
	}
	return out, nil
}

// currentInputs is the hash of the contract inputs an apply would run
// with now (K6).
func currentInputs(w *workload) string {
	if w.contract.inputs == nil {
		return ""
	}
	return w.contract.inputs.Hash()
}

// planInput gathers pkg/plans' input from the cache and the records.
func planInput(w *workload, set jobSet, stored []*v1alpha1.TerraformPlan, due bool) plans.Input {
	gen := w.obj.GetGeneration()
	in := plans.Input{Generation: gen, InputsHash: currentInputs(w), Due: due}
	for _, p := range stored {
		g, _ := strconv.ParseInt(p.Annotations[plans.AnnotationGeneration], 10, 64)
		in.Plans = append(in.Plans, plans.Plan{Name: p.Name, Generation: g, InputsHash: p.Spec.InputsHash,
			Job: p.Annotations[plans.AnnotationPlanJob], Phase: p.Status.Phase, Approved: p.Spec.Approved,
			Hash: p.Spec.PlanHash, Created: p.CreationTimestamp.Time})
	}
	if j := set.running; j != nil && jobs.ActionOf(j) == v1alpha1.JobActionPlan {
		g, _ := jobs.GenerationOf(j)
		in.PlanJob = &plans.PlanJob{Name: j.Name, Generation: g, InputsHash: jobs.InputsHashOf(j), Running: true}
	} else if r := w.status.LastPlan; r != nil {
		in.PlanJob = &plans.PlanJob{Name: r.JobName, Generation: r.Generation, InputsHash: r.InputsHash,
			Succeeded: r.Outcome == v1alpha1.RunSucceeded, Attempt: int(r.Attempt), Finished: r.FinishTime.Time}
	}
	if r := w.status.LastApply; r != nil {
		a := &plans.Apply{Generation: r.Generation, Succeeded: r.Outcome == v1alpha1.RunSucceeded,
			PlanChanged: planChangedRun(w.status.LastRun, r), Finished: r.FinishTime.Time}
		for _, j := range set.all {
			if j.Name == r.JobName {
				a.Plan = jobs.PlanOf(j)
			}
		}
		in.Apply = a
	}
	return in
}

// planChangedRun reports whether l, status.lastRun, records rec's apply
// as plan-changed: nothing applied (O8).
func planChangedRun(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord) bool {
	return stoppedAs(l, rec, v1alpha1.RunErrorPlanChanged)
}

// destructiveRun reports whether l, status.lastRun, records rec's apply
// as stopped by the destructive guard: nothing applied (O8, A3-64). The
// kind is blocked (upstream A1-80), or destructive in a status an earlier
// captf wrote.
func destructiveRun(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord) bool {
	return stoppedAs(l, rec, v1alpha1.RunErrorBlocked) || stoppedAs(l, rec, v1alpha1.RunErrorDestructive)
}

// stoppedAs reports whether l records rec's run as ended with error kind k.
func stoppedAs(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord, k v1alpha1.RunErrorKind) bool {
	return rec != nil && rec.Outcome == v1alpha1.RunFailed && describes(l, rec) && l.Error != nil && l.Error.Kind == k
}

// planGate decides a due apply of a gated w (O8). It returns the approved
// plan to apply, nil when the apply waits (a plan Job, a plan, an
// approval); the object as stored when it had to update it.
func (c *Controller) planGate(ctx context.Context, w *workload, creds credentialResult, set jobSet, now time.Time) (*workload, *plans.Plan, error) {
	recordRuns(w, set, v1alpha1.JobActionPlan, now)
	stored, err := c.plansOf(w)
	if err != nil {
		return w, nil, err
	}
	in := planInput(w, set, stored, true)
	d := plans.Decide(in, now)
	w.plansDecided = true
	if err := c.writePlans(ctx, w, stored, d); err != nil {
		return w, nil, err
	}
	w.status.PendingPlanRef = nil
	gen := w.obj.GetGeneration()
	reason := v1alpha1.ReasonPlanAwaitingApproval
	changed := changedPlan(stored, d, gen)
	if changed != "" {
		reason = v1alpha1.ReasonPlanChanged
	}
	wait := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if changed != "" {
			msg = fmt.Sprintf("the apply of the approved TerraformPlan %s found another plan and applied nothing; %s", changed, msg)
		}
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, reason, "%s", msg)
	}
	switch d.Action {
	case plans.ApplyPlan:
		return w, d.Plan, nil
	case plans.WaitApproval:
		w.status.PendingPlanRef = &v1alpha1.PlanReference{Name: d.Plan.Name}
		wait("generation %d (applyPolicy Manual) waits for the approval of TerraformPlan %s: set its spec.approved to true (the verb approve on terraformplans, ClusterRole captf-plan-approver)", gen, d.Plan.Name)
	case plans.CreatePlan:
		name, err := c.createPlan(ctx, w, d.Job, v1alpha1.PlanReasonManual, now)
		if err != nil || name == "" {
			return w, nil, err
		}
		w.status.PendingPlanRef = &v1alpha1.PlanReference{Name: name}
		wait("generation %d (applyPolicy Manual) waits for the approval of TerraformPlan %s: set its spec.approved to true (the verb approve on terraformplans, ClusterRole captf-plan-approver)", gen, name)
	case plans.WaitPlanJob:
		if !d.RetryAt.IsZero() {
			c.requeueAt(w, d.RetryAt, now)
			wait("plan Job %s of generation %d failed (see status.lastRun); the next plan Job starts at %s", in.PlanJob.Name, gen, d.RetryAt.UTC().Format(time.RFC3339))
		} else {
			wait("plan Job %s of generation %d (applyPolicy Manual) is running; its plan then waits for approval", in.PlanJob.Name, gen)
		}
	case plans.StartPlanJob:
		wait("generation %d (applyPolicy Manual) is planned first; its plan then waits for approval", gen)
		w, err = c.startPlanJob(ctx, w, creds, now)
		return w, nil, err
	}
	return w, nil, nil
}

// changedPlan names the plan of generation gen the apply found changed
// (Superseded with reason PlanChanged, on this pass or before), "" when
// none: the generation's next plan is then a PlanChanged one.
func changedPlan(stored []*v1alpha1.TerraformPlan, d plans.Decision, gen int64) string {
	for _, u := range d.Updates {
		if u.Reason == v1alpha1.ReasonPlanChanged {
			return u.Name
		}
	}
	for _, p := range stored {
		r := meta.FindStatusCondition(p.Status.Conditions, string(v1alpha1.ConditionReady))
		if p.Annotations[plans.AnnotationGeneration] == strconv.FormatInt(gen, 10) && p.Status.Phase == v1alpha1.PlanPhaseSuperseded &&
			r != nil && r.Reason == string(v1alpha1.ReasonPlanChanged) {
			return p.Name
		}
	}
	return ""
}

// startPlanJob starts the plan Job of w's generation (O8) in a slot of a
// spec-driven apply's priority (O4), after the checks of applyJob's start.
func (c *Controller) startPlanJob(ctx context.Context, w *workload, creds credentialResult, now time.Time) (*workload, error) {
	if !c.slotFree(w, slots.Apply, v1alpha1.JobActionPlan, now) {
		return w, nil
	}
	// About to start a Job: confirm from the API server, not the cache.
	set, err := c.freshJobs(ctx, w)
	if err != nil {
		return w, err
	}
	recordRuns(w, set, v1alpha1.JobActionPlan, now)
	stored, err := c.plansOf(w)
	if err != nil {
		return w, err
	}
	if set.running != nil || plans.Decide(planInput(w, set, stored, true), now).Action != plans.StartPlanJob {
		return w, nil
	}
	if ok, err := c.lockStep(ctx, w, set, v1alpha1.JobActionPlan); err != nil || !ok {
		return w, err
	}
	if !c.takeSlot(w, slots.Apply, v1alpha1.JobActionPlan, now) {
		return w, nil
	}
	if w, err = c.prepareStart(ctx, w); err != nil {
		return w, err
	}
	plan := runPlan{attempt: nextAttempt(w, set, v1alpha1.JobActionPlan, w.obj.GetGeneration())}
	j, err := c.createJob(ctx, w, v1alpha1.JobActionPlan, creds, plan)
	c.releaseSlot(w, j, err)
	return w, err
}

// planStep keeps the phases of w's plans on a pass whose apply did not
// ask planGate (no apply due, or not gated): a plan applied, superseded
// or beyond the ten kept (A3-68).
func (c *Controller) planStep(ctx context.Context, w *workload) error {
	if w.plansDecided {
		return nil
	}
	w.status.PendingPlanRef = nil
	stored, err := c.plansOf(w)
	if err != nil || len(stored) == 0 {
		return err
	}
	set, err := c.jobsOf(w)
	if err != nil {
		return err
	}
	recordRuns(w, set, v1alpha1.JobActionPlan, c.clock.Now())
	return c.writePlans(ctx, w, stored, plans.Decide(planInput(w, set, stored, false), c.clock.Now()))
}

// writePlans writes d's phase changes and deletions.
func (c *Controller) writePlans(ctx context.Context, w *workload, stored []*v1alpha1.TerraformPlan, d plans.Decision) error {
	byName := map[string]*v1alpha1.TerraformPlan{}
	for _, p := range stored {
		byName[p.Name] = p
	}
	for _, u := range d.Updates {
		if p := byName[u.Name]; p != nil {
			if err := c.setPlanPhase(ctx, w, p, u); err != nil {
				return err
			}
		}
	}
	for _, name := range d.Delete {
		err := c.captf.InfrastructureV1alpha1().TerraformPlans(w.obj.GetNamespace()).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting TerraformPlan %s: %w", name, err)
		}
	}
	return nil
}

// setPlanPhase writes a plan's phase, its conditions and its phase label.
func (c *Controller) setPlanPhase(ctx context.Context, w *workload, p *v1alpha1.TerraformPlan, u plans.Update) error {
	client := c.captf.InfrastructureV1alpha1().TerraformPlans(p.Namespace)
	np := p.DeepCopy()
	planStatus(np, u, c.clock.Now())
	stored, err := client.UpdateStatus(ctx, np, metav1.UpdateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("updating the status of TerraformPlan %s: %w", p.Name, err)
	}
	if stored.Labels[plans.LabelPhase] != string(u.Phase) {
		patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, plans.LabelPhase, u.Phase)
		if _, err := client.Patch(ctx, p.Name, "application/merge-patch+json", patch, metav1.PatchOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("labelling TerraformPlan %s: %w", p.Name, err)
		}
	}
	switch u.Reason {
	case v1alpha1.ReasonPlanApplied:
		w.normal(string(v1alpha1.ReasonPlanApplied), "TerraformPlan %s was applied", p.Name)
	case v1alpha1.ReasonPlanChanged:
		w.warn(string(v1alpha1.ReasonPlanChanged), "TerraformPlan %s was approved, but the apply planned something else and applied nothing; a new plan waits for approval", p.Name)
	}
	return nil
}

// planStatus sets a plan's phase and its Ready and Approved conditions
// (A1-144, A1-145).
func planStatus(p *v1alpha1.TerraformPlan, u plans.Update, now time.Time) {
	p.Status.Phase = u.Phase
	p.Status.ObservedGeneration = p.Generation
	ready, readyMsg := metav1.ConditionFalse, ""
	switch u.Reason {
	case v1alpha1.ReasonPlanPending:
		readyMsg = "waits for approval: set spec.approved to true"
	case v1alpha1.ReasonPlanApproved:
		readyMsg = "approved by " + p.Spec.ApprovedBy + "; its apply runs"
	case v1alpha1.ReasonPlanApplied:
		ready, readyMsg = metav1.ConditionTrue, "applied"
	case v1alpha1.ReasonPlanChanged:
		readyMsg = "the apply planned something else and applied nothing (PlanChanged); a new plan replaces this one"
	default:
		readyMsg = "a newer plan of the target replaces this one"
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: string(v1alpha1.ConditionReady), Status: ready,
		Reason: string(u.Reason), Message: readyMsg, ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now)})
	approved, reason := metav1.ConditionFalse, v1alpha1.ReasonPlanNotApproved
	if p.Spec.Approved {
		approved, reason = metav1.ConditionTrue, v1alpha1.ReasonPlanApproved
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: string(v1alpha1.ConditionApproved), Status: approved,
		Reason: string(reason), Message: fmt.Sprintf("spec.approved is %t", p.Spec.Approved), ObservedGeneration: p.Generation, LastTransitionTime: metav1.NewTime(now)})
}
