package runner

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runresult"
)

// Values the runner must never put in its result document (SPEC O1, X1).
const (
	credentialEnv  = "env-credential-Q7x9Lm2p"
	credentialFile = "file-credential-Zr4Kw8Vn"
	keyFileLine    = `"private_key": "-----BEGIN KEY-----abc"`
	variableValue  = "variable-value-Hy3Tb6Cd"
	inputValue     = "bootstrap-value-Pm5Nq1Rs"
	shortSecret    = "k9"
)

// resultFixture is a fixture whose environment carries a mirror key, a
// secret-sourced spec.jobs.env entry and the variables, with the mirror's
// files in a credentials directory and the contract inputs in a file.
func resultFixture(t *testing.T) (f *fixture, args []string, doc string) {
	t.Helper()
	f = newFixture(t,
		"AWS_SECRET_ACCESS_KEY="+credentialEnv,
		"SHORT_PIN="+shortSecret,
		VariablesEnv+`={"size":"`+variableValue+`","count":7}`,
	)
	creds := t.TempDir()
	writeTree(t, creds, map[string]string{
		"..data/token": credentialFile, // a Secret volume's hidden directory
		"key.json":     "{\n  " + keyFileLine + ",\n  \"type\": \"service_account\"\n}\n",
	}, nil)
	require.NoError(t, os.Symlink("..data/token", filepath.Join(creds, "token")))
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	require.NoError(t, os.WriteFile(inputs, []byte(`{"bootstrap_data":"#cloud-config\n`+inputValue+`\n","machine_name":"m-1"}`), 0o600))
	doc = filepath.Join(t.TempDir(), "termination-log")
	require.NoError(t, os.WriteFile(doc, nil, 0o644))
	args = []string{"--chdir=" + f.module, "--workdir=" + t.TempDir(), "--inputs=" + inputs,
		"--result=" + doc, "--image=registry.example/module:1", "--credentials=" + creds}
	return f, args, doc
}

func (f *fixture) write(name, content string) {
	f.t.Helper()
	require.NoError(f.t, os.WriteFile(filepath.Join(f.rec, name), []byte(content), 0o644))
}

// readResult reads the document as the manager does, and checks that no
// value the runner knew reached it.
func readResult(t *testing.T, path string) *runresult.Result {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), runresult.MaxBytes)
	for _, v := range []string{credentialEnv, credentialFile, keyFileLine, "BEGIN KEY", variableValue, inputValue, `"` + shortSecret + `"`, " " + shortSecret + " "} {
		require.NotContains(t, string(b), v, "SPEC O1, X1: a value reached the result document")
	}
	r, err := runresult.Unmarshal(b)
	require.NoError(t, err, string(b))
	return r
}

// TestResultSucceededO1: a successful run's document names the operation,
// the image, the runtime (the first line of `terraform version`), the steps
// with their exit codes and durations, and the planned changes.
func TestResultSucceededO1(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.write("apply.out", "Terraform will perform the following actions:\n\n"+
		"  # terraform_data.a will be created\n"+
		"  # terraform_data.b must be replaced\n"+
		"-/+ resource \"terraform_data\" \"b\" {\n"+
		"  # terraform_data.c will be updated in-place\n"+
		"  # terraform_data.d will be destroyed\n\n"+
		"Plan: 2 to add, 1 to change, 2 to destroy.\n")
	code, _, stderr := f.run(append([]string{"apply"}, args...)...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{"version", "init", "apply"}, f.lines("steps"))

	r := readResult(t, doc)
	require.Equal(t, runresult.OperationApply, r.Operation)
	require.Equal(t, "registry.example/module:1", r.Image)
	require.Equal(t, "fake terraform version: stdout", r.Runtime)
	require.Len(t, r.Steps, 2)
	for i, name := range []string{"init", "apply"} {
		require.Equal(t, name, r.Steps[i].Name)
		require.Zero(t, r.Steps[i].ExitCode)
		require.GreaterOrEqual(t, r.Steps[i].DurationMilliseconds, int64(0))
	}
	require.Equal(t, &runresult.Changes{Create: 1, Update: 1, Replace: 1, Delete: 1}, r.Changes)
	require.Nil(t, r.Error)
}

