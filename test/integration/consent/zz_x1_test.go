package consent

import (
	"testing"

	"github.com/captf/captf/test/integration/framework"
)

// TestX1NoSecretValueAnywhere runs last: the hygiene report (C4) named keys
// whose values held secretValue (with a trailing newline, under a TF_ name);
// no value, nor a source hash, may appear anywhere (SPEC X1).
func TestX1NoSecretValueAnywhere(t *testing.T) {
	setup(t).RequireNoSecretValues(secretValue, framework.HashOf(framework.DefaultData(secretValue)))
}
