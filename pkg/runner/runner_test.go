package runner

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTerraform records how it was run under $FAKE_DIR: the steps in order,
// and per step its arguments, physical working directory and environment.
// FAKE_<step>_EXIT sets its exit code. FAKE_<step>_MODE makes it wait for a
// signal after writing <step>.ready:
//   - stop:   like Terraform, on SIGTERM or SIGINT it records the signal and
//     exits with its code, once <step>.release exists if FAKE_<step>_HOLD=1;
//   - ignore: records signals and keeps running, so only a kill ends it; its
//     own child keeps the output pipe open and writes its pid to <step>.child.
//
// FAKE_TOUCH=1 makes it write fake-<step>.touched into its working directory.
// $FAKE_DIR/<step>.out and <step>.err, when they exist, are copied to its
// stdout and stderr (a plan, an error block).
const fakeTerraform = `#!/bin/sh
step=$1
d=$FAKE_DIR
echo "$step" >> "$d/steps"
printf '%s\n' "$@" > "$d/$step.args"
printf '%s\n' "$*" >> "$d/$step.calls"
pwd -P > "$d/$step.pwd"
env > "$d/$step.env"
# Like Terraform, which writes .terraform and state where it runs.
if [ -n "${FAKE_TOUCH:-}" ]; then : > "fake-$step.touched"; fi
echo "fake terraform $step: stdout"
echo "fake terraform $step: stderr" >&2
if [ -f "$d/$step.out" ]; then cat "$d/$step.out"; fi
if [ -f "$d/$step.err" ]; then cat "$d/$step.err" >&2; fi
eval "mode=\${FAKE_${step}_MODE:-}"
eval "code=\${FAKE_${step}_EXIT:-0}"
eval "hold=\${FAKE_${step}_HOLD:-}"
stop() {
	echo "$1" >> "$d/$step.signals"
	if [ -n "$hold" ]; then
		while [ ! -e "$d/$step.release" ]; do sleep 0.01; done
	fi
	exit "$code"
}
case $mode in
'')
	exit "$code" ;;
stop)
	# Short foreground sleeps: no child left behind when the trap exits.
	trap 'stop TERM' TERM
	trap 'stop INT' INT
	: > "$d/$step.ready"
	while :; do sleep 0.05; done ;;
ignore)
	trap 'echo TERM >> "$d/$step.signals"' TERM
	trap 'echo INT >> "$d/$step.signals"' INT
	sleep 300 </dev/null &
	pid=$!
	echo "$pid" > "$d/$step.child"
	: > "$d/$step.ready"
	while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done
	exit "$code" ;;
esac
`

// fakeBin is the directory holding the fake as "terraform" and "tofu". It is written
// once, before any test forks: writing an executable while another
// goroutine forks can make its exec fail with ETXTBSY.
var fakeBin string

// tofuOnlyBin holds the fake as "tofu" only.
var tofuOnlyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "captf-runner-test")
	if err != nil {
		panic(err)
	}
	fakeBin = dir
	// The same fake as "tofu", for --terraform=tofu (T8).
	for _, name := range []string{"terraform", "tofu"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeTerraform), 0o755); err != nil {
			panic(err)
		}
	}
	// And alone, as an OpenTofu image's PATH has it.
	tofuOnlyBin = filepath.Join(dir, "tofu-only")
	if err := os.Mkdir(tofuOnlyBin, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(tofuOnlyBin, "tofu"), []byte(fakeTerraform), 0o755); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// deadline bounds every wait in these tests. It is never an assertion on
// how long something took, only a guard against hanging forever.
const deadline = 60 * time.Second

type fixture struct {
	t       *testing.T
	rec     string   // FAKE_DIR: what the fake recorded
	module  string   // the module directory
	environ []string // the runner's environment
}

func newFixture(t *testing.T, extraEnv ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, rec: t.TempDir(), module: t.TempDir()}
	// A module image's module directory holds configuration (the
	// image-layout preflight, SPEC O2).
	require.NoError(t, os.WriteFile(filepath.Join(f.module, "main.tf"), nil, 0o644))
	f.environ = append([]string{
		// The fake is found through this PATH only: fakeBin is not in the
		// test process's own PATH.
		"PATH=" + fakeBin + ":/usr/bin:/bin",
		"FAKE_DIR=" + f.rec,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"KUBE_NAMESPACE=team-a",
	}, extraEnv...)
	return f
}

