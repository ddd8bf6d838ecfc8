package v1alpha1

// DriftAction is what a drift check that found drift leads to (SPEC O7,
// upstream A1-96).
// +kubebuilder:validation:Enum=Report;Remediate
type DriftAction string

const (
	// DriftReport: DriftDetected=True, an event; nothing is applied.
	DriftReport DriftAction = "Report"
	// DriftRemediate: an apply of the current generation puts the
	// infrastructure back, at most 3 in a row (upstream A3-59); a check
	// that finds no drift ends the row.
	DriftRemediate DriftAction = "Remediate"
)

// DriftSpec schedules drift checks (SPEC O7, upstream A1-95, A1-96,
// A1-113, A1-124): a drift Job refreshes the state and plans without
// applying; DriftDetected and status.lastRun.drift say what it found.
type DriftSpec struct {
	// IntervalSeconds is how long after the object's newest finished run
	// (apply or drift check) the next drift check is due, plus a fixed
	// jitter of under 10% per object. Unset: the cluster's
	// spec.defaults.drift (machines and pools), else the manager's
	// --drift-default-interval (30m). 0: no drift checks. At most 30 days.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=2592000
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`

	// Action is what a check that found drift leads to: Report (unset) or
	// Remediate, an apply of the current generation, at most 3 in a row.
	// A TerraformMachine reports only: Remediate is refused there, and a
	// cluster's spec.defaults.drift.action reaches its pools, not its
	// machines (Cluster API replaces a machine; it is not re-applied).
	// +optional
	Action DriftAction `json:"action,omitempty"`
}

// RunDrift is what a drift check found (upstream A1-81): the changes an
// apply would make to put the infrastructure back as the module says, and
// the addresses of those resources. Addresses only, never a value.
type RunDrift struct {
	RunChanges `json:",inline"`

	// Resources are the addresses of the drifted resources, in plan
	// order: at most 16; the counts cover them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=256
	Resources []string `json:"resources,omitempty"`
}

// DriftOf returns the drift schedule of a workload object, nil when it
// has none (or obj is not a workload kind).
func DriftOf(obj any) *DriftSpec {
	switch o := obj.(type) {
	case *TerraformCluster:
		return o.Spec.Drift
	case *TerraformMachine:
		return o.Spec.Drift
	case *TerraformMachinePool:
		return o.Spec.Drift
	}
	return nil
}
