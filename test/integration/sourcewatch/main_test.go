// Package sourcewatch tests SPEC P2 on a real control plane: the manager
// watches each identity's source Secret by name and pushes a change to the
// identity's users at once. Its shared manager runs with the default
// periods (--sync-period=10m, --identity-resync=5m), far longer than any
// wait here, so only P2 can explain a rotation that reaches a mirror. It
// runs as the manager's ServiceAccount user with manifests/rbac applied
// (X2: those permissions suffice for the watches) and reaches the API
// server through a proxy, healthy unless a test makes it fail the source
// watches.
package sourcewatch

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}

// secretValue is the credential value the sources carry;
// TestX1NoSecretValueAnywhere scans for it at the end (SPEC X1).
const secretValue = "x1-P2-Cr3dential-VALUE-51c0de"

const (
	// syncPeriod and identityResync are the defaults (SPEC section 12).
	syncPeriod     = 10 * time.Minute
	identityResync = 5 * time.Minute
	// settle bounds every wait: generous on a loaded 2-core machine, yet
	// well below identityResync and the not-Ready retry (30s) is avoided by
	// the tests that need P2 alone. A deadline for polling, never a sleep.
	settle = 90 * time.Second
)

var (
	proxyOnce sync.Once
	proxy     *faultkit.FlakyProxy
	proxyErr  error
	// kubeconfig reaches the API server through proxy as the manager.
	kubeconfig string
)

// setup returns a fixture on the package's shared manager, started on
// first use through the proxy.
func setup(t *testing.T) *framework.Fixture {
	e := framework.Get(t)
	proxyOnce.Do(func() {
		proxy, proxyErr = faultkit.StartFlakyProxy(e.CP.URL, e.CP.CAData)
		if proxyErr != nil {
			return
		}
		kubeconfig = filepath.Join(e.CP.Dir, "kubeconfig-sourcewatch-proxy")
		proxyErr = proxy.WriteKubeconfig(kubeconfig, controlplane.Manager, e.CP.Users[controlplane.Manager].Token)
	})
	if proxyErr != nil {
		t.Fatal(proxyErr)
	}
	f := framework.NewFixture(t, framework.ManagerOptions{User: controlplane.Manager, Args: []string{
		// The later --kubeconfig wins over the one StartManager passes.
		"--kubeconfig=" + kubeconfig,
		"--sync-period=" + syncPeriod.String(),
		"--identity-resync=" + identityResync.String(),
		"--workers=4",
		// The watches log what they start, stop and see at V(2).
		"--v=2",
	}})
	f.Settle = settle
	return f
}
