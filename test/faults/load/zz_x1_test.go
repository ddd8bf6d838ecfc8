package load

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestX1NoSecretValueAnywhere runs last: every source Secret of this
// package carried secretValue (rotations and odd keys extend it). It must
// not appear in any event, any condition of any captf object, or the shared
// manager's log, nor may a source hash appear outside the mirrors' and
// Jobs' annotations (SPEC X1). The tests with a manager of their own scanned
// its log before it stopped. It also reports objects the tests left stuck.
func TestX1NoSecretValueAnywhere(t *testing.T) {
	forbidden := []string{secretValue, framework.HashOf(framework.DefaultData(secretValue))}
	for i := range 102 {
		forbidden = append(forbidden, framework.HashOf(framework.DefaultData(rotatedValue(i))))
	}
	f := setup(t)
	f.RequireNoSecretValues(forbidden...)
	all, err := faultkit.ListWorkloads(f.Ctx, f.Env.Captf, "", "")
	if err != nil {
		t.Fatal(err)
	}
	deleting := 0
	for _, s := range all {
		if s.Deleting {
			deleting++
		}
	}
	t.Logf("left behind: %d workload objects, %d of them being deleted", len(all), deleting)
}