// TestResultStepFailedO1X1: a failed step's document carries the step,
// its exit code and Terraform's own error lines, with every credential
// (environment and files), variable and input value replaced.
func TestResultStepFailedO1X1(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.write("apply.out", "No changes. Your infrastructure matches the configuration.\n")
	f.write("apply.err", strings.Repeat("provider chatter before the error\n", 2000)+
		"╷\n"+
		"│ Error: local-exec provisioner error\n"+
		"│ \n"+
		"│   with terraform_data.resource,\n"+
		"│   on main.tf line 40, in resource \"terraform_data\" \"resource\":\n"+
		"│   40:   provisioner \"local-exec\" {\n"+
		"│ \n"+
		"│ Error running command: exit status 2. Output: 401 for "+credentialEnv+" and "+credentialFile+"\n"+
		"│ size="+variableValue+" data="+inputValue+" pin="+shortSecret+" count 7\n"+
		"│ "+keyFileLine+"\n"+
		"╵\n")
	f.environ = append(f.environ, "FAKE_apply_EXIT=1")
	code, _, _ := f.run(append([]string{"apply"}, args...)...)
	require.Equal(t, 1, code)

	r := readResult(t, doc)
	require.Equal(t, []runresult.Step{{Name: "init", DurationMilliseconds: r.Steps[0].DurationMilliseconds}, {Name: "apply", ExitCode: 1, DurationMilliseconds: r.Steps[1].DurationMilliseconds}}, r.Steps)
	require.Equal(t, &runresult.Changes{}, r.Changes)
	require.NotNil(t, r.Error)
	require.Equal(t, runresult.KindStep, r.Error.Kind)
	require.Equal(t, "apply", r.Error.Step)
	require.Equal(t, "Error: local-exec provisioner error\n\n"+
		"  with terraform_data.resource,\n"+
		"  on main.tf line 40, in resource \"terraform_data\" \"resource\":\n"+
		"  40:   provisioner \"local-exec\" {\n\n"+
		"Error running command: exit status 2. Output: 401 for (sensitive) and (sensitive)\n"+
		"size=(sensitive) data=(sensitive) pin=(sensitive) count (sensitive)\n"+
		`"private_key": "(sensitive)"`, r.Error.Tail)
}

// TestResultTailWithoutErrorLineO1: output without Terraform's "Error:"
// keeps its last lines, and a first line cut by the ring is dropped (half
// a value is not shown).
func TestResultTailWithoutErrorLineO1(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.write("init.err", strings.Repeat("x", tailBytes)+"half "+credentialEnv[:10]+"\nlast words\n")
	f.environ = append(f.environ, "FAKE_init_EXIT=2")
	code, _, _ := f.run(append([]string{"destroy"}, args...)...)
	require.Equal(t, 2, code)
	r := readResult(t, doc)
	require.Equal(t, runresult.OperationDestroy, r.Operation)
	require.Equal(t, "init", r.Error.Step)
	require.Equal(t, "last words", r.Error.Tail)
	require.Nil(t, r.Changes)
}

// TestResultImageLayoutO2: a module directory without configuration, or
// an image without Terraform, is image-layout (ImageInvalid), and no step
// runs.
func TestResultImageLayoutO2(t *testing.T) {
	t.Parallel()
	for name, edit := range map[string]func(f *fixture, args []string) []string{
		"no configuration": func(f *fixture, args []string) []string {
			require.NoError(t, os.Remove(filepath.Join(f.module, "main.tf")))
			return args
		},
		"no module directory": func(f *fixture, args []string) []string {
			return append(args, "--chdir="+filepath.Join(f.module, "missing"))
		},
		"no terraform": func(f *fixture, args []string) []string {
			return append(args, "--terraform=/nonexistent/terraform")
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, args, doc := resultFixture(t)
			code, _, stderr := f.run(append([]string{"apply"}, edit(f, args)...)...)
			require.Equal(t, ExitRunnerError, code)
			require.NoFileExists(t, filepath.Join(f.rec, "steps"))
			r := readResult(t, doc)
			require.Equal(t, runresult.KindImageLayout, r.Error.Kind)
			require.Equal(t, runresult.StepSetup, r.Error.Step)
			require.Equal(t, strings.TrimPrefix(lastLine(stderr), "captf runner: "), r.Error.Tail)
			require.Empty(t, r.Steps)
		})
	}
}

// TestResultRunnerErrorO1: invalid variables are the runner's failure;
// the document says so without quoting them.
func TestResultRunnerErrorO1(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.environ = append(f.environ, VariablesEnv+`=["`+variableValue+`"]`)
	code, _, _ := f.run(append([]string{"apply"}, args...)...)
	require.Equal(t, ExitRunnerError, code)
	r := readResult(t, doc)
	require.Equal(t, runresult.KindRunner, r.Error.Kind)
	require.Contains(t, r.Error.Tail, "CAPTF_VARIABLES is a JSON array")
}

