// Package soak runs `captf manager` for a long time (30 minutes by default)
// against a real control plane with kube-controller-manager, under random
// rotations, revocations, re-allowances, object creations and deletions
// across 50 namespaces, and checks the invariants every minute: every
// allowed user's mirror current within the bound (sync period + slack), no
// mirror in a disallowed namespace, no mirror without a user, no Secret
// value in the manager's log. It reports the manager's RSS and goroutines
// over time, which must stay flat (issue 7).
//
// It runs only with CAPTF_SOAK=1 (`make soak`), never in `make test`:
//
//	CAPTF_SOAK=1 go test -count=1 -v -timeout 0 ./test/soak -args -duration=30m
//	CAPTF_SOAK=1 go test -count=1 -v -timeout 0 ./test/soak -args -duration=3m   # short
package soak

import (
	"fmt"
	"os"
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	if os.Getenv("CAPTF_SOAK") != "1" {
		// No control plane: TestSoak skips itself.
		os.Exit(m.Run())
	}
	fmt.Fprintln(os.Stderr, "soak: starting the control plane")
	framework.Main(m, framework.Options{ControllerManager: true, BuildCaptf: true, ManagerRBAC: true})
}
