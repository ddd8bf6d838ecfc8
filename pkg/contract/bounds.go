package contract

import "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"

// Bounds of the contract outputs read from the state on their own (SPEC
// K7), as compact JSON: each output's own, not status.outputs' 32 KiB
// for all of them (T4), so that a module with large other outputs still
// gives Cluster API its fields. Each is above what MapOutputs accepts of
// the output, so MapOutputs, not the read, judges a value near it.
const (
	// boundScalar: an endpoint, a provider ID, a failure domain, a bool,
	// a number, the health object (fields of at most 512 characters).
	boundScalar = 4 << 10
	// boundList: failure domains (at most 100) and addresses (at most 256).
	boundList = 128 << 10
	// boundExports: twice MaxExportsBytes (64 KiB), which MapOutputs
	// checks on the canonical value.
	boundExports = 2 * MaxExportsBytes
	// BoundProviderIDList: MaxProviderIDList IDs of 62 characters on
	// average. The list is written to spec.providerIDList too, and an
	// object must stay under the API server's 1.5 MiB.
	BoundProviderIDList = MaxProviderIDList * 64
)

// StateBounds returns the contract outputs of kind's role with the bound
// of each when read from the state (tfstate.Keep), nil for another kind.
func StateBounds(kind string) map[string]int {
	switch kind {
	case v1alpha1.KindTerraformCluster:
		return map[string]int{
			OutputControlPlaneEndpoint: boundScalar, OutputFailureDomains: boundList,
			OutputExports: boundExports, OutputHealth: boundScalar,
		}
	case v1alpha1.KindTerraformMachine:
		return map[string]int{
			OutputProviderID: boundScalar, OutputAddresses: boundList, OutputFailureDomain: boundScalar,
			OutputInterruptible: boundScalar, OutputHealth: boundScalar,
		}
	case v1alpha1.KindTerraformMachinePool:
		return map[string]int{
			OutputProviderIDList: BoundProviderIDList, OutputReplicas: boundScalar, OutputHealth: boundScalar,
		}
	}
	return nil
}
