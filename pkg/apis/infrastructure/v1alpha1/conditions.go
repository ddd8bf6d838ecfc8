package v1alpha1

// ConditionType is the type of a status condition (SPEC section 10).
type ConditionType string

// ConditionReason is the reason of a status condition (SPEC section 10).
type ConditionReason string

// Condition types of the workload kinds.
const (
	// ConditionIdentityAllowed says whether the object's identity exists,
	// its source Secret exists, and it allows the object's namespace.
	ConditionIdentityAllowed ConditionType = "IdentityAllowed"
	// ConditionCredentialsMirrored says whether the mirror in the object's
	// namespace is current and carries the object's owner reference.
	ConditionCredentialsMirrored ConditionType = "CredentialsMirrored"
	// ConditionApplyJobSucceeded reports the outcome of the latest Job.
	ConditionApplyJobSucceeded ConditionType = "ApplyJobSucceeded"
	// ConditionPaused says whether the annotation cluster.x-k8s.io/paused
	// stops the object's Jobs (SPEC T5).
	ConditionPaused ConditionType = "Paused"
	// ConditionOutputsAvailable says whether status.outputs holds the
	// outputs of the state after the newest successful apply (SPEC T4).
	// Not set before the first successful apply. It is not part of Ready.
	ConditionOutputsAvailable ConditionType = "OutputsAvailable"
	// ConditionDependenciesReady says whether the object's Cluster API
	// owners, its cluster's infrastructure and its bootstrap data allow an
	// apply (SPEC K2, K4, K5).
	ConditionDependenciesReady ConditionType = "DependenciesReady"
	// ConditionDeletionBlocked says, on a deleting TerraformCluster,
	// whether its destroy waits for machines and pools of the cluster
	// (SPEC K4).
	ConditionDeletionBlocked ConditionType = "DeletionBlocked"
	// ConditionOutputsValid says whether the module's contract outputs are
	// valid for Cluster API (SPEC K7): present, not null, well formed.
	ConditionOutputsValid ConditionType = "OutputsValid"
	// ConditionStateReadable is False (reason StateLocked) while the
	// state's lock is held by something other than a Job of the object, so
	// no Job starts (SPEC O3, upstream A1-158, A3-49); True (reason
	// StateRead, upstream's) once that lock is free. An object whose state
	// was never locked by anything else does not have it.
	ConditionStateReadable ConditionType = "StateReadable"
	// ConditionInfrastructureHealthy reports the module's health output
	// (SPEC K7, K8); once provisioned, Ready follows it.
	ConditionInfrastructureHealthy ConditionType = "InfrastructureHealthy"
	// ConditionReady summarises the others: True only when every one is True.
	// It carries the reason and message of the first that is not.
	ConditionReady ConditionType = "Ready"
	// ConditionDriftDetected says what the newest drift check found (SPEC
	// O7, upstream A1-163): True when the infrastructure differs from what
	// the module says, False when it does not, Unknown when the check
	// failed. Absent until a drift check has finished.
	ConditionDriftDetected ConditionType = "DriftDetected"
	// ConditionRestoreJobSucceeded says what became of the newest
	// captf.io/restore-state request (SPEC O5, upstream A1-159): set once
	// the annotation is first acted on.
	ConditionRestoreJobSucceeded ConditionType = "RestoreJobSucceeded"
)

// Condition types of TerraformClusterIdentity.
const (
	// ConditionMirrorsCurrent says whether every mirror of the identity
	// carries the source's current hash (SPEC section 13). Ours.
	ConditionMirrorsCurrent ConditionType = "MirrorsCurrent"
	// ConditionCredentialsValid is the hygiene report on the source's keys
	// and values (SPEC C4); never a refusal.
	ConditionCredentialsValid ConditionType = "CredentialsValid"
	// ConditionRotationComplete is True once every mirror carries the
	// current hash and no running Job started with an older one (SPEC C5).
	ConditionRotationComplete ConditionType = "RotationComplete"
)

