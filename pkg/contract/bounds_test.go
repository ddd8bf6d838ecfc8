package contract

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// SPEC K7: each role reads its contract outputs from the state with
// bounds above what MapOutputs accepts (so MapOutputs judges a value near
// them), and the sum stays small (B10).
func TestStateBounds(t *testing.T) {
	longest := fmt.Sprintf("%q", strings.Repeat("x", MaxFieldLength))
	for _, tt := range []struct {
		kind  string
		names []string
		// fits: outputs K7 allows, as JSON, that must be within their bound.
		fits map[string]string
	}{
		{v1alpha1.KindTerraformCluster, []string{OutputControlPlaneEndpoint, OutputExports, OutputFailureDomains, OutputHealth},
			map[string]string{OutputExports: `{"a":"` + strings.Repeat("x", MaxExportsBytes-8) + `"}`, OutputControlPlaneEndpoint: longest}},
		{v1alpha1.KindTerraformMachine, []string{OutputAddresses, OutputFailureDomain, OutputHealth, OutputInterruptible, OutputProviderID},
			map[string]string{OutputProviderID: longest}},
		{v1alpha1.KindTerraformMachinePool, []string{OutputHealth, OutputProviderIDList, OutputReplicas},
			map[string]string{OutputProviderIDList: "[" + strings.Repeat(`"aws:///us-east-1a/i-0123456789abcdef0",`, MaxProviderIDList-1) + `"x"]`}},
		{"TerraformPlan", nil, nil},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			b := StateBounds(tt.kind)
			var names []string
			total := 0
			for n, v := range b {
				names = append(names, n)
				total += v
			}
			assert.ElementsMatch(t, tt.names, names)
			assert.LessOrEqual(t, total, 1<<20, "B10: what one read may keep of them")
			for n, v := range tt.fits {
				assert.LessOrEqual(t, len(v), b[n], "%s: a value K7 allows fits its bound", n)
			}
		})
	}
}

// SPEC K7: an output over its bound in the state is invalid (not missing,
// not pending); health over its bound is HealthUnknown.
func TestMapOutputsTooLarge(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ctx      OutputsContext
		values   map[string]string
		reason   v1alpha1.ConditionReason
		message  string
		health   v1alpha1.ConditionReason
		healthSt metav1.ConditionStatus
	}{
		{"required provider_id", OutputsContext{Kind: v1alpha1.KindTerraformMachine, TooLarge: []string{OutputProviderID}}, nil,
			v1alpha1.ReasonOutputsInvalid, "output provider_id is over 4096 bytes as JSON in the state, its bound", v1alpha1.ReasonHealthy, metav1.ConditionTrue},
		{"provider_id_list", OutputsContext{Kind: v1alpha1.KindTerraformMachinePool, TooLarge: []string{OutputProviderIDList}}, nil,
			v1alpha1.ReasonOutputsInvalid, fmt.Sprintf("output provider_id_list is over %d bytes", BoundProviderIDList), v1alpha1.ReasonHealthy, metav1.ConditionTrue},
		{"optional exports", OutputsContext{Kind: v1alpha1.KindTerraformCluster, TooLarge: []string{OutputExports}}, map[string]string{OutputControlPlaneEndpoint: `"cp:6443"`},
			v1alpha1.ReasonOutputsInvalid, "output exports is over 131072 bytes", v1alpha1.ReasonHealthy, metav1.ConditionTrue},
		{"health", OutputsContext{Kind: v1alpha1.KindTerraformMachine, TooLarge: []string{OutputHealth}}, map[string]string{OutputProviderID: `"p"`},
			v1alpha1.ReasonOutputsValid, "valid", v1alpha1.ReasonHealthUnknown, metav1.ConditionUnknown},
		{"none", OutputsContext{Kind: v1alpha1.KindTerraformMachine}, map[string]string{OutputProviderID: `"p"`},
			v1alpha1.ReasonOutputsValid, "valid", v1alpha1.ReasonHealthy, metav1.ConditionTrue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var kv []string
			for k, v := range tt.values {
				kv = append(kv, k, v)
			}
			o := MapOutputs(tt.ctx, outs(kv...))
			assert.Equal(t, tt.reason, o.Valid.Reason, o.Valid.Message)
			assert.Contains(t, o.Valid.Message, tt.message)
			assert.NotContains(t, o.Valid.Message, "missing")
			assert.Equal(t, tt.health, o.Health.Reason, o.Health.Message)
			assert.Equal(t, tt.healthSt, o.Health.Status)
		})
	}
}
