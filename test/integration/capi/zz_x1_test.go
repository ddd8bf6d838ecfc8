package capi

import (
	"testing"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// TestZZNoSecretOrBootstrapValues runs last (file and name order): SPEC X1
// and K5 over everything this package's tests left, every event, every
// captf object's status and the manager's log: no credential value and no
// bootstrap data, as it is or in base64.
func TestZZNoSecretOrBootstrapValues(t *testing.T) {
	framework.Get(t).SharedCAPI(t)
	f := framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager})
	f.RequireNoSecretValues(secretValue,
		"K5-b00tstrap-T0KEN-4e1d", b64(machineBootstrap),
		"token-one", b64("#cloud-config token-one"), "token-two", b64("#cloud-config token-two"))
}
