package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// IdentityReference names a TerraformClusterIdentity.
type IdentityReference struct {
	// Name of the TerraformClusterIdentity (cluster-scoped).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// SourceSpec says what a Job runs.
type SourceSpec struct {
	// Image is the module image: it contains Terraform and the module, and its
	// working directory is the module directory. The manager's runner binary is
	// copied into it by an init container (SPEC J5). Without an image no Job is
	// created and ApplyJobSucceeded says so.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Image string `json:"image,omitempty"`
}

// JobsSpec tunes the Jobs the manager creates for an object.
// +kubebuilder:validation:XValidation:rule="!has(self.lockTimeoutSeconds) || !has(self.activeDeadlineSeconds) || self.lockTimeoutSeconds < self.activeDeadlineSeconds",message="spec.jobs.lockTimeoutSeconds must be below spec.jobs.activeDeadlineSeconds (default 3600): a run that waits for the state lock must still have time to run (T8)"
type JobsSpec struct {
	// Env is extra environment for the Job's Terraform container. Names starting
	// with TF_, KUBE_ or CAPTF_, and HOME, are reserved and rejected (SPEC A9,
	// T3): the Job and the runner set those themselves. TERRAFORM_CONFIG (the
	// legacy TF_CLI_CONFIG_FILE) and GODEBUG (http2debug prints request
	// headers, i.e. credentials) are rejected too: the runner removes them
	// (SPEC B7).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TF_') && !e.name.startsWith('KUBE_') && !(e.name in ['HOME', 'TERRAFORM_CONFIG', 'GODEBUG']))",message="spec.jobs.env must not set HOME, TERRAFORM_CONFIG, GODEBUG or names starting with TF_ or KUBE_: the Job and the runner set or remove those (A9, B7)"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('CAPTF_'))",message="spec.jobs.env must not set names starting with CAPTF_: the Job sets those for the runner (CAPTF_VARIABLES carries spec.variables, T3)"
	Env []corev1.EnvVar `json:"env,omitempty"`

	// ActiveDeadlineSeconds bounds each Job's run time (SPEC J4).
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// ReapplyOnRotation starts a new apply Job when the mirror's source hash
	// changes, once the running Job (if any) ends; never during a deletion
	// (SPEC C6). For modules that copy the credential into the
	// infrastructure they build.
	// +optional
	ReapplyOnRotation bool `json:"reapplyOnRotation,omitempty"`

	// LockTimeoutSeconds is how long Terraform waits for the state lock held
	// by another run before it gives up (`-lock-timeout`, SPEC T8). 0 means
	// do not wait. When set it must be below activeDeadlineSeconds. Unset,
	// the Job waits 300 s, or half the deadline when the deadline is shorter
	// than 600 s: applied when the Job is built, never stored, so every
	// deadline J4 allows stays valid.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86399
	LockTimeoutSeconds *int64 `json:"lockTimeoutSeconds,omitempty"`

	// PodSecurityContext is merged over the Job pod's securityContext field by
	// field (SPEC T6): a field set here replaces the default, an unset field
	// keeps it. The defaults pass Pod Security "restricted": runAsNonRoot
	// true, runAsUser, runAsGroup and fsGroup 65532, seccompProfile
	// RuntimeDefault. Relaxing them may get the pod refused in a namespace
	// that enforces "restricted".
	// +optional
	PodSecurityContext *corev1.PodSecurityContext `json:"podSecurityContext,omitempty"`

	// SecurityContext is merged over the securityContext of the Terraform
	// container (not the init container) field by field (SPEC T6). The
	// defaults are allowPrivilegeEscalation false, capabilities.drop [ALL]
	// and readOnlyRootFilesystem true. privileged: true,
	// allowPrivilegeEscalation: true and any capabilities.add entry are
	// refused.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.privileged) || !self.privileged",message="spec.jobs.securityContext.privileged must not be true: Job pods run unprivileged (T6)"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation",message="spec.jobs.securityContext.allowPrivilegeEscalation must not be true (T6)"
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || !has(self.capabilities.add) || size(self.capabilities.add) == 0",message="spec.jobs.securityContext.capabilities.add must be empty: Job pods get no added capability (T6)"
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`

	// ServiceAccountName is the ServiceAccount the Jobs run as (SPEC T1).
	// Unset: captf-runner, which the manager creates in the namespace with
	// a RoleBinding to the ClusterRole captf-runner (Secrets and Leases, what
	// Terraform's kubernetes state backend needs). Set: that ServiceAccount
	// must exist and carry the label captf.io/runner=true, and its
	// permissions are the operator's to grant; otherwise no Job starts
	// (ApplyJobSucceeded=False/RunnerNotFound).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
}

// JobAction is what a Job does with the module.
// +kubebuilder:validation:Enum=apply;destroy;drift;restore;plan
type JobAction string

const (
	// JobActionApply runs `terraform apply`.
	JobActionApply JobAction = "apply"
	// JobActionDestroy runs `terraform destroy`.
	JobActionDestroy JobAction = "destroy"
	// JobActionDrift runs `terraform apply -refresh-only` and `terraform
	// plan -refresh=false`: a drift check, never an apply (SPEC O7).
	JobActionDrift JobAction = "drift"
	// JobActionRestore runs `terraform state push -force` of a state
	// backup and `terraform state list` (SPEC O5, upstream A3-56).
	JobActionRestore JobAction = "restore"
	// JobActionPlan runs `terraform plan -out` and `terraform show -json`:
	// the plan of a spec change under applyPolicy Manual, which becomes a
	// TerraformPlan; never an apply (SPEC O8).
	JobActionPlan JobAction = "plan"
)

// JobReference records a Job the manager created for an object.
type JobReference struct {
	// Name of the Job, in the object's namespace.
	Name string `json:"name"`
	// Action the Job runs.
	Action JobAction `json:"action"`
	// Generation of the object the Job was created for.
	Generation int64 `json:"generation"`
}

// WorkloadStatus is the observed state shared by the three workload kinds.
type WorkloadStatus struct {
	// Conditions: IdentityAllowed, CredentialsMirrored, ApplyJobSucceeded,
	// Paused, OutputsAvailable and the Ready summary (SPEC section 10, T4,
	// T5).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Identity is the TerraformClusterIdentity this object resolved to on its
	// last reconcile (SPEC I1-I3), empty when it resolved to none.
	// +optional
	Identity string `json:"identity,omitempty"`

	// LastJob is the most recent Job the manager created for this object.
	// +optional
	LastJob *JobReference `json:"lastJob,omitempty"`

	// LastApply records the newest finished apply Job: its generation,
	// source hash, name, outcome, finish time and attempt (SPEC T7). The
	// manager decides from it, so a finished Job that is deleted never
	// runs its generation again.
	// +optional
	LastApply *RunRecord `json:"lastApply,omitempty"`

	// LastDestroy records the newest finished destroy Job, like LastApply
	// (SPEC T7): a failed destroy is retried with backoff even when its Job
	// is gone.
	// +optional
	LastDestroy *RunRecord `json:"lastDestroy,omitempty"`

	// LastDriftCheck records the newest finished drift Job, like
	// LastApply (SPEC O7, upstream A1-82): the next check is due an
	// interval after the newest of these records.
	// +optional
	LastDriftCheck *RunRecord `json:"lastDriftCheck,omitempty"`

	// LastPlan records the newest finished plan Job, like LastApply
	// (SPEC O8): under applyPolicy Manual, its result becomes a
	// TerraformPlan.
	// +optional
	LastPlan *RunRecord `json:"lastPlan,omitempty"`

	// PendingPlanRef names the TerraformPlan the next apply waits for: its
	// approval starts the apply (SPEC O8, upstream A1-107, A1-129). Unset
	// when no apply waits for one.
	// +optional
	PendingPlanRef *PlanReference `json:"pendingPlanRef,omitempty"`

	// LastRun is the newest finished run, from the runner's result
	// document in its pod's termination message (SPEC O1): the steps with
	// their exit codes and durations, the planned changes, and why it
	// failed. Recorded once per Job; kubectl describe shows it.
	// +optional
	LastRun *LastRun `json:"lastRun,omitempty"`

	// Source is the module image digest the runs are pinned to (SPEC O6),
	// recorded from the pod of a successful apply.
	// +optional
	Source *SourceStatus `json:"source,omitempty"`

	// ObservedRetry is the value of the annotation captf.io/retry the
	// manager last acted on (SPEC T7): a different value runs the apply, or
	// the pending destroy, once more. Values longer than 128 characters are
	// kept as "sha256:" and the first 32 hex characters of their SHA-256.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ObservedRetry string `json:"observedRetry,omitempty"`

	// Outputs are the non-sensitive outputs of the Terraform state after
	// the newest successful apply (SPEC T4): a JSON object of output name to
	// its value, exactly as the module declares them (`output` blocks of
	// the root module). At most 32 KiB as JSON; larger outputs are not
	// published (OutputsAvailable=False/OutputsTooLarge). When a read fails,
	// the outputs of the last good read stay.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Outputs *runtime.RawExtension `json:"outputs,omitempty"`

	// SensitiveOutputs are the names of the outputs the module marks
	// `sensitive = true`, sorted. Their values never leave the state Secret
	// (SPEC T4, X1): read them from the state with the backend's own tools.
	// They stay from the last good read, like outputs.
	// +optional
	// +listType=set
	SensitiveOutputs []string `json:"sensitiveOutputs,omitempty"`

	// ContractOutputs are the contract outputs of the object's role (SPEC
	// K7: endpoint, failure domains, exports, provider ID or IDs,
	// addresses, replicas, health...), read from the state on their own,
	// each within its own bound, when status.outputs could not publish
	// them (OutputsAvailable=False/OutputsTooLarge: all non-sensitive
	// outputs together are over 32 KiB). The Cluster API fields are mapped
	// from here while it is set, else from status.outputs; a read that
	// publishes status.outputs clears it.
	// +optional
	ContractOutputs *ContractOutputs `json:"contractOutputs,omitempty"`

	// OutputsSource is the successful apply Job after which the state was
	// last read for outputs, whether that read succeeded or not. The state
	// is read once per successful apply recorded in lastApply: a read
	// happens when lastApply is a succeeded apply of another Job than the
	// one named here (SPEC T4: a state that failed to read is not read
	// again in a loop; T7: the record, not the Job, decides).
	// +optional
	OutputsSource *OutputsSource `json:"outputsSource,omitempty"`

	// Initialization is the Cluster API v1beta2 provider contract's
	// initialization status (SPEC T5).
	// +optional
	Initialization *WorkloadInitialization `json:"initialization,omitempty"`

	// FailureDomains (TerraformCluster) are the failure domains the
	// module's output failure_domains declares, for Cluster API's
	// control-plane placement (SPEC K7).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`

	// Exports (TerraformCluster) is the module's output exports, at most
	// 64 KiB as JSON, {} when the output is null: what the cluster hands
	// its machines and pools as the input captf_cluster_outputs (SPEC K6,
	// K7).
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Exports *runtime.RawExtension `json:"exports,omitempty"`

	// Addresses (TerraformMachine) are the machine's addresses from the
	// output addresses (SPEC K7).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Addresses []MachineAddress `json:"addresses,omitempty"`

	// FailureDomain (TerraformMachine) is the failure domain the machine
	// runs in, from the output failure_domain; it must equal the
	// Machine's spec.failureDomain when that is set (SPEC K7).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// Interruptible (TerraformMachine) says the machine may be stopped by
	// its provider at any time (spot, preemptible), from the output
	// interruptible (SPEC K7).
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`

	// Replicas (TerraformMachinePool) is the number of instances the pool
	// has, from the output replicas (SPEC K7).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Ready (TerraformMachinePool) is true once the pool is provisioned
	// and stays true: the field Cluster API v1.14 reads on an
	// infrastructure machine pool (SPEC K7).
	// +optional
	Ready bool `json:"ready,omitempty"`

	// StateBackups are the backups of the Terraform state the manager
	// keeps, newest serial first (SPEC O5): each new serial read after a
	// finished Job that can write the state (an apply, a failed destroy,
	// a drift check) is copied to a backup Secret, and the newest
	// --state-backups (default 5) are kept.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	StateBackups []StateBackup `json:"stateBackups,omitempty"`

	// StateBackupJob is the finished Job, other than a successful apply
	// (whose read is outputsSource's), after which the state was last
	// read for a backup (SPEC O5): a failed apply, a failed destroy or a
	// drift check. The state is read once per such Job recorded, however
	// many passes follow.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StateBackupJob string `json:"stateBackupJob,omitempty"`

	// ObservedRestore is the value of the annotation captf.io/restore-state
	// the manager last acted on, by starting a restore Job or by refusing
	// it (SPEC O5): a restore runs once per value, whatever its outcome,
	// and a manager restart or resync never runs it again.
	// Values longer than 128 characters are kept as "sha256:" and the
	// first 32 hex characters of their SHA-256, like observedRetry.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ObservedRestore string `json:"observedRestore,omitempty"`

	// LastRestoredSerial is the serial of the backup the newest restore
	// Job pushes or pushed (upstream A1-86), set when the Job starts.
	// +optional
	LastRestoredSerial *int64 `json:"lastRestoredSerial,omitempty"`

	// LastRestore records the newest finished restore Job, like LastApply
	// (SPEC O5, T7).
	// +optional
	LastRestore *RunRecord `json:"lastRestore,omitempty"`
}

// FailureDomain is a failure domain a cluster's machines may be placed in
// (Cluster API v1beta2's FailureDomain).
type FailureDomain struct {
	// Name of the failure domain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// ControlPlane says whether control-plane machines may be placed here.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// Attributes are free-form attributes of the failure domain.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Attributes map[string]string `json:"attributes,omitempty"`
}

// MachineAddressType is the type of a machine's address (Cluster API's).
// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
type MachineAddressType string

// MachineAddress is one address of a machine (Cluster API's).
type MachineAddress struct {
	// Type of the address.
	Type MachineAddressType `json:"type"`
	// Address is the address itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// WorkloadInitialization reports the Cluster API v1beta2 initialization of
// an infrastructure object.
type WorkloadInitialization struct {
	// Provisioned is true once a succeeded apply Job of this object is
	// recorded in lastApply, and stays true (SPEC T5; Cluster API's
	// status.initialization.provisioned). Unset before.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// GetConditions returns the status conditions.
func (s *WorkloadStatus) GetConditions() []metav1.Condition { return s.Conditions }
