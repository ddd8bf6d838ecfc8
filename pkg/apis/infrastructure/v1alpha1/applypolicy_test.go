package v1alpha1

import "testing"

// TestApplyPolicyOfO8: Manual only where a cluster or pool sets it; unset,
// Automatic, an unknown value or a machine is Automatic (SPEC O8, A1-97).
func TestApplyPolicyOfO8(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want ApplyPolicy
	}{
		{"cluster unset", &TerraformCluster{}, ApplyAutomatic},
		{"cluster manual", &TerraformCluster{Spec: TerraformClusterSpec{ApplyPolicy: ApplyManual}}, ApplyManual},
		{"cluster automatic", &TerraformCluster{Spec: TerraformClusterSpec{ApplyPolicy: ApplyAutomatic}}, ApplyAutomatic},
		{"pool manual", &TerraformMachinePool{Spec: TerraformMachinePoolSpec{ApplyPolicy: ApplyManual}}, ApplyManual},
		{"pool unknown value", &TerraformMachinePool{Spec: TerraformMachinePoolSpec{ApplyPolicy: "manual"}}, ApplyAutomatic},
		{"machine", &TerraformMachine{}, ApplyAutomatic},
		{"nil", nil, ApplyAutomatic},
	} {
		if got := ApplyPolicyOf(tc.obj); got != tc.want {
			t.Errorf("%s: ApplyPolicyOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestDeletionPolicyDestroysO5: Destroy (upstream A1-72), its deprecated
// alias Delete and the unset default run a destroy Job; Retain does not
// (SPEC O5).
func TestDeletionPolicyDestroysO5(t *testing.T) {
	for p, want := range map[DeletionPolicy]bool{
		"":                    true,
		DeletionPolicyDestroy: true,
		DeletionPolicyDelete:  true,
		DeletionPolicyRetain:  false,
	} {
		if got := p.Destroys(); got != want {
			t.Errorf("DeletionPolicy(%q).Destroys() = %v, want %v", p, got, want)
		}
	}
}
