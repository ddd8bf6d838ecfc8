package engine

import (
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

// secretValue is the credential value every test's source Secret carries;
// TestX1NoSecretValueAnywhere scans for it at the end (SPEC X1).
const secretValue = "x1-Cr3dential-VALUE-7f3a9c"

// The shared manager's periods are short so R2 and S1 can be observed.
const (
	syncPeriod     = 4 * time.Second
	identityResync = 3 * time.Second
	// settle bounds every wait: several sync periods plus queue time on a
	// loaded 2-core machine. It is a deadline for polling, never a sleep.
	settle = 60 * time.Second
)

var managerArgs = []string{
	"--sync-period=" + syncPeriod.String(),
	"--identity-resync=" + identityResync.String(),
	"--workers=4",
}

// setup returns a fixture on the package's shared manager.
func setup(t *testing.T) *framework.Fixture {
	f := framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager, Args: managerArgs})
	f.Settle = settle
	return f
}
