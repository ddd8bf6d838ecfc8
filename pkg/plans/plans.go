package plans

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Labels and annotations of a TerraformPlan (A1-146; frozen for
// v1alpha1 upstream).
const (
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	LabelDestructive = "captf.io/destructive"
	LabelPhase       = "captf.io/plan-phase"
	LabelReason      = "captf.io/plan-reason"
	// AnnotationGeneration is the target's generation the plan was made
	// for; AnnotationPlanJob the plan Job it was made from.
	AnnotationGeneration = v1alpha1.AnnotationJobGeneration
	AnnotationPlanJob    = v1alpha1.AnnotationPlanJob
	// AnnotationPlan records on an apply Job the plan it applies.
	AnnotationPlan = v1alpha1.AnnotationPlan
)

// KeepFinished is how many finished plans (Applied, Superseded, Failed)
// of one target are kept (A1-147).
const KeepFinished = 10

// hexChars is the length of a plan name's hash (A1-147: 10 hex).
const hexChars = 10

// maxName is the longest object name.
const maxName = 253

// Name is the plan made from plan Job job of target:
// <target>-<10 hex of the Job's name> (A1-147). One plan Job makes one
// plan, so a create retried after a lost response finds its plan.
func Name(target, job string) string {
	sum := sha256.Sum256([]byte(job))
	suffix := hex.EncodeToString(sum[:])[:hexChars]
	if len(target) > maxName-hexChars-1 {
		target = target[:maxName-hexChars-1]
	}
	return target + "-" + suffix
}

// Plan is what the decisions read of one TerraformPlan of the target.
type Plan struct {
	Name       string
	Generation int64
	InputsHash string
	// Job is the plan Job it was made from.
	Job      string
	Phase    v1alpha1.PlanPhase
	Approved bool
	Hash     string
	Created  time.Time
}

// Live reports whether p still gates an apply: not Applied, Superseded
// or Failed.
func (p Plan) Live() bool {
	switch p.Phase {
	case v1alpha1.PlanPhaseApplied, v1alpha1.PlanPhaseSuperseded, v1alpha1.PlanPhaseFailed:
		return false
	}
	return true
}

// PlanJob is the newest plan Job of the target's generation.
type PlanJob struct {
	Name       string
	Generation int64
	InputsHash string
	Running    bool
	Succeeded  bool
	// Attempt and Finished: when a failed one may be retried.
	Attempt  int
	Finished time.Time
}

// Apply is the newest finished apply of the target.
type Apply struct {
	Generation int64
	// Plan is the plan its Job applied (the Job's captf.io/plan), "" when
	// the Job is gone or applied none.
	Plan        string
	Succeeded   bool
	PlanChanged bool
	Finished    time.Time
}

// Input is what the controller gathers for one target whose apply is
// gated (applyPolicy Manual, applied before).
type Input struct {
	Generation int64
	InputsHash string
	Plans      []Plan
	// PlanJob is nil when the generation has none.
	PlanJob *PlanJob
	// Apply is nil when none finished.
	Apply *Apply
	// Due: an apply of the generation is due (the apply decision says
	// so); when false only the plans' phases are kept.
	Due bool
	// Guard: the target is a cluster under applyPolicy Automatic whose
	// applies are guarded (upstream A3-64): PlanJob is then the newest
	// apply that stopped at deletions or replacements (nil when the newest
	// did not), and without a live plan the guarded apply starts
	// (GuardedApply) instead of a plan Job.
	Guard bool
}

// Action is what the controller does next.
type Action string

const (
	// None: nothing to start; the plans' phases may change.
	None Action = "None"
	// StartPlanJob: start a plan Job of the generation.
	StartPlanJob Action = "StartPlanJob"
	// WaitPlanJob: a plan Job runs, or a failed one waits for its retry
	// (Decision.RetryAt).
	WaitPlanJob Action = "WaitPlanJob"
	// CreatePlan: make the TerraformPlan from the finished plan Job
	// Decision.Job.
	CreatePlan Action = "CreatePlan"
	// WaitApproval: Decision.Plan waits for approval.
	WaitApproval Action = "WaitApproval"
	// ApplyPlan: Decision.Plan is approved: start its apply.
	ApplyPlan Action = "ApplyPlan"
	// GuardedApply (Input.Guard): no plan gates the apply: start it with
	// the destructive guard.
	GuardedApply Action = "GuardedApply"
)

// Update is a phase change of one plan.
type Update struct {
	Name   string
	Phase  v1alpha1.PlanPhase
	Reason v1alpha1.ConditionReason
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Plan is the live plan of the generation (WaitApproval, ApplyPlan).
	Plan *Plan
	// Job is the plan Job to make the plan from (CreatePlan).
	Job string
	// RetryAt is when a failed plan Job is retried (WaitPlanJob).
	RetryAt time.Time
	// Updates are the plans whose phase changes; Delete the finished
	// plans beyond KeepFinished, oldest first.
	Updates []Update
	Delete  []string
}

// RetryBackoff is the wait after failed plan Job attempt n: 1m, 2m, 4m,
// ... at most 30m (T7's backoff).
func RetryBackoff(attempt int) time.Duration {
	d := time.Minute
	for i := 1; i < attempt && d < 30*time.Minute; i++ {
		d *= 2
	}
	return min(d, 30*time.Minute)
}
