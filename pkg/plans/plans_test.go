package plans

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

var t0 = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// TestNameA1147: <target>-<10 hex>, one name per plan Job, within 253.
func TestNameA1147(t *testing.T) {
	a, b := Name("web", "web-plan-2-abcd1234"), Name("web", "web-plan-2-a2-abcd1234")
	if !strings.HasPrefix(a, "web-") || len(a) != len("web-")+10 || a == b || a != Name("web", "web-plan-2-abcd1234") {
		t.Fatalf("names %q %q", a, b)
	}
	if long := Name(strings.Repeat("x", 253), "j"); len(long) != 253 {
		t.Fatalf("long name is %d characters", len(long))
	}
}

// TestDecideO8 is SPEC O8's decision table (A3-63, A3-64, A3-68, A3-69).
func TestDecideO8(t *testing.T) {
	pending := Plan{Name: "p2", Generation: 2, InputsHash: "i", Job: "j2", Phase: v1alpha1.PlanPhasePending, Hash: "h", Created: at(10)}
	approved := pending
	approved.Approved, approved.Phase = true, v1alpha1.PlanPhaseApproved
	old := Plan{Name: "p1", Generation: 1, InputsHash: "i", Job: "j1", Phase: v1alpha1.PlanPhasePending, Created: at(5)}
	jobDone := &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Succeeded: true, Attempt: 1, Finished: at(9)}
	for _, tc := range []struct {
		name    string
		in      Input
		action  Action
		plan    string
		job     string
		updates string
		retryAt time.Time
	}{
		{name: "no plan, no plan Job: plan", in: Input{Due: true}, action: StartPlanJob},
		{name: "a plan Job of an older generation: plan", in: Input{Due: true, PlanJob: &PlanJob{Name: "j1", Generation: 1, InputsHash: "i", Succeeded: true}}, action: StartPlanJob},
		{name: "plan Job running: wait", in: Input{Due: true, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Running: true}}, action: WaitPlanJob},
		{name: "plan Job done, no plan from it: make it", in: Input{Due: true, PlanJob: jobDone}, action: CreatePlan, job: "j2"},
		{name: "pending plan: wait for approval", in: Input{Due: true, PlanJob: jobDone, Plans: []Plan{pending}}, action: WaitApproval, plan: "p2"},
		{name: "approved plan: apply it", in: Input{Due: true, PlanJob: jobDone, Plans: []Plan{approved}}, action: ApplyPlan, plan: "p2", updates: ""},
		{name: "approval seen first: phase Approved", in: Input{Due: true, Plans: []Plan{func() Plan { p := pending; p.Approved = true; return p }()}},
			action: ApplyPlan, plan: "p2", updates: "p2=Approved/Approved"},
		{name: "a newer generation supersedes the old plan", in: Input{Due: true, Plans: []Plan{old, pending}, PlanJob: jobDone},
			action: WaitApproval, plan: "p2", updates: "p1=Superseded/Superseded"},
		{name: "other inputs supersede the plan and plan again", in: Input{Due: true, InputsHash: "other", Plans: []Plan{pending}, PlanJob: jobDone},
			action: StartPlanJob, updates: "p2=Superseded/Superseded"},
		{name: "applied: Applied, nothing due", in: Input{Plans: []Plan{approved}, Apply: &Apply{Generation: 2, Plan: "p2", Succeeded: true, Finished: at(20)}},
			action: None, updates: "p2=Applied/Applied"},
		{name: "applied, its Job gone: by generation and time", in: Input{Plans: []Plan{approved}, Apply: &Apply{Generation: 2, Succeeded: true, Finished: at(20)}},
			action: None, updates: "p2=Applied/Applied"},
		{name: "an apply before the plan is not its apply", in: Input{Due: true, PlanJob: jobDone, Plans: []Plan{approved}, Apply: &Apply{Generation: 2, PlanChanged: true, Finished: at(9)}},
			action: ApplyPlan, plan: "p2"},
		{name: "plan changed: superseded, plan again at once", in: Input{Due: true, PlanJob: jobDone, Plans: []Plan{approved}, Apply: &Apply{Generation: 2, Plan: "p2", PlanChanged: true, Finished: at(20)}},
			action: StartPlanJob, updates: "p2=Superseded/PlanChanged"},
		{name: "a failed plan Job waits for its backoff", in: Input{Due: true, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Attempt: 2, Finished: at(0)}},
			action: WaitPlanJob, retryAt: at(120)},
		{name: "a failed plan Job is retried after it", in: Input{Due: true, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Attempt: 1, Finished: at(-60)}},
			action: StartPlanJob},
		// The destructive guard of a cluster under Automatic (A3-64):
		// PlanJob is the guarded apply that stopped.
		{name: "guard: nothing stopped: the guarded apply", in: Input{Due: true, Guard: true}, action: GuardedApply},
		{name: "guard: an older generation stopped: the guarded apply", in: Input{Due: true, Guard: true, PlanJob: &PlanJob{Name: "a1", Generation: 1, InputsHash: "i", Succeeded: true}},
			action: GuardedApply},
		{name: "guard: other inputs stopped: the guarded apply", in: Input{Due: true, Guard: true, PlanJob: &PlanJob{Name: "a2", Generation: 2, InputsHash: "old", Succeeded: true}},
			action: GuardedApply},
		{name: "guard: stopped, no plan from it: make it", in: Input{Due: true, Guard: true, PlanJob: &PlanJob{Name: "a2", Generation: 2, InputsHash: "i", Succeeded: true}},
			action: CreatePlan, job: "a2"},
		{name: "guard: its plan waits for approval", in: Input{Due: true, Guard: true, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Succeeded: true}, Plans: []Plan{pending}},
			action: WaitApproval, plan: "p2"},
		{name: "guard: approved: apply it", in: Input{Due: true, Guard: true, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Succeeded: true}, Plans: []Plan{approved}},
			action: ApplyPlan, plan: "p2"},
		{name: "guard: plan changed: superseded, the guarded apply again", in: Input{Due: true, Guard: true, Plans: []Plan{approved}, Apply: &Apply{Generation: 2, Plan: "p2", PlanChanged: true, Finished: at(20)}},
			action: GuardedApply, updates: "p2=Superseded/PlanChanged"},
		{name: "guard: a new generation supersedes the plan: the guarded apply", in: Input{Due: true, Guard: true, Generation: 3, Plans: []Plan{pending}, PlanJob: &PlanJob{Name: "j2", Generation: 2, InputsHash: "i", Succeeded: true}},
			action: GuardedApply, updates: "p2=Superseded/Superseded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			if in.Generation == 0 {
				in.Generation = 2
			}
			if in.InputsHash == "" {
				in.InputsHash = "i"
			}
			d := Decide(in, at(30))
			var ups []string
			for _, u := range d.Updates {
				ups = append(ups, fmt.Sprintf("%s=%s/%s", u.Name, u.Phase, u.Reason))
			}
			plan := ""
			if d.Plan != nil {
				plan = d.Plan.Name
			}
			if d.Action != tc.action || plan != tc.plan || d.Job != tc.job || strings.Join(ups, ",") != tc.updates || !d.RetryAt.Equal(tc.retryAt) {
				t.Fatalf("got %s plan %q job %q updates %q retry %v; want %s %q %q %q %v",
					d.Action, plan, d.Job, ups, d.RetryAt, tc.action, tc.plan, tc.job, tc.updates, tc.retryAt)
			}
		})
	}
}

// TestRetentionA1147: of the finished plans, the newest KeepFinished stay
// and the older are deleted, oldest first; live plans are never deleted.
func TestRetentionA1147(t *testing.T) {
	var ps []Plan
	for i := range 13 {
		ps = append(ps, Plan{Name: fmt.Sprintf("p%02d", i), Generation: int64(i), Phase: v1alpha1.PlanPhaseSuperseded, Created: at(i)})
	}
	ps = append(ps, Plan{Name: "live", Generation: 20, Phase: v1alpha1.PlanPhasePending, Created: at(-1)})
	d := Decide(Input{Generation: 20, Plans: ps}, at(100))
	if got := strings.Join(d.Delete, ","); got != "p00,p01,p02" {
		t.Fatalf("deleted %s, want p00,p01,p02", got)
	}
	if d := Decide(Input{Generation: 20, Plans: ps[3:]}, at(100)); len(d.Delete) != 0 {
		t.Fatalf("ten finished plans: deleted %v", d.Delete)
	}
}
