package tofu

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/pkg/runresult"
)

// resultModule plans one built-in resource and, when var.fail is true,
// fails its plan with an error that quotes var.token's value.
const resultModule = `
variable "token" {
  type = string
}
variable "fail" {
  type = bool
}
resource "terraform_data" "r" {
  input = "o1"
}
output "n" {
  value = var.fail ? tonumber(var.token) : 0
}
`

// TestRunnerResultDocumentO1 runs the runner with the real binaries and
// --result, as a Job does (SPEC O1): a successful apply's document names
// its steps, their exit codes, the runtime and the planned change; a
// failed one's says kind step, the failed step and its exit code, and its
// tail holds Terraform's error with the variable's value replaced by
// "(sensitive)" (X1). The document is read back as the manager would
// (runresult.Unmarshal: bounded, validated).
func TestRunnerResultDocumentO1(t *testing.T) {
	const secret = "s3cr3t-o1-token-value"
	for _, b := range []struct{ name, binary string }{{"tofu", tofuBinary}, {"terraform", terraformBinary}} {
		t.Run(b.name, func(t *testing.T) {
			if b.binary == "" {
				t.Skipf("bin/%s is missing", b.name)
			}
			module := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(module, "main.tf"), []byte(resultModule), 0o644))
			run := func(fail bool) (int, *runresult.Result, []byte) {
				vars, err := json.Marshal(map[string]any{"token": secret, "fail": fail})
				require.NoError(t, err)
				env := append(tofuEnv(t, t.TempDir(), ""), runner.VariablesEnv+"="+string(vars))
				result := filepath.Join(t.TempDir(), "termination-log")
				code, _ := runnerRunWith(t, b.binary, module, env, "apply", "--result="+result, "--image=registry.example/m:1")
				raw, err := os.ReadFile(result)
				require.NoError(t, err)
				require.LessOrEqual(t, len(raw), runresult.MaxBytes)
				doc, err := runresult.Unmarshal(raw)
				require.NoError(t, err, "%s", raw)
				t.Logf("result document: %s", raw)
				return code, doc, raw
			}

			code, ok, _ := run(false)
			require.Equal(t, 0, code)
			assert.Equal(t, "apply", ok.Operation)
			assert.Equal(t, "registry.example/m:1", ok.Image)
			assert.NotEmpty(t, ok.Runtime)
			assert.Nil(t, ok.Error)
			require.NotEmpty(t, ok.Steps)
			for _, s := range ok.Steps {
				assert.Zero(t, s.ExitCode, s.Name)
			}
			assert.Equal(t, "apply", ok.Steps[len(ok.Steps)-1].Name)
			require.NotNil(t, ok.Changes)
			assert.Equal(t, runresult.Changes{Create: 1}, *ok.Changes)

			code, failed, raw := run(true)
			require.NotEqual(t, 0, code)
			require.NotNil(t, failed.Error)
			assert.Equal(t, runresult.KindStep, failed.Error.Kind)
			assert.Equal(t, "apply", failed.Error.Step)
			last := failed.Steps[len(failed.Steps)-1]
			assert.Equal(t, "apply", last.Name)
			assert.NotZero(t, last.ExitCode)
			assert.Contains(t, failed.Error.Tail, "tonumber")
			assert.Contains(t, failed.Error.Tail, "(sensitive)")
			assert.NotContains(t, string(raw), secret)
		})
	}
}
