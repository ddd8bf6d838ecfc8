package v1alpha1

// Labels, annotations and the finalizer the manager reads and writes.
const (
	// LabelMirrored marks a mirror Secret (SPEC M3). The manager's only
	// Secret informer selects on it (SPEC M9).
	LabelMirrored = "captf.io/mirrored"
	// LabelManaged marks objects the manager created: mirrors and Jobs (SPEC M3, J1).
	LabelManaged = "captf.io/managed"
	// AnnotationIdentity names the identity a mirror belongs to (SPEC M3).
	AnnotationIdentity = "captf.io/identity"
	// AnnotationSourceHash is the hash of the source data a mirror was
	// written from (SPEC M3, M4).
	AnnotationSourceHash = "captf.io/source-hash"
	// AnnotationAbandonInfrastructure, set to the object's UID, releases a
	// deletion without a destroy Job (SPEC V2).
	AnnotationAbandonInfrastructure = "captf.io/abandon-infrastructure"
	// AnnotationProviderFieldsGeneration is set by the manager, in the same
	// update, when it writes the Cluster API fields from the outputs (SPEC
	// T5): its value is the generation that write creates, whose spec
	// differs from the applied one only by those fields, so it is not a
	// new generation to apply (J1). A later spec change makes a generation
	// it does not name.
	AnnotationProviderFieldsGeneration = "captf.io/provider-fields-generation"
	// AnnotationJobGeneration records on a Job the object generation it was
	// created for.
	AnnotationJobGeneration = "captf.io/generation"
	// AnnotationJobAction records on a Job whether it applies or destroys.
	AnnotationJobAction = "captf.io/action"
	// AnnotationJobReapply numbers a re-apply Job of a generation (SPEC C6).
	AnnotationJobReapply = "captf.io/reapply"
	// AnnotationJobDriftRemediation counts drift remediations in a row
	// (SPEC O7, upstream A3-92): on a remediation apply Job its number,
	// on a drift Job the row when it started.
	AnnotationJobDriftRemediation = "captf.io/drift-remediation"
	// AnnotationJobAttempt numbers a Job among the Jobs of its object,
	// action and generation (SPEC T7); absent means attempt 1 (or, on a
	// re-apply Job created before T7, 1 + its re-apply number).
	AnnotationJobAttempt = "captf.io/attempt"
	// AnnotationJobInterruptions counts on a Job the attempts of its
	// generation before it that were interrupted (SPEC O2): they are not
	// counted towards the failure backoff. Absent means none.
	AnnotationJobInterruptions = "captf.io/interruptions"
	// AnnotationInputsHash records on a Job, and on an inputs Secret, the
	// hash of the contract inputs it holds (SPEC K6).
	AnnotationInputsHash = "captf.io/inputs-hash"
	// AnnotationJobCluster names on a Job the TerraformCluster (same
	// namespace) whose Job cap it counts under: the cluster itself, or the
	// machine's or pool's cluster (SPEC O4).
	AnnotationJobCluster = "captf.io/cluster"
	// AnnotationRetry on a workload object: a new value runs the apply, or
	// the pending destroy, once more at once, whatever the last outcome
	// (SPEC T7). On a Job it records the value that Job was started for.
	AnnotationRetry = "captf.io/retry"
	// AnnotationRestoreState on a workload object names the serial of a
	// state backup (status.stateBackups) to push back into the backend:
	// a restore Job runs once per value (SPEC O5, upstream A3-44).
	AnnotationRestoreState = "captf.io/restore-state"
	// AnnotationJobRestoreSerial records on a restore Job the serial of
	// the backup it pushes (SPEC O5).
	AnnotationJobRestoreSerial = "captf.io/restore-serial"
	// FinalizerDestroy is set on a workload object once it has started an
	// apply Job, so its deletion runs a destroy Job first (SPEC J8).
	FinalizerDestroy = "captf.io/destroy"
	// LabelCredential, set to "true" on a source Secret, consents to its use
	// by the identities its AnnotationCredentialIdentities names (SPEC C1).
	LabelCredential = "captf.io/credential"
	// AnnotationCredentialIdentities lists, comma-separated, the identities
	// that may use a source Secret; "*" allows any (SPEC C1).
	AnnotationCredentialIdentities = "captf.io/credential-identities"
	// AnnotationPaused, Cluster API's pause, stops every Job of the object
	// (SPEC T5).
	AnnotationPaused = "cluster.x-k8s.io/paused"
	// AnnotationAppliedSpec, on a state Secret, is the hash of the spec
	// whose apply wrote it; AnnotationAppliedInputs the hash of its inputs
	// (SPEC K11: whether a spec was applied survives a move, where status
	// does not).
	AnnotationAppliedSpec   = "captf.io/applied-spec"
	AnnotationAppliedInputs = "captf.io/applied-inputs"
	// AnnotationBlockMove is set by the manager on an object while a Job of
	// it is starting or running: clusterctl move waits for it to go (K11).
	AnnotationBlockMove = "clusterctl.cluster.x-k8s.io/block-move"
	// AnnotationDeleteForMove marks clusterctl move's deletion of a source
	// copy: no destroy, the state is kept (K11).
	AnnotationDeleteForMove = "clusterctl.cluster.x-k8s.io/delete-for-move"
	// LabelVariables, set to "true" on a ConfigMap or Secret, lets objects
	// of its namespace take variables from it (SPEC O9).
	LabelVariables = "captf.io/variables"
	// AnnotationStandalone, set to "true" on a workload object, opts it out
	// of SPEC K2-K5: it runs without Cluster API owners, pause, order or
	// bootstrap data (for tests and users without Cluster API).
	AnnotationStandalone = "captf.io/standalone"
	// LabelClusterName names the cluster a machine or pool belongs to (SPEC 1.2).
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelRunner, set to "true" on a ServiceAccount, lets objects name it in
	// spec.jobs.serviceAccountName (SPEC T1).
	LabelRunner = "captf.io/runner"
	// RunnerName names the ServiceAccount, the RoleBinding and the
	// ClusterRole the Jobs run with by default (SPEC T1).
	RunnerName = "captf-runner"
	// LabelMoveHierarchy is set on the identity CRD so clusterctl move carries it.
	LabelMoveHierarchy = "clusterctl.cluster.x-k8s.io/move-hierarchy"
)

// Values of the boolean labels.
const LabelTrue = "true"

// MirrorNamePrefix starts every mirror's name (SPEC M1).
const MirrorNamePrefix = "captf-creds-"

// Kind names, defined once for every package that names them.
const (
	KindTerraformClusterIdentity = "TerraformClusterIdentity"
	KindTerraformCluster         = "TerraformCluster"
	KindTerraformMachine         = "TerraformMachine"
	KindTerraformMachinePool     = "TerraformMachinePool"
	// The template kinds (SPEC K9).
	KindTerraformClusterTemplate     = "TerraformClusterTemplate"
	KindTerraformMachineTemplate     = "TerraformMachineTemplate"
	KindTerraformMachinePoolTemplate = "TerraformMachinePoolTemplate"
	// The plan awaiting approval (SPEC O8).
	KindTerraformPlan = "TerraformPlan"
)
