// Package trust tests the shipped ValidatingAdmissionPolicy of SPEC B3
// (manifests/policy, installed by the framework for every integration
// package) on a real API server with kube-controller-manager: tenants may not
// set, change or remove the labels and annotations the manager trusts on
// Secrets and Jobs; the manager's ServiceAccount, system:masters and the
// Job controller's own writes pass.
package trust

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, ManagerRBAC: true})
}
