package workload

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/plans"
)

// SPEC O8's destructive guard (upstream A3-64) in the reconcile: every
// apply of a provisioned TerraformCluster under applyPolicy Automatic runs
// with the runner's --guard-deletes. A guarded apply whose plan deletes
// or replaces resources applies nothing and ends with the error kind
// destructive (not a failure, no backoff: A3-69); its plan becomes a
// TerraformPlan with reason Destructive, and the apply waits for its
// approval, then applies exactly that plan (--expect-plan). pkg/plans
// decides (Input.Guard); guardGate gathers and writes, as planGate does
// for Manual.

// guarded reports whether w's applies run with the destructive guard: a
// cluster under applyPolicy Automatic that has applied (the first apply
// has no state whose resources it could delete).
func guarded(w *workload) bool {
	return w.kind.name == v1alpha1.KindTerraformCluster &&
		v1alpha1.ApplyPolicyOf(w.robj) == v1alpha1.ApplyAutomatic && provisioned(w.status)
}

// stoppedApply is the newest apply of w when the destructive guard
// stopped it, as pkg/plans reads a plan Job (it planned, and its plan is
// what waits for approval); nil otherwise.
func stoppedApply(w *workload) *plans.PlanJob {
	r := w.status.LastApply
	if !destructiveRun(w.status.LastRun, r) {
		return nil
	}
	return &plans.PlanJob{Name: r.JobName, Generation: r.Generation, InputsHash: r.InputsHash,
		Succeeded: true, Attempt: int(r.Attempt), Finished: r.FinishTime.Time}
}

// guardGate decides a due apply of a guarded w. It returns the approved
// Destructive plan to apply, or guard true for an apply with the guard;
// neither when the apply waits for approval. It returns the object as
// stored when it had to update it.
func (c *Controller) guardGate(ctx context.Context, w *workload, set jobSet, now time.Time) (*workload, *plans.Plan, bool, error) {
	stored, err := c.plansOf(w)
	if err != nil {
		return w, nil, false, err
	}
	in := planInput(w, set, stored, true)
	in.Guard, in.PlanJob = true, stoppedApply(w)
	d := plans.Decide(in, now)
	w.plansDecided = true
	if err := c.writePlans(ctx, w, stored, d); err != nil {
		return w, nil, false, err
	}
	w.status.PendingPlanRef = nil
	name := ""
	switch d.Action {
	case plans.ApplyPlan:
		return w, d.Plan, false, nil
	case plans.GuardedApply:
		return w, nil, true, nil
	case plans.WaitApproval:
		name = d.Plan.Name
	case plans.CreatePlan:
		if name, err = c.createPlan(ctx, w, d.Job, v1alpha1.PlanReasonDestructive, now); err != nil || name == "" {
			return w, nil, false, err
		}
	default:
		return w, nil, false, nil
	}
	w.status.PendingPlanRef = &v1alpha1.PlanReference{Name: name}
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonDestructivePlanBlocked,
		"generation %d would delete or replace resources: nothing was applied; TerraformPlan %s (reason Destructive) waits for approval: set its spec.approved to true (the verb approve on terraformplans, ClusterRole captf-plan-approver), or change the spec", w.obj.GetGeneration(), name)
	return w, nil, false, nil
}
