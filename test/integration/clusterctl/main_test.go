// Package clusterctl proves captf as a provider clusterctl installs (SPEC
// K10) with Cluster API's own clusterctl (bin/clusterctl, hack/build-capi.sh)
// and the local repository hack/clusterctl-repository.sh writes (make
// clusterctl-repository), with no network:
//
//   - TestClusterctlInit: `clusterctl init --infrastructure terraform` into a
//     fresh control plane of its own installs captf's CRDs, RBAC, webhook
//     configuration, admission policy and Deployment, labelled with the
//     provider's name, and Cluster API's manager gets captf's aggregated
//     ClusterRole. No pod runs here (no kubelet): that the manager becomes
//     ready is the end-to-end test's (TestClusterctlMoveOnNode).
//   - TestClusterctlGenerateCluster: `clusterctl generate cluster`, default
//     and clusterclass flavors, renders what the API server accepts (dry-run
//     create against the CRDs of captf, Cluster API and kubeadm).
//   - TestClusterClassPatchesIdentity: the ClusterClass, created for real
//     with Cluster API's core manager running its topology controller, gives
//     the cluster a TerraformCluster whose identityRef and images its
//     patches set from the topology variables (K9).
//   - TestClusterctlMove: `clusterctl move` between two fresh management
//     clusters, each installed by `clusterctl init` and running Cluster
//     API's core manager and captf's (K11, K12): a provisioned cluster and
//     machine move with their state, block-move holds the move while an
//     apply Job runs, nothing is destroyed in the source or applied again
//     in the target (the copies adopt their state), the mirror is refused
//     by B3 to a mover outside system:masters, and a spec change in the
//     target applies once. The same move with real Jobs on a node, and
//     clusterctl init with the manager running, is test/e2e's
//     TestClusterctlMoveOnNode; both use test/clusterctltest.
package clusterctl

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true})
}
