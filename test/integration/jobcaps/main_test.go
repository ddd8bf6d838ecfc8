// Package jobcaps tests the Job caps of SPEC O4 on a real control plane:
// a manager run with a small --max-active-jobs never has more Jobs
// running than the cap, whatever the number of due objects; a freed slot
// starts the next Job without waiting for a resync; a destroy goes before
// the applies that wait. The package has its own manager: the caps are
// the manager's flags.
package jobcaps

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

func TestMain(m *testing.M) {
	// No kube-controller-manager: the test finishes the Jobs itself
	// (framework.Env.FinishJob), so no Job controller may write them.
	framework.Main(m, framework.Options{BuildCaptf: true, ManagerRBAC: true})
}
