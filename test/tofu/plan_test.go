package tofu

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/pkg/runresult"
)

// planModule keeps its state in a local file outside the working copies,
// so that the runner's runs (each in a fresh working copy) share it.
const planModule = `
terraform {
  backend "local" {
    path = %q
  }
}
variable "v" {
  type = string
}
resource "terraform_data" "r" {
  input = var.v
}
output "v" {
  value = terraform_data.r.output
}
`

// TestRunnerPlanO8 runs `captf runner plan` and `captf runner apply
// --expect-plan` with the real binaries (SPEC O8, upstream A3-55, A3-63):
// two plans of one change have one fingerprint and another change has
// another; the plan's document counts the change and names the resource
// with its action, never the value; an apply expecting another plan's
// fingerprint applies nothing (plan-changed, exit 3, the state as it
// was); an apply expecting its own plan's fingerprint applies that plan.
func TestRunnerPlanO8(t *testing.T) {
	for _, b := range []struct{ name, binary string }{{"tofu", tofuBinary}, {"terraform", terraformBinary}} {
		t.Run(b.name, func(t *testing.T) {
			if b.binary == "" {
				t.Skipf("bin/%s is missing", b.name)
			}
			module := t.TempDir()
			state := filepath.Join(t.TempDir(), "terraform.tfstate")
			require.NoError(t, os.WriteFile(filepath.Join(module, "main.tf"), []byte(fmt.Sprintf(planModule, state)), 0o644))
			run := func(v string, args ...string) (int, *runresult.Result) {
				vars, err := json.Marshal(map[string]any{"v": v})
				require.NoError(t, err)
				env := append(tofuEnv(t, t.TempDir(), ""), runner.VariablesEnv+"="+string(vars))
				result := filepath.Join(t.TempDir(), "termination-log")
				code, out := runnerRunWith(t, b.binary, module, env, append(args, "--result="+result)...)
				assert.NotContains(t, out, "value-"+v+"-secret", "O8: show -json's values must not reach the log")
				raw, err := os.ReadFile(result)
				require.NoError(t, err)
				doc, err := runresult.Unmarshal(raw)
				require.NoError(t, err, "%s", raw)
				assert.NotContains(t, string(raw), "value-"+v+"-secret")
				t.Logf("result document: %s", raw)
				return code, doc
			}
			val := func(s string) string { return "value-" + s + "-secret" }

			code, _ := run(val("a"), "apply")
			require.Equal(t, 0, code)

			code, b1 := run(val("b"), "plan")
			require.Equal(t, 0, code)
			require.NotNil(t, b1.Plan)
			assert.Equal(t, runresult.OperationPlan, b1.Operation)
			assert.Equal(t, runresult.Changes{Update: 1}, b1.Plan.Changes)
			assert.Equal(t, 1, b1.Plan.OutputChanges)
			assert.Equal(t, []runresult.PlanResource{{Address: "terraform_data.r", Action: "update"}}, b1.Plan.Resources)
			assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, b1.Plan.Hash)

			_, b2 := run(val("b"), "plan")
			require.NotNil(t, b2.Plan)
			assert.Equal(t, b1.Plan.Hash, b2.Plan.Hash, "O8: two plans of one change must have one fingerprint")
			_, c1 := run(val("c"), "plan")
			require.NotNil(t, c1.Plan)
			assert.NotEqual(t, b1.Plan.Hash, c1.Plan.Hash, "O8: another change must have another fingerprint")

			// The approved plan was b's; the spec now says c.
			code, changed := run(val("c"), "apply", "--expect-plan="+b1.Plan.Hash)
			assert.Equal(t, runner.ExitPlanChanged, code)
			require.NotNil(t, changed.Error)
			assert.Equal(t, runresult.KindPlanChanged, changed.Error.Kind)
			for _, s := range changed.Steps {
				assert.NotEqual(t, runresult.StepApply, s.Name, "O8: a changed plan must not be applied")
			}
			_, still := run(val("b"), "plan")
			assert.Equal(t, b1.Plan.Hash, still.Plan.Hash, "O8: the state must be as before the refused apply")

			code, applied := run(val("b"), "apply", "--expect-plan="+b1.Plan.Hash)
			require.Equal(t, 0, code)
			assert.Nil(t, applied.Error)
			assert.Equal(t, runresult.StepApply, applied.Steps[len(applied.Steps)-1].Name)
			_, after := run(val("b"), "plan")
			require.NotNil(t, after.Plan)
			assert.True(t, after.Plan.Empty(), "O8: the approved plan was applied: %+v", after.Plan)
		})
	}
}

