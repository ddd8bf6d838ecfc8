package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// T2: the state suffix of each kind, and the hashed form past 63.
func TestStateSuffix(t *testing.T) {
	hash := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return hex.EncodeToString(sum[:])[:10]
	}
	long := strings.Repeat("a", 60) + ".b-" + strings.Repeat("c", 10) // 73 characters
	for _, tc := range []struct {
		kind, name, want string
	}{
		{v1alpha1.KindTerraformCluster, "prod", "prod-cluster"},
		{v1alpha1.KindTerraformMachine, "m-1", "m-1-machine"},
		{v1alpha1.KindTerraformMachinePool, "pool.eu", "pool.eu-machinepool"},
		// A name ending in digits is fine: the kind comes last.
		{v1alpha1.KindTerraformCluster, "web-01", "web-01-cluster"},
		// 55 + 8 = 63: kept.
		{v1alpha1.KindTerraformCluster, strings.Repeat("x", 55), strings.Repeat("x", 55) + "-cluster"},
		// 56 + 8 = 64: hashed; the prefix keeps the whole at 63.
		{v1alpha1.KindTerraformCluster, strings.Repeat("x", 56), strings.Repeat("x", 63-len("-0123456789-cluster")) + "-" + hash(strings.Repeat("x", 56)+"-cluster") + "-cluster"},
		// Trailing '.' and '-' of the cut prefix are removed.
		{v1alpha1.KindTerraformMachinePool, long, strings.TrimRight(long[:63-len("-0123456789-machinepool")], ".-") + "-" + hash(long+"-machinepool") + "-machinepool"},
		{v1alpha1.KindTerraformMachinePool, strings.Repeat("a", 39) + "-" + strings.Repeat("x", 30),
			strings.Repeat("a", 39) + "-" + hash(strings.Repeat("a", 39)+"-"+strings.Repeat("x", 30)+"-machinepool") + "-machinepool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StateSuffix(tc.kind, tc.name)
			require.Equal(t, tc.want, got)
			require.LessOrEqual(t, len(got), 63)
			require.Empty(t, validation.IsValidLabelValue(got), "a label value (tfstateSecretSuffix)")
			require.Empty(t, validation.IsDNS1123Subdomain(StateSecretName(got)))
		})
	}
}