// Reasons of IdentityAllowed.
const (
	// ReasonIdentityAllowed: the identity exists, its Secret exists, and it
	// allows the namespace.
	ReasonIdentityAllowed ConditionReason = "IdentityAllowed"
	// ReasonIdentityNotFound: the object resolves to no identity, or to one
	// that does not exist (SPEC I2).
	ReasonIdentityNotFound ConditionReason = "IdentityNotFound"
	// ReasonNamespaceNotAllowed: the identity's allowedNamespaces does not
	// match the object's namespace (SPEC N1-N6, V1).
	ReasonNamespaceNotAllowed ConditionReason = "NamespaceNotAllowed"
	// ReasonSecretNotFound: the identity's source Secret does not exist (SPEC I2).
	ReasonSecretNotFound ConditionReason = "SecretNotFound"
	// ReasonNotOptedIn: --require-source-consent is on and the source Secret
	// lacks the label captf.io/credential=true or does not name the
	// identity in captf.io/credential-identities (SPEC C1).
	ReasonNotOptedIn ConditionReason = "NotOptedIn"
	// ReasonSourceRefused: the source Secret is itself a mirror, or a
	// service-account token (SPEC C2).
	ReasonSourceRefused ConditionReason = "SourceRefused"
	// ReasonCredentialsIncomplete: the source lacks a key of
	// spec.requiredKeys (SPEC C3).
	ReasonCredentialsIncomplete ConditionReason = "CredentialsIncomplete"
	// ReasonIdentityCheckFailed: the check could not complete (for example the
	// source Secret could not be read); it is retried.
	ReasonIdentityCheckFailed ConditionReason = "IdentityCheckFailed"
)

// Reasons of CredentialsMirrored.
const (
	// ReasonMirrored: the mirror is current and owned by the object.
	ReasonMirrored ConditionReason = "Mirrored"
	// ReasonMirrorFailed: the mirror could not be written, for example
	// because a foreign Secret holds its name (SPEC M7).
	ReasonMirrorFailed ConditionReason = "MirrorFailed"
	// ReasonMirrorPending: no mirror is wanted yet or any more, for example
	// while the identity is not allowed (SPEC V1).
	ReasonMirrorPending ConditionReason = "MirrorPending"
)

// Reasons of ApplyJobSucceeded.
const (
	// ReasonApplySucceeded: the latest apply Job completed.
	ReasonApplySucceeded ConditionReason = "ApplySucceeded"
	// ReasonDestroySucceeded: the destroy Job completed.
	ReasonDestroySucceeded ConditionReason = "DestroySucceeded"
	// ReasonApplyFailed: the latest apply Job failed.
	ReasonApplyFailed ConditionReason = "ApplyFailed"
	// ReasonDestroyFailed: the destroy Job failed.
	ReasonDestroyFailed ConditionReason = "DestroyFailed"
	// ReasonJobDeadlineExceeded: the latest Job ran past activeDeadlineSeconds.
	ReasonJobDeadlineExceeded ConditionReason = "JobDeadlineExceeded"
	// ReasonJobInterrupted: the latest Job's pod was evicted, preempted,
	// deleted or lost with its node, or a signal stopped the run; it is not
	// counted as a failure and a new Job starts at once (SPEC O2, A3-86).
	// ApplyJobSucceeded is Unknown: the run's outcome is not known.
	ReasonJobInterrupted ConditionReason = "JobInterrupted"
	// ReasonImagePullFailed: an image of the latest Job's pod could not be
	// pulled; the manager ended the Job (SPEC O2, A3-88).
	ReasonImagePullFailed ConditionReason = "ImagePullFailed"
	// ReasonImageInvalid: the module image holds no module (the runner's
	// image-layout error, SPEC O2, A3-06).
	ReasonImageInvalid ConditionReason = "ImageInvalid"
	// ReasonIdentityNotAllowed: a destroy waits for its identity to allow the
	// namespace again (SPEC V2).
	ReasonIdentityNotAllowed ConditionReason = "IdentityNotAllowed"
	// ReasonNoApplyYet: no Job has been created for this object yet.
	ReasonNoApplyYet ConditionReason = "NoApplyYet"
	// ReasonInvalidVariables: spec.variables breaks a limit of SPEC T3 that
	// the CRD cannot check (key syntax, the reserved captf_ prefix, 64 KiB),
	// so no Job runs until it is fixed. Ours: SPEC T3 says such limits are
	// "reported as a condition" without naming the reason.
	ReasonInvalidVariables ConditionReason = "InvalidVariables"
	// ReasonRunnerNotFound: the ServiceAccount spec.jobs.serviceAccountName
	// names does not exist or lacks the label captf.io/runner=true, or
	// captf-runner is held by an object captf did not create; no Job starts
	// (SPEC T1).
	ReasonRunnerNotFound ConditionReason = "RunnerNotFound"
	// ReasonRetainedStateExists: a state retained by an earlier object of
	// the same name exists and spec.adoptRetainedState is not set: no
	// apply Job starts (SPEC O5).
	ReasonRetainedStateExists ConditionReason = "RetainedStateExists"
	// ReasonJobRunning: a Job is running.
	ReasonJobRunning ConditionReason = "JobRunning"
	// ReasonWaitingForJobSlot: the Job is due but a Job cap holds it
	// (--max-active-jobs, or the cluster's spec.maxActiveJobs); it starts
	// when a slot frees, destroys first (SPEC O4, A1-155).
	ReasonWaitingForJobSlot ConditionReason = "WaitingForJobSlot"
	// ReasonPlanAwaitingApproval (ApplyJobSucceeded, SPEC O8, A1-154):
	// under applyPolicy Manual the generation's apply waits for the
	// approval of its TerraformPlan (status.pendingPlanRef), or for the
	// plan Job that makes it.
	ReasonPlanAwaitingApproval ConditionReason = "PlanAwaitingApproval"
	// ReasonPlanChanged (ApplyJobSucceeded, and a plan's Ready, SPEC O8,
	// A1-154): the apply of an approved plan planned again and found
	// another plan; it applied nothing, and a new plan waits for approval.
	// Not a failure: no backoff (A3-69).
	ReasonPlanChanged ConditionReason = "PlanChanged"
	// ReasonDestructivePlanBlocked (ApplyJobSucceeded, SPEC O8, A1-154):
	// a cluster under applyPolicy Automatic planned to delete or replace
	// resources; its guarded apply applied nothing, and the plan waits for
	// approval as a TerraformPlan with reason Destructive
	// (status.pendingPlanRef). Not a failure: no backoff (A3-69).
	ReasonDestructivePlanBlocked ConditionReason = "DestructivePlanBlocked"
)