// safeBuffer can be read while the runner writes to it.
type safeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *safeBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *safeBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// running is a runner started in the background.
type running struct {
	t              *testing.T
	sigs           chan os.Signal
	stdout, stderr *safeBuffer
	code           chan int
}

func (f *fixture) start(ctx context.Context, args ...string) *running {
	r := &running{t: f.t, sigs: make(chan os.Signal, 4), stdout: &safeBuffer{}, stderr: &safeBuffer{}, code: make(chan int, 1)}
	go func() { r.code <- run(ctx, args, f.environ, r.stdout, r.stderr, r.sigs) }()
	return r
}

// run runs the runner to completion.
func (f *fixture) run(args ...string) (code int, stdout, stderr string) {
	r := f.start(context.Background(), args...)
	code = r.wait()
	return code, r.stdout.String(), r.stderr.String()
}

func (r *running) wait() int {
	r.t.Helper()
	select {
	case code := <-r.code:
		return code
	case <-time.After(deadline):
		r.t.Fatalf("runner did not return within %v; stderr so far:\n%s", deadline, r.stderr.String())
		return 0
	}
}

// eventually polls cond until it holds, failing with what was last seen.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s; last seen: %s", what, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (f *fixture) read(name string) string {
	b, err := os.ReadFile(filepath.Join(f.rec, name))
	if err != nil {
		return ""
	}
	return string(b)
}

func (f *fixture) waitFile(name string) {
	f.t.Helper()
	eventually(f.t, name, func() (bool, string) {
		_, err := os.Stat(filepath.Join(f.rec, name))
		return err == nil, fmt.Sprint(err)
	})
}

func (f *fixture) lines(name string) []string {
	return strings.Fields(f.read(name))
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func physical(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	return p
}

// J6: init -input=false, then the command with -auto-approve -input=false,
// in --chdir, output streamed, exit code Terraform's; T8: -lock-timeout
// (default 300s) and -no-color on every command.
func TestRunsInitThenCommandJ6(t *testing.T) {
	for _, command := range []string{"apply", "destroy"} {
		t.Run(command, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			code, stdout, stderr := f.run(command, "--chdir="+f.module)

			require.Equal(t, 0, code, stderr)
			require.Equal(t, []string{"init", command}, f.lines("steps"))
			require.Equal(t, "init\n-input=false\n-no-color\n-lock-timeout=300s\n", f.read("init.args"))
			require.Equal(t, command+"\n-auto-approve\n-input=false\n-no-color\n-lock-timeout=300s\n", f.read(command+".args"))
			for _, step := range []string{"init", command} {
				require.Equal(t, physical(t, f.module), strings.TrimSpace(f.read(step+".pwd")))
				require.Contains(t, stdout, "fake terraform "+step+": stdout")
				require.Contains(t, stderr, "fake terraform "+step+": stderr")
			}
			require.Contains(t, f.read(command+".env"), "\nPWD="+f.module+"\n")
			require.Equal(t, "captf runner: init succeeded, "+command+" succeeded", lastLine(stderr))
		})
	}
}

func TestChdirDefaultsToWorkingDirectory(t *testing.T) {
	f := newFixture(t)
	t.Chdir(f.module) // not parallel: the process's working directory
	code, _, stderr := f.run("apply")
	require.Equal(t, 0, code, stderr)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, physical(t, wd), strings.TrimSpace(f.read("apply.pwd")))
}

// J6: the exit code is Terraform's, and a failed init stops the run.
func TestStepFailuresJ6(t *testing.T) {
	tests := []struct {
		name     string
		env      []string
		code     int
		steps    []string
		lastLine string
	}{
		{"init fails", []string{"FAKE_init_EXIT=3"}, 3, []string{"init"},
			"captf runner: init failed with exit code 3, apply not run"},
		{"apply fails", []string{"FAKE_apply_EXIT=1"}, 1, []string{"init", "apply"},
			"captf runner: init succeeded, apply failed with exit code 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, tt.env...)
			code, _, stderr := f.run("apply", "--chdir="+f.module)
			require.Equal(t, tt.code, code, stderr)
			require.Equal(t, tt.steps, f.lines("steps"))
			require.Equal(t, tt.lastLine, lastLine(stderr))
		})
	}
}