// guardModule is planModule with a second variable whose change replaces
// the resource.
const guardModule = `
terraform {
  backend "local" {
    path = %q
  }
}
variable "v" {
  type = string
}
variable "k" {
  type = string
}
resource "terraform_data" "r" {
  input            = var.v
  triggers_replace = [var.k]
}
`

// TestRunnerGuardDeletesO8 runs `captf runner apply --guard-deletes` with
// the real binaries (SPEC O8's destructive guard, upstream A3-64): an
// in-place update is applied; a change that replaces the resource applies
// nothing (destructive, exit 4, the state as it was) and its document
// carries the plan, whose fingerprint an approved apply (--expect-plan)
// then applies.
func TestRunnerGuardDeletesO8(t *testing.T) {
	for _, b := range []struct{ name, binary string }{{"tofu", tofuBinary}, {"terraform", terraformBinary}} {
		t.Run(b.name, func(t *testing.T) {
			if b.binary == "" {
				t.Skipf("bin/%s is missing", b.name)
			}
			module := t.TempDir()
			state := filepath.Join(t.TempDir(), "terraform.tfstate")
			require.NoError(t, os.WriteFile(filepath.Join(module, "main.tf"), []byte(fmt.Sprintf(guardModule, state)), 0o644))
			run := func(v, k string, args ...string) (int, *runresult.Result) {
				vars, err := json.Marshal(map[string]any{"v": v, "k": k})
				require.NoError(t, err)
				env := append(tofuEnv(t, t.TempDir(), ""), runner.VariablesEnv+"="+string(vars))
				result := filepath.Join(t.TempDir(), "termination-log")
				code, out := runnerRunWith(t, b.binary, module, env, append(args, "--result="+result)...)
				assert.NotContains(t, out, "secret-"+v, "O8: show -json's values must not reach the log")
				raw, err := os.ReadFile(result)
				require.NoError(t, err)
				doc, err := runresult.Unmarshal(raw)
				require.NoError(t, err, "%s", raw)
				t.Logf("result document: %s", raw)
				return code, doc
			}
			applied := func(s *runresult.Result) bool {
				return len(s.Steps) > 0 && s.Steps[len(s.Steps)-1].Name == runresult.StepApply && s.Error == nil
			}

			code, _ := run("secret-a", "1", "apply")
			require.Equal(t, 0, code)

			code, update := run("secret-b", "1", "apply", "--guard-deletes")
			require.Equal(t, 0, code, "O8: an in-place update passes the guard")
			assert.True(t, applied(update), "O8: the update was applied")
			assert.Equal(t, runresult.Changes{Update: 1}, update.Plan.Changes)

			code, stopped := run("secret-b", "2", "apply", "--guard-deletes")
			assert.Equal(t, runner.ExitDestructive, code)
			require.NotNil(t, stopped.Error)
			assert.Equal(t, runresult.KindDestructive, stopped.Error.Kind)
			require.NotNil(t, stopped.Plan)
			assert.Equal(t, runresult.Changes{Replace: 1}, stopped.Plan.Changes)
			assert.Equal(t, []runresult.PlanResource{{Address: "terraform_data.r", Action: "replace"}}, stopped.Plan.Resources)
			for _, s := range stopped.Steps {
				assert.NotEqual(t, runresult.StepApply, s.Name, "O8: a destructive plan must not be applied")
			}
			_, still := run("secret-b", "2", "plan")
			require.NotNil(t, still.Plan)
			assert.Equal(t, stopped.Plan.Hash, still.Plan.Hash, "O8: the state must be as before the guarded apply")

			code, approved := run("secret-b", "2", "apply", "--expect-plan="+stopped.Plan.Hash)
			require.Equal(t, 0, code)
			assert.True(t, applied(approved), "O8: the approved Destructive plan was applied")
			_, after := run("secret-b", "2", "plan")
			require.NotNil(t, after.Plan)
			assert.True(t, after.Plan.Empty(), "O8: the approved plan was applied: %+v", after.Plan)
		})
	}
}
