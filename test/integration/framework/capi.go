package framework

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
)

// capiShared is the package's Cluster API core manager (SharedCAPI).
var capiShared struct {
	once sync.Once
	m    *controlplane.CAPIManager
	err  error
}

// SharedCAPI starts Cluster API's core manager (SPEC K12) against the
// package's control plane on first use, with its CRDs from bin/capi-crds
// (hack/build-capi.sh), and stops it after the package's tests. args are
// extra flags, used by the first call only. When a test using it fails, the
// end of the manager's log is printed.
func (e *Env) SharedCAPI(t testing.TB, args ...string) *controlplane.CAPIManager {
	t.Helper()
	capiShared.once.Do(func() {
		start := time.Now()
		capiShared.m, capiShared.err = e.CP.StartCAPI(Context(t), controlplane.CAPIOptions{
			BinDir: filepath.Join(e.Root, "bin"),
			Args:   args,
		})
		if capiShared.m != nil {
			e.cleanups = append(e.cleanups, capiShared.m.Stop)
			t.Logf("Cluster API's core manager (CRDs applied) ready in %s; log %s", time.Since(start).Round(time.Millisecond), capiShared.m.LogPath)
		}
	})
	if capiShared.err != nil {
		t.Fatal(capiShared.err)
	}
	m := capiShared.m
	if m.Exited() {
		t.Fatalf("Cluster API's manager has exited; end of %s:\n%s", m.LogPath, m.LogTail(8000))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("end of Cluster API's manager log (%s):\n%s", m.LogPath, m.LogTail(8000))
		}
	})
	return m
}
