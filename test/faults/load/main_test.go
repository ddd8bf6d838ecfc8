// Package load injects faults under load into the real control plane
// (etcd, kube-apiserver, kube-controller-manager) with `captf manager` run as
// a subprocess as its ServiceAccount user with manifests/rbac applied
// (issue 7):
//
//   - fault 5, a conflict storm: many objects sharing one mirror created at
//     once while the identity's list is edited and the source rotated;
//   - fault 6, a flaky API: a reverse proxy that fails a share of the
//     manager's requests (500, 429 with Retry-After, dropped connections,
//     slow answers);
//   - fault 8, a namespace deleted while objects there are mid-apply and
//     mid-destroy;
//   - bad input: huge, empty and oddly keyed sources, references to what
//     does not exist, names at the maximum length, and a selector matching
//     hundreds (full: thousands) of namespaces;
//   - last, an X1 scan for every credential value used.
//
// `make test` runs the short variant; CAPTF_FAULTS_FULL=1 (`make
// test-faults`) the full one. Every figure a test measures is logged with
// t.Logf (run with -v to see them).
package load

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	framework.Main(m, framework.Options{ControllerManager: true, BuildCaptf: true, ManagerRBAC: true})
}

// full is set by CAPTF_FAULTS_FULL=1: the scale of issue 7.
var full = os.Getenv("CAPTF_FAULTS_FULL") == "1"

// scale returns short or, in the full variant, long.
func scale[T any](short, long T) T {
	if full {
		return long
	}
	return short
}

// secretValue is the credential every source Secret of this package
// carries; TestX1NoSecretValueAnywhere scans for it last (SPEC X1).
const secretValue = "ld-Cr3dential-VALUE-5e8b1d"

// rotatedValue returns the n-th rotated credential: it starts with
// secretValue, so the X1 scan catches every rotation too.
func rotatedValue(n int) string { return fmt.Sprintf("%s-r%d", secretValue, n) }

// The shared manager (bad input) runs with short periods.
const (
	syncPeriod     = 5 * time.Second
	identityResync = 3 * time.Second
	// settle bounds every wait: a polling deadline on a loaded 2-core
	// machine, never a sleep.
	settle = 90 * time.Second
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

// ownManager returns a fixture on a manager of the test's own, so its
// metrics and log hold only what the test caused.
func ownManager(t *testing.T, args ...string) *framework.Fixture {
	e := framework.Get(t)
	m := e.StartManager(t, framework.ManagerOptions{User: controlplane.Manager, Args: args})
	return &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: settle}
}
