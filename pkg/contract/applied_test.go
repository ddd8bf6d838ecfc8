package contract

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestInputsApplied is the table of the InputsApplied condition (UPSTREAM
// A1-171, SPEC K1, K6): True only when the newest apply succeeded for the
// current generation with the inputs rendered now, or for a provisioned
// machine that pins its inputs (K5); False while an apply of other inputs
// or another generation is due or running; Unknown when it cannot be told.
func TestInputsApplied(t *testing.T) {
	rec := func(outcome v1alpha1.RunOutcome, hash string) *v1alpha1.RunRecord {
		return &v1alpha1.RunRecord{JobName: "tfc-a-apply-3", Generation: 3, Outcome: outcome, InputsHash: hash, Attempt: 1}
	}
	ok := rec(v1alpha1.RunSucceeded, "h1")
	cases := []struct {
		name   string
		facts  AppliedFacts
		status metav1.ConditionStatus
		reason v1alpha1.ConditionReason
	}{
		{"no apply yet", AppliedFacts{InputsHash: "h1"}, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet},
		{"no apply yet, pinned does not matter", AppliedFacts{Pinned: true}, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet},
		{"applied with the current inputs", AppliedFacts{LastApply: ok, GenerationApplied: true, InputsHash: "h1"}, metav1.ConditionTrue, v1alpha1.ReasonInputsApplied},
		{"contract inputs changed", AppliedFacts{LastApply: ok, GenerationApplied: true, InputsHash: "h2"}, metav1.ConditionFalse, v1alpha1.ReasonInputsChanged},
		{"spec changed", AppliedFacts{LastApply: ok, InputsHash: "h1"}, metav1.ConditionFalse, v1alpha1.ReasonSpecChanged},
		{"spec changed on a pinned machine", AppliedFacts{LastApply: ok, Pinned: true}, metav1.ConditionFalse, v1alpha1.ReasonSpecChanged},
		{"newest apply failed", AppliedFacts{LastApply: rec(v1alpha1.RunFailed, "h1"), GenerationApplied: true, InputsHash: "h1"}, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed},
		{"newest apply ran past its deadline", AppliedFacts{LastApply: rec(v1alpha1.RunDeadlineExceeded, "h1"), GenerationApplied: true, InputsHash: "h2"}, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed},
		{"pinned machine: no inputs rendered, none pending", AppliedFacts{LastApply: ok, GenerationApplied: true, Pinned: true}, metav1.ConditionTrue, v1alpha1.ReasonInputsPinned},
		{"dependencies not ready", AppliedFacts{LastApply: ok, GenerationApplied: true}, metav1.ConditionUnknown, v1alpha1.ReasonInputsNotRendered},
		{"record without a hash", AppliedFacts{LastApply: rec(v1alpha1.RunSucceeded, ""), GenerationApplied: true, InputsHash: "h1"}, metav1.ConditionUnknown, v1alpha1.ReasonInputsNotRecorded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := InputsApplied(tc.facts)
			if got.Status != tc.status || got.Reason != tc.reason || got.Message == "" {
				t.Errorf("InputsApplied = %s/%s %q, want %s/%s with a message", got.Status, got.Reason, got.Message, tc.status, tc.reason)
			}
		})
	}
}
