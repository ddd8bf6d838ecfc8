package faultscp

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// TestX1NoSecretValueAnywhere runs last in the package: every source
// Secret of the faults carried secretValue. Neither it nor any source hash
// may appear in an event, a status or condition of any captf object, or
// the log of any manager the package ran, killed ones included (SPEC X1).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	e := framework.Get(t)
	managers := framework.KeptManagers()
	if len(managers) == 0 {
		t.Fatal("no manager ran in this package: the scan would prove nothing")
	}
	forbidden := forbiddenValues()
	// What is left of events and statuses, with the last manager's log;
	// each test scanned its own before cleaning up.
	f := &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: managers[len(managers)-1]}
	f.RequireNoSecretValues(forbidden...)
	// Every manager's log.
	var logs []string
	for _, m := range managers {
		logs = append(logs, m.LogPath)
	}
	n := framework.ScanFilesForSecretValues(t, logs, forbidden...)
	x1Scanned.Lock()
	defer x1Scanned.Unlock()
	t.Logf("X1 scan: %d manager logs (%d bytes); before each test's clean-up %d events and %d statuses; for the value and %d source hashes",
		len(logs), n, x1Scanned.events, x1Scanned.statuses, len(forbidden)-1)
	if x1Scanned.statuses == 0 || x1Scanned.events == 0 {
		t.Errorf("the per-test scans saw no status or no event: X1 would prove nothing (run the whole package)")
	}
}
