package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const apiV1alpha1 = "infrastructure.cluster.x-k8s.io/v1alpha1"

func TestOwnerReference(t *testing.T) {
	t.Run("M5/non-controller, blockOwnerDeletion absent", func(t *testing.T) {
		got := OwnerReference(apiV1alpha1, "TerraformMachine", "m", "u1")
		require.Equal(t, metav1.OwnerReference{APIVersion: apiV1alpha1, Kind: "TerraformMachine", Name: "m", UID: "u1"}, got)
		require.Nil(t, got.Controller)
		require.Nil(t, got.BlockOwnerDeletion)
	})
}

func TestEnsureOwnerReference(t *testing.T) {
	machine := OwnerReference(apiV1alpha1, "TerraformMachine", "m", "u1")
	pool := OwnerReference(apiV1alpha1, "TerraformMachinePool", "p", "u2")
	cluster := OwnerReference(apiV1alpha1, "TerraformCluster", "c", "u3")
	foreign := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "m", UID: "u9", Controller: new(true)}
	machineNew := OwnerReference(apiV1alpha1, "TerraformMachine", "m", "u1-new")

	for _, tc := range []struct {
		name         string
		refs         []metav1.OwnerReference
		ref          metav1.OwnerReference
		want         []metav1.OwnerReference
		wantChanged  bool
		wantReplaced bool
	}{
		{"M5/add to nil", nil, machine, []metav1.OwnerReference{machine}, true, false},
		{"M5/add to empty", []metav1.OwnerReference{}, machine, []metav1.OwnerReference{machine}, true, false},
		{"M5/add beside others, order kept", []metav1.OwnerReference{pool, foreign}, machine, []metav1.OwnerReference{pool, foreign, machine}, true, false},
		{"M5/same UID is a no-op", []metav1.OwnerReference{pool, machine}, machine, []metav1.OwnerReference{pool, machine}, false, false},
		{"M5/same UID at another apiVersion is a no-op", []metav1.OwnerReference{pool, {APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha0", Kind: "TerraformMachine", Name: "m", UID: "u1"}}, machine,
			[]metav1.OwnerReference{pool, {APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha0", Kind: "TerraformMachine", Name: "m", UID: "u1"}}, false, false},
		{"M5/older UID replaced in place", []metav1.OwnerReference{pool, machine, cluster}, machineNew, []metav1.OwnerReference{pool, machineNew, cluster}, true, true},
		{"M5/older UID at another version of the group replaced in place", []metav1.OwnerReference{{APIVersion: "infrastructure.cluster.x-k8s.io/v1beta1", Kind: "TerraformMachine", Name: "m", UID: "u1"}, pool}, machineNew,
			[]metav1.OwnerReference{machineNew, pool}, true, true},
		{"M5/only the first stale reference replaced", []metav1.OwnerReference{machine, pool, OwnerReference(apiV1alpha1, "TerraformMachine", "m", "u1-older")}, machineNew,
			[]metav1.OwnerReference{machineNew, pool, OwnerReference(apiV1alpha1, "TerraformMachine", "m", "u1-older")}, true, true},
		{"M5/same name, different kind appended", []metav1.OwnerReference{OwnerReference(apiV1alpha1, "TerraformMachinePool", "m", "u7")}, machine,
			[]metav1.OwnerReference{OwnerReference(apiV1alpha1, "TerraformMachinePool", "m", "u7"), machine}, true, false},
		{"M5/same kind and name in another group appended", []metav1.OwnerReference{OwnerReference("example.com/v1", "TerraformMachine", "m", "u8")}, machine,
			[]metav1.OwnerReference{OwnerReference("example.com/v1", "TerraformMachine", "m", "u8"), machine}, true, false},
		{"M5/same kind, different name appended", []metav1.OwnerReference{OwnerReference(apiV1alpha1, "TerraformMachine", "n", "u6")}, machine,
			[]metav1.OwnerReference{OwnerReference(apiV1alpha1, "TerraformMachine", "n", "u6"), machine}, true, false},
		{"M5/core group (v1) compared as the empty group", []metav1.OwnerReference{OwnerReference("v1", "ConfigMap", "m", "u4")}, OwnerReference("v1", "ConfigMap", "m", "u5"),
			[]metav1.OwnerReference{OwnerReference("v1", "ConfigMap", "m", "u5")}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A spare capacity slot catches an append that would write into
			// the caller's backing array.
			input := append(make([]metav1.OwnerReference, 0, len(tc.refs)+1), tc.refs...)
			if tc.refs == nil {
				input = nil
			}
			before := deepCopyRefs(input)
			got, changed, replaced := EnsureOwnerReference(input, tc.ref)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantChanged, changed)
			require.Equal(t, tc.wantReplaced, replaced)
			require.Equal(t, before, input, "input not mutated")
			if cap(input) > len(input) {
				require.Equal(t, metav1.OwnerReference{}, input[:len(input)+1][len(input)], "spare capacity not written")
			}
			if changed {
				got[0].Name = "scribbled"
				require.Equal(t, before, input, "result does not alias the input")
			}
		})
	}
}

func TestRemoveOwnerReference(t *testing.T) {
	a := OwnerReference(apiV1alpha1, "TerraformMachine", "a", "ua")
	b := OwnerReference(apiV1alpha1, "TerraformMachine", "b", "ub")
	c := OwnerReference(apiV1alpha1, "TerraformCluster", "c", "uc")
	for _, tc := range []struct {
		name        string
		refs        []metav1.OwnerReference
		uid         types.UID
		want        []metav1.OwnerReference
		wantChanged bool
	}{
		{"V3/remove present, order kept", []metav1.OwnerReference{a, b, c}, "ub", []metav1.OwnerReference{a, c}, true},
		{"V3/remove the last one", []metav1.OwnerReference{a}, "ua", []metav1.OwnerReference{}, true},
		{"V3/remove every duplicate", []metav1.OwnerReference{a, b, a}, "ua", []metav1.OwnerReference{b}, true},
		{"V3/remove absent", []metav1.OwnerReference{a, c}, "ub", []metav1.OwnerReference{a, c}, false},
		{"V3/remove from nil", nil, "ua", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := deepCopyRefs(tc.refs)
			got, changed := RemoveOwnerReference(tc.refs, tc.uid)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantChanged, changed)
			require.Equal(t, before, tc.refs, "input not mutated")
			require.False(t, HasOwnerReference(got, tc.uid))
		})
	}
}

func TestHasOwnerReference(t *testing.T) {
	refs := []metav1.OwnerReference{OwnerReference(apiV1alpha1, "TerraformMachine", "a", "ua")}
	require.True(t, HasOwnerReference(refs, "ua"))
	require.False(t, HasOwnerReference(refs, "ub"))
	require.False(t, HasOwnerReference(nil, "ua"))
}

// deepCopyRefs copies refs, pointers included, so a later comparison sees
// any mutation of the original.
func deepCopyRefs(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if refs == nil {
		return nil
	}
	out := make([]metav1.OwnerReference, len(refs))
	for i := range refs {
		refs[i].DeepCopyInto(&out[i])
	}
	return out
}
