package v1alpha1

// ConditionInputsApplied says whether the newest finished apply ran with
// the object's current spec and contract inputs (upstream A1-171, shown
// in the wide column InputsApplied, A1-26, A1-33; SPEC K1, K6). It is
// informational: Ready does not read it (K8). Not set on a deleting
// object (it keeps its last value).
const ConditionInputsApplied ConditionType = "InputsApplied"

// Reasons of InputsApplied. Upstream names the condition but lists no
// reasons; these are ours. ReasonNoApplyYet and ReasonApplyFailed are
// shared with ApplyJobSucceeded.
const (
	// ReasonInputsApplied (True): the newest apply succeeded for the
	// current generation with the contract inputs rendered now (same
	// inputs hash, status.lastApply.inputsHash).
	ReasonInputsApplied ConditionReason = "InputsApplied"
	// ReasonInputsPinned (True): a provisioned TerraformMachine runs with
	// the inputs it was provisioned with (K5); a change of its Cluster API
	// inputs reaches it by replacement (a Machine rollout), not by a
	// re-apply, so it is not pending.
	ReasonInputsPinned ConditionReason = "InputsPinned"
	// ReasonSpecChanged (False): the object's generation is newer than
	// the newest apply's; the apply of the new spec is due or running.
	ReasonSpecChanged ConditionReason = "SpecChanged"
	// ReasonInputsChanged (False): the contract inputs rendered now hash
	// to another value than those of the newest apply (a MachinePool's
	// replicas, a cluster's exports, a pool's bootstrap data, K6); the
	// re-apply is due or running.
	ReasonInputsChanged ConditionReason = "InputsChanged"
	// ReasonInputsNotRendered (Unknown): the current inputs cannot be
	// rendered while DependenciesReady is not True.
	ReasonInputsNotRendered ConditionReason = "InputsNotRendered"
	// ReasonInputsNotRecorded (Unknown): the newest apply recorded no
	// inputs hash (it ran before the manager recorded them).
	ReasonInputsNotRecorded ConditionReason = "InputsNotRecorded"
)
