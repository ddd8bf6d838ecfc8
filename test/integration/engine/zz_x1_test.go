package engine

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// TestX1NoSecretValueAnywhere runs last in the package: every test's source
// Secret carried secretValue. It must not appear in any event, any condition
// or status of any captf object, or the manager's log; nor may the hash of a
// source's data appear outside the mirrors' and Jobs' own annotations (SPEC
// X1, C5); nor the value of a sensitive Terraform output that the outputs
// tests put in state Secrets (T4).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	setup(t).RequireNoSecretValues(secretValue, framework.HashOf(framework.DefaultData(secretValue)), sensitiveOutputValue)
}
