package trust

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// TestX1NoSecretValueAnywhere runs last in the package: every source
// Secret carried secretValue or a rotation of it (which starts with it).
// Neither may appear, nor any of their hashes, in an event, a status or
// condition of any captf object, or the log of any manager the package ran
// (SPEC X1).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	logs, n := framework.RequireNoSecretValuesAnywhere(t, forbiddenValues()...)
	t.Logf("X1 scan: %d manager logs (%d bytes)", logs, n)
}
