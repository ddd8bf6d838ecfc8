package runner

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// ExitRunnerError is the exit code of the runner's own failures: bad
	// usage, Terraform or the module directory not found, Terraform not
	// startable. 125 is what env(1) and `docker run` use for the same
	// purpose, and Terraform itself only ever exits with 0, 1 or 2, so the
	// Job controller and an operator can tell the two apart.
	ExitRunnerError = 125

	// DefaultStopTimeout is how long Terraform gets after the first stop
	// signal before it is killed. It is below the Job's 600s termination
	// grace period so that the runner, not the kubelet, does the killing
	// and still reports what happened.
	DefaultStopTimeout = 570 * time.Second

	// DefaultLockTimeout is how long Terraform waits for the state lock
	// (SPEC T8) unless --lock-timeout says otherwise.
	DefaultLockTimeout = 300 * time.Second

	// waitDelay bounds how long the runner waits for the output pipes after
	// Terraform has exited, in case a provider it started still holds them.
	waitDelay = 10 * time.Second

	// ExitPlanChanged is the exit code of an apply with --expect-plan
	// whose plan is not the approved one: nothing was applied (SPEC O8).
	ExitPlanChanged = 3

	// ExitDestructive is the exit code of an apply with --guard-deletes
	// whose plan deletes or replaces resources: nothing was applied; the
	// plan waits for approval (SPEC O8, upstream A3-64).
	ExitDestructive = 4
)

// subcommands are the valid first arguments, in the order usage lists them.
var subcommands = []string{"apply", "destroy", "drift", "restore", "plan"}

// Main runs `captf runner <args...>` (args excludes "runner" itself, e.g.
// ["apply", "--chdir=/m"]). It returns the process exit code. environ is the
// runner's own environment (os.Environ()).
//
// Main listens for SIGTERM and SIGINT itself for as long as it runs. If ctx
// is cancelled, that counts as a stop request too; a caller that cancels ctx
// on the same signals (signal.NotifyContext) is fine: the runner recognises
// the duplicate and does not treat it as a second signal.
func Main(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) int {
	// Room for two, so a quick second signal is not lost while the first is
	// being handled.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	return run(ctx, args, environ, stdout, stderr, sigs)
}

// config is the parsed command line.
type config struct {
	command     string // apply, destroy, drift or restore
	terraform   string // --terraform as given
	chdir       string // --chdir, absolute
	workdir     string // --workdir, "" to run in the module directory
	home        string // --home, "" to keep the environment's HOME
	lockTimeout time.Duration
	stopTimeout time.Duration

	// expectPlan is --expect-plan: the approved plan's fingerprint; the
	// apply plans, compares and applies that saved plan only (SPEC O8).
	expectPlan string

	// guardDeletes is --guard-deletes: the apply plans first and applies
	// the saved plan only when it deletes and replaces nothing (SPEC O8's
	// destructive guard, upstream A3-64).
	guardDeletes bool

	// inputs is --inputs: a file holding the contract inputs (SPEC K6).
	inputs string

	// SPEC O1: result is the file the result document is written to (the
	// Job's termination message), "" for none; image is the module image
	// it names; credentials is the directory of the mirror's files, whose
	// values are redacted from it.
	result, image, credentials string

	// restoreChunks is --restore-chunks: the directory of the state
	// backup's chunks a restore pushes (SPEC O5), restore only.
	restoreChunks string

	// imageRoot is --image-root: where upstream's module images keep the
	// module, the runtime and a provider mirror (SPEC O10).
	imageRoot string
	// chdirSet and terraformSet: the flags were given, so the image
	// layout does not choose them.
	chdirSet, terraformSet bool

	// State in the kubernetes backend (SPEC T2): both or neither.
	stateNamespace, stateSuffix string
	stateKubeconfig             string // out of cluster only, absolute
}

// run is Main with the signal source injected, so tests can deliver signals
// without signalling the test process. With --result it writes the result
// document there when it ends (SPEC O1).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	stdout, stderr = syncWriters(stdout, stderr)
	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "captf runner: %v\n", err)
		return ExitRunnerError
	}
	rep := newReport(cfg, environ)
	code := execute(ctx, cfg, environ, stdout, stderr, sigs, rep)
	if cfg.result != "" {
		rep.write(cfg.result, stderr)
	}
	return code
}

