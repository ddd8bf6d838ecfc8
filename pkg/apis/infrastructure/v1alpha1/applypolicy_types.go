package v1alpha1

// ApplyPolicy says whether a spec change is applied at once or waits for a
// person's approval of its plan (SPEC O8, upstream A1-97, A3-63).
// +kubebuilder:validation:Enum=Automatic;Manual
type ApplyPolicy string

const (
	// ApplyAutomatic: every apply runs as soon as it is due.
	ApplyAutomatic ApplyPolicy = "Automatic"
	// ApplyManual: the object's first apply runs as soon as it is due (it
	// is not gated, A3-63); every later apply is first a plan Job and a
	// TerraformPlan, and runs only once that plan is approved, applying
	// exactly the approved plan (a different plan is PlanChanged: a new
	// plan).
	ApplyManual ApplyPolicy = "Manual"
)

// ApplyPolicyOf returns a workload object's apply policy: Manual only on
// a TerraformCluster or TerraformMachinePool that sets it (a
// TerraformMachine has none: Cluster API replaces machines rather than
// re-applying them), Automatic otherwise.
func ApplyPolicyOf(obj any) ApplyPolicy {
	var p ApplyPolicy
	switch o := obj.(type) {
	case *TerraformCluster:
		p = o.Spec.ApplyPolicy
	case *TerraformMachinePool:
		p = o.Spec.ApplyPolicy
	}
	if p == ApplyManual {
		return ApplyManual
	}
	return ApplyAutomatic
}

// PlanReference names a TerraformPlan in the object's namespace (upstream
// status.pendingPlanRef, A1-107, A1-129).
type PlanReference struct {
	// Name of the TerraformPlan.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}