// TestResultInterruptedO2: a SIGTERM while a step runs (the pod deleted,
// evicted, its node drained) is "interrupted", naming the step.
func TestResultInterruptedO2(t *testing.T) {
	t.Parallel()
	f, args, doc := resultFixture(t)
	f.environ = append(f.environ, "FAKE_apply_MODE=stop", "FAKE_apply_EXIT=1")
	r := f.start(context.Background(), append([]string{"apply"}, args...)...)
	f.waitFile("apply.ready")
	r.sigs <- syscall.SIGTERM
	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), "the code the pod failure policy knows (O2)")
	res := readResult(t, doc)
	require.Equal(t, runresult.KindInterrupted, res.Error.Kind)
	require.Equal(t, "apply", res.Error.Step)
	require.Contains(t, res.Error.Tail, "SIGTERM")
}

// TestResultNotWrittenWithoutFlag: without --result nothing is written and
// `terraform version` is not run.
func TestResultNotWrittenWithoutFlag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--credentials="+t.TempDir())
	require.Equal(t, 0, code, stderr)
	require.Equal(t, []string{"init", "apply"}, f.lines("steps"))
}

// TestResultUnwritable: a document that cannot be written is logged and
// changes nothing else.
func TestResultUnwritable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	code, _, stderr := f.run("apply", "--chdir="+f.module, "--result="+filepath.Join(t.TempDir(), "no", "such", "file"))
	require.Equal(t, 0, code)
	require.Contains(t, stderr, "captf runner: could not write the result document to ")
}

func TestPlanScanner(t *testing.T) {
	for _, tt := range []struct {
		name, out string
		want      *runresult.Changes
	}{
		{"none", "Apply complete!\n", nil},
		{"no changes", "No changes. Your infrastructure matches the configuration.\n", &runresult.Changes{}},
		{"adds", "Plan: 3 to add, 0 to change, 0 to destroy.\n", &runresult.Changes{Create: 3}},
		{"imports and forgets", "Plan: 1 to import, 2 to add, 1 to change, 1 to destroy, 1 to forget.\n", &runresult.Changes{Create: 2, Update: 1, Delete: 1}},
		{"replacements", "  # a must be replaced\n  # b will be replaced, as requested\nPlan: 2 to add, 0 to change, 3 to destroy.\n", &runresult.Changes{Replace: 2, Delete: 1}},
		{"crlf and split writes", "Plan: 1 to add, 0 to \r\nchange", &runresult.Changes{Create: 1}},
		{"a module's own output is not a plan", "terraform_data.a (local-exec): Plan: 9 to add\n", nil},
		{"a line too long is skipped", strings.Repeat("x", maxScanLine+1) + "Plan: 1 to add, 0 to change, 0 to destroy.\n", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &planScanner{}
			for _, c := range []byte(tt.out) {
				_, _ = p.Write([]byte{c})
			}
			require.Equal(t, tt.want, p.changes())
		})
	}
}

// TestResultTailKeepsDecodedBootstrapOutK5: a failed step's error tail,
// which reaches status and events, hides a line of the bootstrap data as
// the module decoded it, not only its base64 form (SPEC K5, X1).
func TestResultTailKeepsDecodedBootstrapOutK5(t *testing.T) {
	t.Parallel()
	const joinLine = "kubeadm join --token abcdef.0123456789abcdef"
	f := newFixture(t)
	inputs := filepath.Join(t.TempDir(), "inputs.json")
	boot := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nruncmd:\n- " + joinLine + "\n"))
	require.NoError(t, os.WriteFile(inputs, []byte(`{"bootstrap_data":"`+boot+`","machine_name":"m-1"}`), 0o600))
	doc := filepath.Join(t.TempDir(), "termination-log")
	require.NoError(t, os.WriteFile(doc, nil, 0o644))
	f.write("apply.err", "Error: invalid user data\n\n  on main.tf line 3:\n  - "+joinLine+"\n")
	f.environ = append(f.environ, "FAKE_apply_EXIT=1")

	code, _, _ := f.run("apply", "--chdir="+f.module, "--workdir="+t.TempDir(), "--inputs="+inputs, "--result="+doc)

	require.Equal(t, 1, code)
	r := readResult(t, doc)
	require.NotNil(t, r.Error)
	require.NotContains(t, r.Error.Tail, joinLine)
	require.Contains(t, r.Error.Tail, "on main.tf line 3:\n  (sensitive)")
}
