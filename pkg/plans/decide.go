package plans

import (
	"sort"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Decide is SPEC O8's decision for a gated target at now (A3-63, A3-68,
// A3-69). The plans first:
//
//   - a live plan whose apply finished: Applied when it succeeded,
//     Superseded with reason PlanChanged when the runner found another
//     plan (not a failure: a new plan follows at once, no backoff);
//   - a live plan of another generation or other inputs: Superseded;
//   - of two live plans of the generation, the older: Superseded.
//
// Then the next step, while an apply is due: the live plan's apply when
// approved, else its approval; without one, a plan Job (after a failed
// one's backoff), or the plan from the newest finished plan Job when no
// plan was made from it yet. Finished plans beyond KeepFinished are
// deleted, oldest first.
func Decide(in Input, now time.Time) Decision {
	var d Decision
	phase := map[string]v1alpha1.PlanPhase{}
	set := func(p Plan, ph v1alpha1.PlanPhase, r v1alpha1.ConditionReason) {
		phase[p.Name] = ph
		d.Updates = append(d.Updates, Update{Name: p.Name, Phase: ph, Reason: r})
	}
	plans := sortedNewest(in.Plans)
	var current *Plan
	for i := range plans {
		p := plans[i]
		if !p.Live() {
			continue
		}
		switch a := in.Apply; {
		case a != nil && appliedBy(a, p) && a.Succeeded:
			set(p, v1alpha1.PlanPhaseApplied, v1alpha1.ReasonPlanApplied)
		case a != nil && appliedBy(a, p) && a.PlanChanged:
			set(p, v1alpha1.PlanPhaseSuperseded, v1alpha1.ReasonPlanChanged)
		case p.Generation != in.Generation || p.InputsHash != in.InputsHash || current != nil:
			set(p, v1alpha1.PlanPhaseSuperseded, v1alpha1.ReasonPlanSuperseded)
		default:
			current = &plans[i]
			want, reason := v1alpha1.PlanPhasePending, v1alpha1.ReasonPlanPending
			if p.Approved {
				want, reason = v1alpha1.PlanPhaseApproved, v1alpha1.ReasonPlanApproved
			}
			if p.Phase != want {
				set(p, want, reason)
			}
		}
	}
	d.Delete = retention(plans, phase)
	if !in.Due {
		d.Action = None
		return d
	}
	switch j := in.PlanJob; {
	case current != nil && current.Approved:
		d.Action, d.Plan = ApplyPlan, current
	case current != nil:
		d.Action, d.Plan = WaitApproval, current
	case in.Guard:
		d.Action, d.Job = guarded(j, plans, in)
	case j == nil || j.Generation != in.Generation || j.InputsHash != in.InputsHash:
		d.Action = StartPlanJob
	case j.Running:
		d.Action = WaitPlanJob
	case j.Succeeded && !madeFrom(plans, j.Name):
		d.Action, d.Job = CreatePlan, j.Name
	case j.Succeeded:
		// Its plan was superseded or changed: plan again.
		d.Action = StartPlanJob
	case now.Before(j.Finished.Add(RetryBackoff(j.Attempt))):
		d.Action, d.RetryAt = WaitPlanJob, j.Finished.Add(RetryBackoff(j.Attempt))
	default:
		d.Action = StartPlanJob
	}
	return d
}

// guarded is the next step of a guarded cluster without a live plan
// (A3-64): the plan from the guarded apply j that stopped at deletions or
// replacements of this generation and inputs, when none was made from it
// yet; else the guarded apply (a plan made from j and superseded or
// changed since: the guard plans again).
func guarded(j *PlanJob, plans []Plan, in Input) (Action, string) {
	if j != nil && j.Generation == in.Generation && j.InputsHash == in.InputsHash && !madeFrom(plans, j.Name) {
		return CreatePlan, j.Name
	}
	return GuardedApply, ""
}

// appliedBy reports whether apply a ran plan p: the Job's captf.io/plan
// names it; a Job gone from the cache is taken for the generation's live
// plan when it finished after the plan was made.
func appliedBy(a *Apply, p Plan) bool {
	if a.Plan != "" {
		return a.Plan == p.Name
	}
	return a.Generation == p.Generation && a.Finished.After(p.Created)
}

func madeFrom(plans []Plan, job string) bool {
	for _, p := range plans {
		if p.Job == job {
			return true
		}
	}
	return false
}

// retention returns the finished plans (after this pass's updates)
// beyond KeepFinished, oldest first.
func retention(newest []Plan, phase map[string]v1alpha1.PlanPhase) []string {
	var finished []string
	for _, p := range newest {
		if ph, ok := phase[p.Name]; ok {
			p.Phase = ph
		}
		if !p.Live() {
			finished = append(finished, p.Name)
		}
	}
	if len(finished) <= KeepFinished {
		return nil
	}
	old := finished[KeepFinished:]
	out := make([]string, 0, len(old))
	for i := len(old) - 1; i >= 0; i-- {
		out = append(out, old[i])
	}
	return out
}

// sortedNewest is a copy of plans, newest first (then by name).
func sortedNewest(plans []Plan) []Plan {
	out := append([]Plan(nil), plans...)
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.After(out[j].Created)
		}
		return out[i].Name > out[j].Name
	})
	return out
}
