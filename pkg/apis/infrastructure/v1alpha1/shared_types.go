package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
type JobsSpec struct {
	// Env is extra environment for the Job's Terraform container. Names starting
	// with TF_ or KUBE_, and HOME, are reserved and rejected (SPEC A9): the Job
	// and the runner set those themselves. TERRAFORM_CONFIG (the legacy
	// TF_CLI_CONFIG_FILE) and GODEBUG (http2debug prints request headers, i.e.
	// credentials) are rejected too: the runner removes them (SPEC B7).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TF_') && !e.name.startsWith('KUBE_') && !(e.name in ['HOME', 'TERRAFORM_CONFIG', 'GODEBUG']))",message="spec.jobs.env must not set HOME, TERRAFORM_CONFIG, GODEBUG or names starting with TF_ or KUBE_: the Job and the runner set or remove those (A9, B7)"
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
}

// JobAction is what a Job does with the module.
// +kubebuilder:validation:Enum=apply;destroy
type JobAction string

const (
	// JobActionApply runs `terraform apply`.
	JobActionApply JobAction = "apply"
	// JobActionDestroy runs `terraform destroy`.
	JobActionDestroy JobAction = "destroy"
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
	// Conditions: IdentityAllowed, CredentialsMirrored, ApplyJobSucceeded and
	// the Ready summary (SPEC section 10).
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
}

// GetConditions returns the status conditions.
func (s *WorkloadStatus) GetConditions() []metav1.Condition { return s.Conditions }