// J6, B7 and X1: the forbidden variables are dropped and logged by name; no
// value, dropped or kept, appears in the runner's output.
func TestEnvironmentFilteredJ6(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-TF_VAR-value"
	f := newFixture(t,
		"TF_VAR_secret="+secret,
		"KUBE_TOKEN="+secret+"-kube",
		"TF_LOG=TRACE",
		"GODEBUG=http2debug=2",
		"TERRAFORM_CONFIG=/tmp/"+secret+".tfrc",
		"AWS_SECRET_ACCESS_KEY="+secret+"-aws",
		"tf_var_lower="+secret+"-lower",
		"NOTE=mentions TF_VAR_secret",
	)
	code, stdout, stderr := f.run("apply", "--chdir="+f.module)
	require.Equal(t, 0, code, stderr)

	require.Contains(t, stderr, "captf runner: removed environment variables (SPEC J6, B7): GODEBUG KUBE_TOKEN TERRAFORM_CONFIG TF_LOG TF_VAR_secret\n")
	require.NotContains(t, stdout+stderr, secret)
	require.NotContains(t, stdout+stderr, "TRACE")
	require.NotContains(t, stdout+stderr, "http2debug")

	for _, step := range []string{"init", "apply"} {
		env := strings.Split(f.read(step+".env"), "\n")
		for _, gone := range []string{"TF_VAR_secret=", "KUBE_TOKEN=", "TF_LOG=", "GODEBUG=", "TERRAFORM_CONFIG="} {
			for _, e := range env {
				require.False(t, strings.HasPrefix(e, gone), "%s saw %s", step, gone)
			}
		}
		for _, kept := range []string{
			"TF_IN_AUTOMATION=1", "TF_INPUT=0", "KUBE_NAMESPACE=team-a",
			"AWS_SECRET_ACCESS_KEY=" + secret + "-aws",
			"tf_var_lower=" + secret + "-lower",
			"NOTE=mentions TF_VAR_secret",
			// No update check from a Job (upstream A3-78).
			"CHECKPOINT_DISABLE=1",
		} {
			require.Contains(t, env, kept, "%s lost %s", step, strings.SplitN(kept, "=", 2)[0])
		}
	}
}

func TestNothingDroppedIsSaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	code, _, stderr := f.run("apply", "--chdir="+f.module)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "captf runner: no TF_, KUBE_, TERRAFORM_CONFIG or GODEBUG environment variables to remove\n")
}

// A stop signal reaches Terraform, which exits on its own; the runner
// reports it and returns Terraform's code.
func TestSignalForwarded(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		seen string
	}{{syscall.SIGTERM, "TERM"}, {syscall.SIGINT, "INT"}} {
		t.Run(tt.seen, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "FAKE_apply_MODE=stop", "FAKE_apply_EXIT=1")
			r := f.start(context.Background(), "apply", "--chdir="+f.module)
			f.waitFile("apply.ready")
			r.sigs <- tt.sig

			// SPEC O2: the runner's code says it was stopped (128+signal),
			// whatever Terraform's was, so the pod failure policy sees an
			// interruption, not a failed run.
			require.Equal(t, 128+int(tt.sig), r.wait(), r.stderr.String())
			require.Equal(t, []string{tt.seen}, f.lines("apply.signals"))
			require.Equal(t, fmt.Sprintf("captf runner: init succeeded, apply failed with exit code 1 after SIG%s; stopped by SIG%s (exit code %d)", tt.seen, tt.seen, 128+int(tt.sig)), lastLine(r.stderr.String()))
		})
	}
}

// After a stop signal the next step does not start, and a run whose apply
// never ran is not reported as a success even though init exited 0.
func TestStopDuringInitSkipsApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_init_MODE=stop")
	r := f.start(context.Background(), "apply", "--chdir="+f.module)
	f.waitFile("init.ready")
	r.sigs <- syscall.SIGTERM

	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), r.stderr.String())
	require.Equal(t, []string{"init"}, f.lines("steps"))
	require.Equal(t, []string{"TERM"}, f.lines("init.signals"))
	require.Equal(t, "captf runner: init succeeded after SIGTERM, apply not run; stopped by SIGTERM (exit code 143)", lastLine(r.stderr.String()))
}

// requireGone waits until the fake's own child has been killed too, which
// only happens if the runner kills Terraform's whole process group.
func (f *fixture) requireGone(pidFile string) {
	f.t.Helper()
	pid := strings.TrimSpace(f.read(pidFile))
	require.NotEmpty(f.t, pid)
	eventually(f.t, "process "+pid+" to end", func() (bool, string) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil {
			return true, "" // gone and reaped
		}
		// An orphan may stay a zombie until its new parent reaps it.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		return len(fields) > 0 && fields[0] == "Z", string(stat)
	})
}

