package v1alpha1

// Event reasons (SPEC section 10).
const (
	// EventMirrorCreated (Normal, workload): a mirror was created.
	EventMirrorCreated = "MirrorCreated"
	// EventMirrorRemoved (Normal, workload): a mirror was deleted (V1, V3, V4).
	EventMirrorRemoved = "MirrorRemoved"
	// EventMirrorConflict (Warning, workload): a foreign Secret holds the
	// mirror's name (M7).
	EventMirrorConflict = "MirrorConflict"
	// EventIdentityNotAllowed (Warning, workload): the identity does not
	// allow the object's namespace, or cannot be used.
	EventIdentityNotAllowed = "IdentityNotAllowed"
	// EventOwnerReferenceRepaired (Normal, workload): an owner reference with
	// an older UID was replaced (M5).
	EventOwnerReferenceRepaired = "OwnerReferenceRepaired"
	// EventSecretFound (Normal, identity): the source Secret appeared.
	EventSecretFound = "SecretFound"
	// EventSecretNotFound (Warning, identity): the source Secret is missing.
	EventSecretNotFound = "SecretNotFound"
	// EventInfrastructureAbandoned (Warning, workload): the finalizer was
	// removed without a destroy (V2).
	EventInfrastructureAbandoned = "InfrastructureAbandoned"
	// EventKeysNeedAttention (Warning, identity): the set of keys the hygiene
	// report names changed (SPEC C4).
	EventKeysNeedAttention = "KeysNeedAttention"
	// EventKeysValid (Normal, identity): no key needs attention any more.
	EventKeysValid = "KeysValid"
	// EventForceUnlocked (Warning, workload): the state's lock was held
	// by a finished Job of the object and was released before the next
	// Job (SPEC O3, A3-48).
	EventForceUnlocked = "ForceUnlocked"
	// EventStateLocked (Warning, workload): the state's lock is held by
	// something else; no Job starts until it is released (O3, A3-49).
	EventStateLocked = "StateLocked"
	// EventStateAdopted (Normal, workload): the state records the object's
	// spec as applied, so no apply Job runs for it (K11: a moved or
	// restored object).
	EventStateAdopted = "StateAdopted"
	// EventStateBackedUp (Normal, workload): a new state serial was
	// copied to a backup Secret (SPEC O5).
	EventStateBackedUp = "StateBackedUp"
	// EventStateRestored (Normal, workload): a restore Job pushed a state
	// backup back into the backend (SPEC O5, upstream A7-17).
	EventStateRestored = "StateRestored"
	// EventStateRestoreFailed (Warning, workload): a restore Job failed,
	// or the annotation named no kept backup (SPEC O5, upstream A7-17).
	EventStateRestoreFailed = "StateRestoreFailed"
	// EventInfrastructureRetained (Normal, workload): deleted under
	// spec.deletionPolicy Retain, without a destroy Job; the state and
	// its backups stay (SPEC O5).
	EventInfrastructureRetained = "InfrastructureRetained"
	// EventRetainedStateAdopted (Normal, workload): the object took over
	// the state an earlier object retained (spec.adoptRetainedState).
	EventRetainedStateAdopted = "RetainedStateAdopted"
	// EventMovedAway (Normal, workload): clusterctl move deleted the source
	// copy; no destroy, the state was kept (K11).
	EventMovedAway = "MovedAway"
	// EventRunFinished (Normal for a success, else Warning; workload and
	// its Job): a finished Job's run was recorded in status.lastRun, with
	// its planned changes or why it failed (SPEC O1, upstream A3-73).
	EventRunFinished = "RunFinished"
	// EventJobInterrupted (Warning, workload): a recorded run was
	// interrupted (its pod evicted, preempted or deleted, its node lost,
	// the runner stopped by a signal, or the Job deleted while it ran);
	// emitted once per Job, when its run is recorded, naming the Job and
	// what happened (SPEC O2, upstream A7-13).
	EventJobInterrupted = "JobInterrupted"
	// EventPlanSummary (Normal, workload): the changes a recorded run
	// planned (SPEC O1, upstream A3-73).
	EventPlanSummary = "PlanSummary"
	// EventDriftDetected (Warning, workload): a drift check found changes,
	// and which resources (SPEC O7, upstream A7-20).
	EventDriftDetected = "DriftDetected"
	// EventDriftResolved (Normal, workload): a drift check found none
	// after one that did (SPEC O7, upstream A7-20).
	EventDriftResolved = "DriftResolved"
	// EventDriftRemediationStarted (Normal, workload): an apply started to
	// put drift back (SPEC O7, upstream A7-20).
	EventDriftRemediationStarted = "DriftRemediationStarted"
	// EventDigestPinned (Normal, workload): status.source.imageDigest was
	// recorded from a successful apply's pod (SPEC O6, upstream A3-72).
	EventDigestPinned = "DigestPinned"
	// EventDigestUnknown (Warning, workload): a successful apply's pod
	// reported no pullable digest (an image loaded on the node, not
	// pulled), so nothing was pinned (SPEC O6, upstream A3-72).
	EventDigestUnknown = "DigestUnknown"
)
