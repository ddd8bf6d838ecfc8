package contract

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// AppliedFacts is what InputsApplied decides from (upstream A1-171).
type AppliedFacts struct {
	// LastApply is status.lastApply: the newest finished apply, or the
	// record of an adopted one (K11, O5); nil before any.
	LastApply *v1alpha1.RunRecord
	// GenerationApplied: LastApply covers the object's current generation
	// (the manager's own field write is not a new one, T5).
	GenerationApplied bool
	// Pinned: a provisioned TerraformMachine, which runs with the inputs
	// it was provisioned with and renders none (K5).
	Pinned bool
	// InputsHash is the hash of the contract inputs rendered this pass
	// (K6); empty when none could be (dependencies not ready).
	InputsHash string
}

// InputsApplied decides the InputsApplied condition: whether the newest
// apply ran with the spec and contract inputs the object has now. It
// matches what the apply decision does (K6): False exactly when an apply
// of other inputs or another generation is due or running; a provisioned
// machine, which does not re-apply for its Cluster API inputs, is True
// (InputsPinned) once its generation is applied.
func InputsApplied(f AppliedFacts) Condition {
	rec := f.LastApply
	switch {
	case rec == nil:
		return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonNoApplyYet, Message: "no apply has finished yet"}
	case !f.GenerationApplied:
		return Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonSpecChanged,
			Message: fmt.Sprintf("the newest apply (Job %s) ran for generation %d: the apply of the current spec is due or running", rec.JobName, rec.Generation)}
	case rec.Outcome != v1alpha1.RunSucceeded:
		return Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonApplyFailed,
			Message: fmt.Sprintf("the newest apply (Job %s) ended %s: see ApplyJobSucceeded", rec.JobName, rec.Outcome)}
	case f.Pinned:
		return Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInputsPinned,
			Message: "provisioned: the machine keeps the inputs it was provisioned with (K5); Cluster API changes reach it by replacement"}
	case f.InputsHash == "":
		return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonInputsNotRendered,
			Message: "the current contract inputs cannot be rendered until DependenciesReady is True"}
	case rec.InputsHash == "":
		return Condition{Status: metav1.ConditionUnknown, Reason: v1alpha1.ReasonInputsNotRecorded,
			Message: fmt.Sprintf("the newest apply (Job %s) recorded no inputs hash", rec.JobName)}
	case rec.InputsHash != f.InputsHash:
		return Condition{Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInputsChanged,
			Message: fmt.Sprintf("the contract inputs changed since the newest apply (Job %s): their re-apply is due or running", rec.JobName)}
	}
	return Condition{Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonInputsApplied,
		Message: fmt.Sprintf("the newest apply (Job %s) ran with the current spec and contract inputs", rec.JobName)}
}