func TestSecondSignalKills(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_apply_MODE=ignore")
	r := f.start(context.Background(), "apply", "--chdir="+f.module)
	f.waitFile("apply.ready")
	r.sigs <- syscall.SIGTERM
	eventually(t, "the fake to see SIGTERM", func() (bool, string) {
		s := f.read("apply.signals")
		return s == "TERM\n", s
	})
	r.sigs <- syscall.SIGINT

	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), r.stderr.String(), "the first stop request names the code (O2)")
	require.Equal(t, "captf runner: init succeeded, apply killed after the second signal SIGINT (exit code 137); stopped by SIGTERM (exit code 143)", lastLine(r.stderr.String()))
	f.requireGone("apply.child")
}

func TestStopTimeoutKills(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_apply_MODE=ignore")
	r := f.start(context.Background(), "apply", "--chdir="+f.module, "--stop-timeout=200ms")
	f.waitFile("apply.ready")
	r.sigs <- syscall.SIGTERM

	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), r.stderr.String(), "the stop request names the code (O2)")
	require.Equal(t, "TERM\n", f.read("apply.signals"))
	require.Equal(t, "captf runner: init succeeded, apply killed after the 200ms stop timeout (exit code 137); stopped by SIGTERM (exit code 143)", lastLine(r.stderr.String()))
	f.requireGone("apply.child")
}

// A cancelled context is a stop request like SIGTERM.
func TestContextCancelStops(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_destroy_MODE=stop", "FAKE_destroy_EXIT=1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := f.start(ctx, "destroy", "--chdir="+f.module)
	f.waitFile("destroy.ready")
	cancel()

	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), r.stderr.String())
	require.Equal(t, []string{"TERM"}, f.lines("destroy.signals"))
	require.Equal(t, "captf runner: init succeeded, destroy failed with exit code 1 after stop request (context cancelled); stopped by stop request (context cancelled) (exit code 143)", lastLine(r.stderr.String()))
}

// A caller using signal.NotifyContext sees one SIGTERM as both a cancelled
// context and a signal; that is one stop request, not two.
func TestContextAndSignalAreOneStop(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "FAKE_apply_MODE=stop", "FAKE_apply_EXIT=1", "FAKE_apply_HOLD=1")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := f.start(ctx, "apply", "--chdir="+f.module)
	f.waitFile("apply.ready")
	cancel()
	r.sigs <- syscall.SIGTERM
	eventually(t, "the runner to take in both", func() (bool, string) {
		s := r.stderr.String()
		return strings.Contains(s, "taken as the same stop request") || strings.Contains(s, "killing"), s
	})
	require.NotContains(t, r.stderr.String(), "killing", "the twin was taken as a second signal")
	require.NoError(t, os.WriteFile(filepath.Join(f.rec, "apply.release"), nil, 0o644))

	require.Equal(t, 128+int(syscall.SIGTERM), r.wait(), r.stderr.String())
	require.Equal(t, []string{"TERM"}, f.lines("apply.signals"))
	require.Equal(t, "captf runner: init succeeded, apply failed with exit code 1 after SIGTERM; stopped by SIGTERM (exit code 143)", lastLine(r.stderr.String()))
}

