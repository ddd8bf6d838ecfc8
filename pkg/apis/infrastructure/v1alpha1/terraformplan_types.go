package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformPlan is SPEC O8's plan awaiting approval (upstream A1-137..A1-147).
// Only the manager creates plans and writes their spec; a person approves one
// by setting spec.approved, and the admission webhook then writes
// spec.approvedBy from the request's user (pkg/admission/plan). The
// workload controller makes one from a plan Job of a target under
// spec.applyPolicy Manual (pkg/plans decides, pkg/controllers/workload
// plans.go writes).

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=cluster-api
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`,description="The object whose apply this plan gates"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Create",type=integer,JSONPath=`.spec.summary.create`
// +kubebuilder:printcolumn:name="Update",type=integer,JSONPath=`.spec.summary.update`
// +kubebuilder:printcolumn:name="Replace",type=integer,JSONPath=`.spec.summary.replace`
// +kubebuilder:printcolumn:name="Delete",type=integer,JSONPath=`.spec.summary.delete`
// +kubebuilder:printcolumn:name="Approved",type=boolean,JSONPath=`.spec.approved`
// +kubebuilder:printcolumn:name="Approved By",type=string,JSONPath=`.spec.approvedBy`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// TerraformPlan is a Terraform plan of a TerraformCluster or
// TerraformMachinePool that waits for a person's approval (SPEC O8).
type TerraformPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is written by the manager, except approved, which an approver
	// sets, and approvedBy, which admission sets.
	// +required
	Spec TerraformPlanSpec `json:"spec"`

	// Status is written by the manager.
	// +optional
	Status TerraformPlanStatus `json:"status,omitempty"`
}

// PlanTargetReference names the object a plan belongs to, in the plan's
// namespace.
type PlanTargetReference struct {
	// Kind of the target.
	// +required
	// +kubebuilder:validation:Enum=TerraformCluster;TerraformMachinePool
	Kind string `json:"kind"`
	// Name of the target.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PlanReason is why a plan waits for approval (A1-140).
// +kubebuilder:validation:Enum=Manual;Destructive;ExportsChange
type PlanReason string

const (
	// PlanReasonManual: the target's applies need approval (applyPolicy Manual).
	PlanReasonManual PlanReason = "Manual"
	// PlanReasonDestructive: a cluster apply would delete or replace resources.
	PlanReasonDestructive PlanReason = "Destructive"
	// PlanReasonExportsChange: a pool apply would change the exports it keeps.
	PlanReasonExportsChange PlanReason = "ExportsChange"
)

// PlanAction is what a plan does to one resource.
// +kubebuilder:validation:Enum=create;update;replace;delete;import;move;forget
type PlanAction string

// PlanResourceChange is one resource of a plan's summary.
type PlanResourceChange struct {
	// Address is the resource's Terraform address.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Address string `json:"address"`
	// Action is what the plan does to it.
	// +required
	Action PlanAction `json:"action"`
}

// PlanSummary counts a plan's changes (A1-141). The counts are always
// written, so the columns show 0 rather than nothing.
type PlanSummary struct {
	// +optional
	// +kubebuilder:validation:Minimum=0
	Create int32 `json:"create"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Update int32 `json:"update"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replace int32 `json:"replace"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Delete int32 `json:"delete"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Import int32 `json:"import"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Move int32 `json:"move"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	Forget int32 `json:"forget"`
	// OutputChanges counts the outputs the plan changes.
	// +optional
	// +kubebuilder:validation:Minimum=0
	OutputChanges int32 `json:"outputChanges"`
	// Resources lists the changed resources, at most 50.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=50
	Resources []PlanResourceChange `json:"resources,omitempty"`
	// Truncated says resources lists only the first 50 changes.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// TerraformPlanSpec is a plan and its approval. targetRef is immutable, an
// approved plan's spec is immutable, approval cannot be withdrawn, and
// approvedBy is set exactly on approved plans (CEL); who may create a plan,
// write its spec or approve it, and the value of approvedBy, are decided by
// the admission webhook (SPEC O8).
// +kubebuilder:validation:XValidation:rule="self.targetRef == oldSelf.targetRef",message="spec.targetRef is immutable (O8)"
// +kubebuilder:validation:XValidation:rule="!oldSelf.approved || self == oldSelf",message="an approved plan's spec is immutable (O8): the manager makes a new plan for a new change"
// +kubebuilder:validation:XValidation:rule="self.approved == has(self.approvedBy)",message="spec.approvedBy is set exactly on approved plans, by admission from the approving user (O8)"
type TerraformPlanSpec struct {
	// TargetRef names the TerraformCluster or TerraformMachinePool whose
	// apply the plan gates. Immutable.
	// +required
	TargetRef PlanTargetReference `json:"targetRef"`

	// PlanHash is the plan's fingerprint (upstream's p2: keyed hash).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	PlanHash string `json:"planHash"`

	// InputsHash is the hash of the inputs the plan was made from.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	InputsHash string `json:"inputsHash,omitempty"`

	// Reason is why the plan waits for approval.
	// +required
	Reason PlanReason `json:"reason"`

	// Summary counts the plan's changes.
	// +optional
	Summary PlanSummary `json:"summary,omitempty"`

	// Approved, set by an approver, allows the apply of exactly this plan.
	// Set once: it cannot go back to false. Approving needs the verb
	// approve on terraformplans (the ClusterRole captf-plan-approver).
	// +optional
	// +kubebuilder:default=false
	// +kubebuilder:validation:XValidation:rule="self || !oldSelf",message="spec.approved cannot be withdrawn (O8): delete the plan instead"
	Approved bool `json:"approved,omitempty"`

	// ApprovedBy is the user who approved the plan. Admission sets it from
	// the approving request's user; a value written in a request is refused
	// unless it is the approving requester's own username (upstream A1-143).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ApprovedBy string `json:"approvedBy,omitempty"`
}

// PlanPhase is where a plan is in its life (A1-144).
// +kubebuilder:validation:Enum=Pending;Approved;Applied;Superseded;Failed
type PlanPhase string

// The phases, upstream's names.
const (
	PlanPhasePending    PlanPhase = "Pending"
	PlanPhaseApproved   PlanPhase = "Approved"
	PlanPhaseApplied    PlanPhase = "Applied"
	PlanPhaseSuperseded PlanPhase = "Superseded"
	PlanPhaseFailed     PlanPhase = "Failed"
)

// TerraformPlanStatus is a plan's observed state (A1-144, A1-145).
type TerraformPlanStatus struct {
	// Phase: Pending, Approved, Applied, Superseded or Failed.
	// +optional
	Phase PlanPhase `json:"phase,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready and Approved.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// TerraformPlanList is a list of TerraformPlan.
type TerraformPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformPlan `json:"items"`
}

// ConditionApproved is a plan's approval condition (A1-145); a plan's
// Ready is ConditionReady.
const ConditionApproved ConditionType = "Approved"

// Reasons of a plan's Ready and Approved conditions, upstream's names
// (A1-145), written by the workload controller (O8); ApprovalIgnored is
// not written (no approval is ignored yet).
const (
	ReasonPlanPending         ConditionReason = "Pending"
	ReasonPlanApproved        ConditionReason = "Approved"
	ReasonPlanApplied         ConditionReason = "Applied"
	ReasonPlanSuperseded      ConditionReason = "Superseded"
	ReasonPlanFailed          ConditionReason = "Failed"
	ReasonPlanNotApproved     ConditionReason = "NotApproved"
	ReasonPlanApprovalIgnored ConditionReason = "ApprovalIgnored"
)

// AnnotationPlan records on an apply Job the TerraformPlan it applies;
// AnnotationPlanJob records on a TerraformPlan the plan Job it was made
// from (SPEC O8).
const (
	AnnotationPlan    = "captf.io/plan"
	AnnotationPlanJob = "captf.io/plan-job"
)