// parse reads the subcommand and its flags. Flag errors come back as one-line
// errors so that the runner's last line stays a "captf runner:" line.
func parse(args []string, stderr io.Writer) (config, error) {
	valid := strings.Join(subcommands, ", ")
	if len(args) == 0 {
		return config{}, fmt.Errorf("missing subcommand: want one of %s", valid)
	}
	cfg := config{command: args[0]}
	switch {
	case slices.Contains([]string{"-h", "-help", "--help", "help"}, cfg.command):
		fmt.Fprintf(stderr, "usage: captf runner {%s} [flags]\nrun `captf runner apply -h` for the flags\n", strings.Join(subcommands, "|"))
		return config{}, flag.ErrHelp
	case !slices.Contains(subcommands, cfg.command):
		return config{}, fmt.Errorf("unknown subcommand %q: want one of %s", cfg.command, valid)
	}

	fset := cfg.flags()
	err := fset.Parse(args[1:])
	fset.Visit(func(fl *flag.Flag) {
		switch fl.Name {
		case "chdir":
			cfg.chdirSet = true
		case "terraform":
			cfg.terraformSet = true
		}
	})
	switch {
	case errors.Is(err, flag.ErrHelp):
		fset.SetOutput(stderr)
		fmt.Fprintf(stderr, "usage: captf runner %s [flags]\n", cfg.command)
		fset.PrintDefaults()
		return config{}, err
	case err != nil:
		return config{}, fmt.Errorf("%s: %v (see captf runner %s -h)", cfg.command, err, cfg.command)
	case fset.NArg() > 0:
		return config{}, fmt.Errorf("%s: unexpected argument %q (see captf runner %s -h)", cfg.command, fset.Arg(0), cfg.command)
	}
	if err := cfg.validate(); err != nil {
		return config{}, err
	}
	if cfg.stateNamespace != "" {
		if err := checkState(cfg.stateNamespace, cfg.stateSuffix); err != nil {
			return config{}, fmt.Errorf("%s: %v", cfg.command, err)
		}
	}
	// Terraform runs in another directory than the runner: relative paths
	// are made absolute against the runner's.
	for _, p := range []*string{&cfg.home, &cfg.stateKubeconfig, &cfg.restoreChunks} {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return config{}, fmt.Errorf("%s: %v", cfg.command, err)
		}
		*p = abs
	}
	return cfg, nil
}

// validate checks the flags' values and combinations.
func (cfg *config) validate() error {
	switch {
	case cfg.stopTimeout <= 0:
		return fmt.Errorf("%s: --stop-timeout must be positive, got %v", cfg.command, cfg.stopTimeout)
	case cfg.lockTimeout < 0 || cfg.lockTimeout%time.Second != 0:
		return fmt.Errorf("%s: --lock-timeout must be a whole number of seconds, 0s or more, got %v", cfg.command, cfg.lockTimeout)
	case cfg.stateNamespace != "" && cfg.stateSuffix == "":
		return fmt.Errorf("%s: --state-namespace needs --state-suffix: the kubernetes backend takes both, or leave both out for local state", cfg.command)
	case cfg.stateNamespace == "" && cfg.stateSuffix != "":
		return fmt.Errorf("%s: --state-suffix needs --state-namespace: the kubernetes backend takes both, or leave both out for local state", cfg.command)
	case cfg.stateKubeconfig != "" && cfg.stateNamespace == "":
		return fmt.Errorf("%s: --state-kubeconfig needs --state-namespace and --state-suffix", cfg.command)
	case cfg.command == "restore" && cfg.restoreChunks == "":
		return fmt.Errorf("restore: --restore-chunks is required: the directory of the backup to push (SPEC O5)")
	case cfg.command != "restore" && cfg.restoreChunks != "":
		return fmt.Errorf("%s: --restore-chunks is for restore only", cfg.command)
	case cfg.guardDeletes && cfg.expectPlan != "":
		return fmt.Errorf("apply: --guard-deletes and --expect-plan exclude each other: an approved plan is applied as approved, deletions included (SPEC O8)")
	}
	return nil
}

