package sourcewatch

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// TestX1NoSecretValueAnywhere runs last in the package: every source
// carried secretValue. It must not appear in any event, any condition or
// the manager's log (which logs the watches at V(2)); nor may the hash of a
// source's data (SPEC X1).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	setup(t).RequireNoSecretValues(secretValue, framework.HashOf(framework.DefaultData(secretValue)))
}