// The runner's own failures: exit code 125 and one line that says what to do.
func TestRunnerErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	notDir := filepath.Join(f.module, "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	emptyBin := t.TempDir()

	tests := []struct {
		name    string
		args    []string
		environ []string
		want    []string
	}{
		{"no subcommand", nil, f.environ,
			[]string{"missing subcommand: want one of apply, destroy"}},
		{"unknown subcommand", []string{"refresh"}, f.environ,
			[]string{`unknown subcommand "refresh": want one of apply, destroy`}},
		{"unknown flag", []string{"apply", "--bogus"}, f.environ,
			[]string{"flag provided but not defined: -bogus"}},
		{"extra argument", []string{"destroy", "--chdir=" + f.module, "now"}, f.environ,
			[]string{`unexpected argument "now"`}},
		{"bad stop timeout", []string{"apply", "--stop-timeout=0s"}, f.environ,
			[]string{"--stop-timeout must be positive"}},
		{"negative lock timeout", []string{"apply", "--lock-timeout=-1s"}, f.environ,
			[]string{"--lock-timeout must be a whole number of seconds, 0s or more"}},
		{"fractional lock timeout", []string{"apply", "--lock-timeout=1500ms"}, f.environ,
			[]string{"--lock-timeout must be a whole number of seconds"}},
		{"state namespace alone", []string{"apply", "--state-namespace=team-a"}, f.environ,
			[]string{"--state-namespace needs --state-suffix"}},
		{"state suffix alone", []string{"destroy", "--state-suffix=demo-cluster"}, f.environ,
			[]string{"--state-suffix needs --state-namespace"}},
		{"state kubeconfig alone", []string{"apply", "--state-kubeconfig=/k"}, f.environ,
			[]string{"--state-kubeconfig needs --state-namespace and --state-suffix"}},
		{"numeric suffix tail", []string{"apply", "--state-namespace=team-a", "--state-suffix=web-01"}, f.environ,
			[]string{`--state-suffix "web-01" ends with '-<number>'`, "<name>-<kind>"}},
		{"suffix too long", []string{"apply", "--state-namespace=team-a", "--state-suffix=" + strings.Repeat("a", 64)}, f.environ,
			[]string{"is not a valid label value", "63"}},
		{"suffix not a name", []string{"apply", "--state-namespace=team-a", "--state-suffix=Demo_Cluster"}, f.environ,
			[]string{`gives the object name "tfstate-default-Demo_Cluster", which is not a DNS-1123 subdomain`}},
		{"bad state namespace", []string{"apply", "--state-namespace=Team.A", "--state-suffix=demo-cluster"}, f.environ,
			[]string{`--state-namespace "Team.A" is not a namespace name`}},
		{"directory missing", []string{"apply", "--chdir=" + filepath.Join(f.module, "nope")}, f.environ,
			[]string{`module directory "` + filepath.Join(f.module, "nope") + `" does not exist`, "--chdir"}},
		{"not a directory", []string{"apply", "--chdir=" + notDir}, f.environ,
			[]string{`module directory "` + notDir + `" is not a directory`, "--chdir"}},
		// The test process's own PATH may well hold a real terraform: the
		// runner must look only in the PATH it was given.
		{"terraform not in PATH", []string{"apply", "--chdir=" + f.module}, []string{"PATH=" + emptyBin},
			[]string{`terraform not found: no executable "terraform" in the directories of PATH`, "--terraform"}},
		{"no PATH", []string{"apply", "--chdir=" + f.module, "--terraform=tofu"}, nil,
			[]string{`no executable "tofu"`, "--terraform"}},
		{"terraform path missing", []string{"apply", "--chdir=" + f.module, "--terraform=/nonexistent/terraform"}, f.environ,
			[]string{`terraform not found: "/nonexistent/terraform" does not exist`, "--terraform"}},
		{"terraform path not executable", []string{"apply", "--chdir=" + f.module, "--terraform=" + notDir}, f.environ,
			[]string{`"` + notDir + `" is not an executable file`, "--terraform"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(context.Background(), tt.args, tt.environ, &stdout, &stderr)
			require.Equal(t, ExitRunnerError, code)
			require.Empty(t, stdout.String())
			require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "one line, got %q", stderr.String())
			require.True(t, strings.HasPrefix(stderr.String(), "captf runner: "), stderr.String())
			for _, w := range tt.want {
				require.Contains(t, stderr.String(), w)
			}
		})
	}
	require.NoFileExists(t, filepath.Join(f.rec, "steps"), "no Terraform step may run on a runner error")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"apply", "-h"}, {"destroy", "--help"}} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, Main(context.Background(), args, nil, &stdout, &stderr))
		require.Contains(t, stderr.String(), "usage: captf runner")
	}
}

// T8: an OpenTofu image without the upstream layout has only tofu on its
// PATH, and the Job passes no --terraform: the runner runs tofu. With
// --terraform given, it does not look further.
func TestTofuWhenNoTerraformT8(t *testing.T) {
	f := newFixture(t)
	f.environ[0] = "PATH=" + tofuOnlyBin + ":/usr/bin:/bin"
	code, _, stderr := f.run("apply", "--chdir="+f.module)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stderr, "captf runner: no terraform in PATH; running "+filepath.Join(tofuOnlyBin, "tofu"))
	require.Contains(t, stderr, "captf runner: running tofu apply")
	require.Equal(t, "init\napply\n", f.read("steps"))

	code, _, stderr = f.run("apply", "--chdir="+f.module, "--terraform=terraform")
	require.Equal(t, ExitRunnerError, code)
	require.Contains(t, lastLine(stderr), `no executable "terraform"`)
}