// flags defines the runner's flags on cfg's fields.
func (cfg *config) flags() *flag.FlagSet {
	fset := flag.NewFlagSet("captf runner "+cfg.command, flag.ContinueOnError)
	fset.SetOutput(io.Discard) // errors are reported by the caller, on one line
	fset.StringVar(&cfg.terraform, "terraform", "terraform", "Terraform executable: a name looked up in PATH, or a path")
	fset.StringVar(&cfg.chdir, "chdir", "", "module directory (default the working directory); with --workdir it is only read")
	fset.StringVar(&cfg.workdir, "workdir", "", "existing empty directory to copy the module directory into and run Terraform in (SPEC T2); without it Terraform runs in the module directory")
	fset.StringVar(&cfg.home, "home", "", "HOME for Terraform, created if missing (its CLI configuration and plugin cache must be writable)")
	fset.DurationVar(&cfg.lockTimeout, "lock-timeout", DefaultLockTimeout, "how long Terraform waits for the state lock, whole seconds (SPEC T8); 0s fails at once")
	fset.StringVar(&cfg.inputs, "inputs", "", "file holding the contract inputs as a JSON object (SPEC K6), written as "+InputsFile+" into the working copy; needs --workdir")
	fset.StringVar(&cfg.stateNamespace, "state-namespace", "", "namespace of the state in the kubernetes backend (SPEC T2); needs --state-suffix")
	fset.StringVar(&cfg.stateSuffix, "state-suffix", "", "secret_suffix of the state in the kubernetes backend (SPEC T2); needs --state-namespace")
	fset.StringVar(&cfg.stateKubeconfig, "state-kubeconfig", "", "kubeconfig for the kubernetes backend instead of the in-cluster config (debugging out of cluster); needs the state flags")
	fset.StringVar(&cfg.result, "result", "", "file to write the result document to when the run ends (SPEC O1; the Job passes its termination message, /dev/termination-log); empty writes none")
	fset.StringVar(&cfg.image, "image", "", "the module image, named in the result document (SPEC O1)")
	fset.StringVar(&cfg.credentials, "credentials", DefaultCredentialsDir, "directory of the credential files (SPEC J2), whose values never reach the result document; a missing directory is skipped")
	fset.StringVar(&cfg.restoreChunks, "restore-chunks", "", "restore only: directory of the state backup's chunks, files 0, 1, ... holding the backend's gzip-compressed state in order (SPEC O5; the Job mounts the backup Secrets there)")
	fset.DurationVar(&cfg.stopTimeout, "stop-timeout", DefaultStopTimeout, "how long Terraform may take to stop after the first SIGTERM or SIGINT before it is killed")
	if cfg.command == "apply" {
		fset.StringVar(&cfg.expectPlan, "expect-plan", "", "the approved plan's fingerprint (SPEC O8): plan, compare, and apply exactly that saved plan when equal; otherwise apply nothing and exit 3 (plan-changed)")
		fset.BoolVar(&cfg.guardDeletes, "guard-deletes", false, "plan first and apply the saved plan only when it deletes and replaces nothing (SPEC O8's destructive guard); otherwise apply nothing and exit 4 (destructive); not with --expect-plan")
	}
	fset.StringVar(&cfg.imageRoot, "image-root", DefaultImageRoot, "where an image laid out as upstream's keeps module/ (the module directory unless --chdir), runtime (the binary, or a directory holding tofu or terraform, unless --terraform) and providers/ (a provider mirror) (SPEC O10)")
	return fset
}

// lookPath finds the Terraform executable like a shell would, but in the
// given PATH. Relative PATH entries are skipped: they would be resolved
// against the module directory, letting a module shadow Terraform. The
// errors name what was searched, but not PATH's value (no environment
// values in the logs).
func lookPath(name, path string) (string, error) {
	const hint = "set its name or path with --terraform"
	if strings.Contains(name, "/") {
		if err := executable(name); err != nil {
			return "", fmt.Errorf("terraform not found: %q %v; %s", name, err, hint)
		}
		return filepath.Abs(name)
	}
	if name != "" {
		for _, dir := range filepath.SplitList(path) {
			if !filepath.IsAbs(dir) {
				continue
			}
			if p := filepath.Join(dir, name); executable(p) == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("terraform not found: no executable %q in the directories of PATH; %s", name, hint)
}

func executable(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return errors.New("does not exist")
	case err != nil:
		return errors.New("cannot be read")
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return errors.New("is not an executable file")
	}
	return nil
}

// lookupEnv is os.LookupEnv on environ: the last entry wins.
func lookupEnv(environ []string, name string) (string, bool) {
	for _, e := range slices.Backward(environ) {
		if n, v, ok := strings.Cut(e, "="); ok && n == name {
			return v, true
		}
	}
	return "", false
}

// envName is the name part of an environment entry.
func envName(e string) string {
	n, _, _ := strings.Cut(e, "=")
	return n
}

// getenv returns the value of name in environ. The last entry wins, as it
// does for the child process (os/exec de-duplicates that way).
func getenv(environ []string, name string) string {
	for _, e := range slices.Backward(environ) {
		if n, v, ok := strings.Cut(e, "="); ok && n == name {
			return v
		}
	}
	return ""
}

// logDropped writes the J6 line: names only, on one line.
func logDropped(w io.Writer, names []string) {
	if len(names) == 0 {
		fmt.Fprintln(w, "captf runner: no TF_, KUBE_, TERRAFORM_CONFIG or GODEBUG environment variables to remove")
		return
	}
	fmt.Fprintf(w, "captf runner: removed environment variables (SPEC J6, B7): %s\n", showNames(names))
}

// showNames joins names with spaces for a log line. A name holding anything
// but the usual characters is quoted, so that a stray newline or space
// cannot split or blur the line.
func showNames(names []string) string {
	shown := make([]string, len(names))
	for i, n := range names {
		shown[i] = n
		if n == "" || strings.ContainsFunc(n, func(r rune) bool {
			return !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
		}) {
			shown[i] = fmt.Sprintf("%q", n)
		}
	}
	return strings.Join(shown, " ")
}

// syncWriters serialises the runner's own messages with the copies of
// Terraform's output that os/exec makes for writers that are not files.
// Files are passed through untouched so Terraform writes to them directly.
func syncWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	_, outFile := stdout.(*os.File)
	_, errFile := stderr.(*os.File)
	if outFile && errFile {
		return stdout, stderr
	}
	mu := new(sync.Mutex)
	return &lockedWriter{mu: mu, w: stdout}, &lockedWriter{mu: mu, w: stderr}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
