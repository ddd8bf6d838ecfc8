// Package capi proves captf with Cluster API's own core manager (SPEC K1,
// K12): a real control plane with kube-controller-manager, captf's manager
// as its ServiceAccount user with manifests/rbac (X2), and Cluster API
// v1.14's core manager built by hack/build-capi.sh, so the contract is read
// by its real client, not by our reading of it.
package capi

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, BuildCaptf: true, ManagerRBAC: true})
}
