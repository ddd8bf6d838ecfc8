package runner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runresult"
)

// driftPlan is a plan with drift: one resource changed outside Terraform,
// one replaced, with a value the module passed in (it must not reach the
// document: addresses only).
const driftPlan = "Terraform will perform the following actions:\n\n" +
	"  # terraform_data.server will be updated in-place\n" +
	"  ~ resource \"terraform_data\" \"server\" {\n" +
	"      ~ input = \"" + variableValue + "\" -> \"size\"\n" +
	"    }\n\n" +
	"  # aws_instance.node[\"a b\"] must be replaced\n" +
	"-/+ resource \"aws_instance\" \"node\" {\n" +
	"    }\n\n" +
	"Plan: 1 to add, 1 to change, 1 to destroy.\n"

// TestDriftFoundO7: `captf runner drift` runs init, a refresh-only apply
// and a plan without refresh with -detailed-exitcode; the plan's exit
// code 2 is drift found: the run succeeds, and the document carries the
// counts and the addresses, no value.
func TestDriftFoundO7(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.environ = append(f.environ, "FAKE_plan_EXIT=2")
	f.write("plan.out", driftPlan)
	code, _, stderr := f.run(append([]string{"drift"}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, "captf runner: init succeeded, refresh succeeded, plan found changes (exit code 2)", lastLine(stderr))
	require.Equal(t, []string{"version", "init", "apply", "plan"}, f.lines("steps"), "never an apply but the refresh-only one")
	require.Equal(t, []string{"apply", "-refresh-only", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=300s"}, f.lines("apply.args"))
	require.Equal(t, []string{"plan", "-refresh=false", "-detailed-exitcode", "-input=false", "-no-color", "-lock-timeout=300s"}, f.lines("plan.args"))

	r := readResult(t, doc)
	require.Equal(t, runresult.OperationDrift, r.Operation)
	require.Nil(t, r.Error)
	require.Nil(t, r.Changes)
	var names []string
	for _, s := range r.Steps {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"init", "refresh", "plan"}, names)
	require.Equal(t, 2, r.Steps[2].ExitCode)
	require.Equal(t, &runresult.Drift{
		Changes:   runresult.Changes{Update: 1, Replace: 1},
		Resources: []string{"terraform_data.server", `aws_instance.node["a b"]`},
	}, r.Drift)
}

// TestNoDriftO7: a plan without changes exits 0 and records drift of zero.
func TestNoDriftO7(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.write("plan.out", "No changes. Your infrastructure matches the configuration.\n")
	code, _, stderr := f.run(append([]string{"drift"}, args...)...)
	require.Equal(t, 0, code, stderr)
	r := readResult(t, doc)
	require.Nil(t, r.Error)
	require.NotNil(t, r.Drift)
	require.False(t, r.Drift.Found())
}

// TestDriftFailsO7: a failed refresh skips the plan; a plan that exits 1
// (an error under -detailed-exitcode) fails the run; neither reports
// drift.
func TestDriftFailsO7(t *testing.T) {
	for _, tt := range []struct {
		name, env, step, line string
		steps                 []string
	}{
		{"refresh fails", "FAKE_apply_EXIT=1", runresult.StepRefresh,
			"captf runner: init succeeded, refresh failed with exit code 1, plan not run", []string{"version", "init", "apply"}},
		{"plan fails", "FAKE_plan_EXIT=1", runresult.StepPlan,
			"captf runner: init succeeded, refresh succeeded, plan failed with exit code 1", []string{"version", "init", "apply", "plan"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, args, doc := resultFixture(t)
			f.environ = append(f.environ, tt.env)
			code, _, stderr := f.run(append([]string{"drift"}, args...)...)
			require.Equal(t, 1, code, stderr)
			require.Equal(t, tt.line, lastLine(stderr))
			require.Equal(t, tt.steps, f.lines("steps"))
			r := readResult(t, doc)
			require.NotNil(t, r.Error)
			require.Equal(t, runresult.KindStep, r.Error.Kind)
			require.Equal(t, tt.step, r.Error.Step)
			require.Nil(t, r.Drift)
		})
	}
}