// Reasons of OutputsAvailable (SPEC T4).
const (
	// ReasonOutputsRead: the state was read after the newest successful
	// apply; status.outputs and status.sensitiveOutputs hold its outputs.
	ReasonOutputsRead ConditionReason = "OutputsRead"
	// ReasonStateNotFound: after a successful apply there is no state
	// Secret tfstate-default-<suffix>, or it holds no state (for example a
	// module that configures no backend captf can replace).
	ReasonStateNotFound ConditionReason = "StateNotFound"
	// ReasonOutputsReadFailed: the state could not be read: not gzip, not
	// JSON, encrypted (OpenTofu state encryption), over 16 MiB
	// decompressed, another format version, or a split state lacking a
	// part. The last good outputs stay.
	ReasonOutputsReadFailed ConditionReason = "OutputsReadFailed"
	// ReasonOutputsTooLarge: the non-sensitive outputs exceed 32 KiB as JSON
	// (or the sensitive names do); the last good outputs stay.
	ReasonOutputsTooLarge ConditionReason = "OutputsTooLarge"
)

// Reasons of DependenciesReady (SPEC K2, K4, K5; upstream A1-149).
const (
	// ReasonDependenciesReady: the owners name the object back, the
	// cluster's infrastructure is provisioned and the bootstrap data is
	// there (or the object is standalone).
	ReasonDependenciesReady ConditionReason = "DependenciesReady"
	// ReasonWaitingForOwner: no Cluster API object owns and names the
	// object yet (K2).
	ReasonWaitingForOwner ConditionReason = "WaitingForOwner"
	// ReasonOwnerMismatch: the owner names another object (K2).
	ReasonOwnerMismatch ConditionReason = "OwnerMismatch"
	// ReasonClusterNotTerraform: the Cluster's infrastructure is not a
	// TerraformCluster (K2).
	ReasonClusterNotTerraform ConditionReason = "ClusterNotTerraform"
	// ReasonWaitingForClusterInfrastructure: a machine or pool waits for
	// its TerraformCluster to be provisioned (K4).
	ReasonWaitingForClusterInfrastructure ConditionReason = "WaitingForClusterInfrastructure"
	// ReasonWaitingForBootstrapData: a machine or pool waits for its
	// owner's bootstrap data Secret (K5).
	ReasonWaitingForBootstrapData ConditionReason = "WaitingForBootstrapData"
	// ReasonStateLocked: StateReadable=False, the state's lock is held by
	// something other than a Job of the object (O3).
	ReasonStateLocked ConditionReason = "StateLocked"
	// ReasonStateRead: StateReadable=True, the lock that held a Job back
	// is free (O3; upstream A1-158's True reason).
	ReasonStateRead ConditionReason = "StateRead"
	// ReasonVariablesSourceNotFound: a spec.variablesFrom source that is not
	// optional is missing or not labelled captf.io/variables=true (O9).
	ReasonVariablesSourceNotFound ConditionReason = "VariablesSourceNotFound"
	// ReasonVariablesInvalid: a variablesFrom source's keys or values break
	// T3's rules or its format (O9).
	ReasonVariablesInvalid ConditionReason = "VariablesInvalid"
)

