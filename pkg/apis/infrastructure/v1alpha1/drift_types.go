package v1alpha1

// DriftSpec schedules drift checks (SPEC O7, upstream A1-95, A1-113,
// A1-124): a drift Job refreshes the state and plans without applying;
// DriftDetected and status.lastRun.drift say what it found. Drift checks
// only report: Remediate (A1-96) is not built yet (docs/operator-guide.md
// "Drift (O7)").
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
