// Package engine tests the credentials engine on a real control plane with
// kube-controller-manager (garbage collector, namespace and Job
// controllers): mirrors, rotation, revocation, conflicts, Jobs and deletion
// (SPEC sections 2-7, 9, 10, 11). One manager serves the package; it runs as
// the manager's ServiceAccount user with manifests/rbac applied, so every
// test also proves the manifests' permissions suffice (SPEC X2).
package engine

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, BuildCaptf: true, ManagerRBAC: true})
}