// Reasons of OutputsValid (SPEC K7; upstream A1-160).
const (
	// ReasonOutputsValid: every contract output is valid.
	ReasonOutputsValid ConditionReason = "OutputsValid"
	// ReasonOutputsMissing: a required output is absent.
	ReasonOutputsMissing ConditionReason = "OutputsMissing"
	// ReasonOutputsPending: a required output is null.
	ReasonOutputsPending ConditionReason = "OutputsPending"
	// ReasonOutputsInvalid: an output is malformed.
	ReasonOutputsInvalid ConditionReason = "OutputsInvalid"
	// ReasonFailureDomainMismatch: a machine's output failure_domain
	// differs from its Machine's spec.failureDomain.
	ReasonFailureDomainMismatch ConditionReason = "FailureDomainMismatch"
	// ReasonProviderIDChanged: a machine's output provider_id differs from
	// the spec.providerID it was given.
	ReasonProviderIDChanged ConditionReason = "ProviderIDChanged"
)

// Reasons of InfrastructureHealthy (SPEC K7, K8; upstream A1-161).
const (
	// ReasonHealthy: the module reports the infrastructure healthy, or it
	// has no health output and is provisioned.
	ReasonHealthy ConditionReason = "Healthy"
	// ReasonInstanceDegraded: degraded but serving (Ready stays True).
	ReasonInstanceDegraded ConditionReason = "InstanceDegraded"
	// ReasonInstancePending: the instance is pending.
	ReasonInstancePending ConditionReason = "InstancePending"
	// ReasonInstanceStopped: the instance is stopped.
	ReasonInstanceStopped ConditionReason = "InstanceStopped"
	// ReasonInstanceTerminated: the instance is terminated.
	ReasonInstanceTerminated ConditionReason = "InstanceTerminated"
	// ReasonInstanceUnhealthy: the instance is unhealthy.
	ReasonInstanceUnhealthy ConditionReason = "InstanceUnhealthy"
	// ReasonProvisioning: the module reports it still provisioning.
	ReasonProvisioning ConditionReason = "Provisioning"
	// ReasonHealthUnknown: the health output cannot be read.
	ReasonHealthUnknown ConditionReason = "HealthUnknown"
	// ReasonWaitingForProvisioning: not provisioned yet.
	ReasonWaitingForProvisioning ConditionReason = "WaitingForProvisioning"
	// ReasonDeleting: Ready of an object being deleted (SPEC K8).
	ReasonDeleting ConditionReason = "Deleting"
)

// Reasons of DeletionBlocked (SPEC K4; upstream A1-164).
const (
	// ReasonDependentsExist: machines or pools of the cluster exist; the
	// cluster's destroy waits for them.
	ReasonDependentsExist ConditionReason = "DependentsExist"
	// ReasonNotBlocked: nothing holds the cluster's destroy.
	ReasonNotBlocked ConditionReason = "NotBlocked"
)

// Reasons of the identity's conditions.
const (
	// ReasonSecretFound: the identity's source Secret exists (Ready=True).
	ReasonSecretFound ConditionReason = "SecretFound"
	// ReasonAllMirrorsCurrent: every mirror carries the current source hash.
	ReasonAllMirrorsCurrent ConditionReason = "AllMirrorsCurrent"
	// ReasonMirrorsStale: some mirrors carry an older hash.
	ReasonMirrorsStale ConditionReason = "MirrorsStale"
	// ReasonMirrorsConflicted: a foreign Secret holds a mirror's name in some
	// namespace (SPEC M7).
	ReasonMirrorsConflicted ConditionReason = "MirrorsConflicted"
	// ReasonKeysValid: no key of the source needs attention (SPEC C4).
	ReasonKeysValid ConditionReason = "KeysValid"
	// ReasonKeysNeedAttention: some keys are not valid environment variable
	// names, start with TF_ or KUBE_, or hold empty or whitespace-ended
	// values; the message lists key names by category (SPEC C4).
	ReasonKeysNeedAttention ConditionReason = "KeysNeedAttention"
	// ReasonRotationComplete: every mirror carries the current hash and no
	// running Job started with an older one (SPEC C5).
	ReasonRotationComplete ConditionReason = "RotationComplete"
	// ReasonJobsOnPreviousCredentials: a running Job started with an older
	// hash (SPEC C5). (MirrorsStale is shared with MirrorsCurrent.)
	ReasonJobsOnPreviousCredentials ConditionReason = "JobsOnPreviousCredentials"
)

// Reasons of the workload Ready summary when every condition is True.
const (
	// ReasonReady: every condition is True.
	ReasonReady ConditionReason = "Ready"
	// ReasonPaused: the object carries cluster.x-k8s.io/paused; no apply or
	// destroy Job starts (its credentials stay mirrored) (SPEC T5).
	ReasonPaused ConditionReason = "Paused"
	// ReasonNotPaused: the object does not carry cluster.x-k8s.io/paused.
	ReasonNotPaused ConditionReason = "NotPaused"
)
