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

	"github.com/captf/captf/pkg/runner/envfilter"
	"github.com/captf/captf/pkg/runresult"
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
)

// subcommands are the valid first arguments, in the order usage lists them.
var subcommands = []string{"apply", "destroy", "drift"}

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
	command     string // apply or destroy
	terraform   string // --terraform as given
	chdir       string // --chdir, absolute
	workdir     string // --workdir, "" to run in the module directory
	home        string // --home, "" to keep the environment's HOME
	lockTimeout time.Duration
	stopTimeout time.Duration

	// inputs is --inputs: a file holding the contract inputs (SPEC K6).
	inputs string

	// SPEC O1: result is the file the result document is written to (the
	// Job's termination message), "" for none; image is the module image
	// it names; credentials is the directory of the mirror's files, whose
	// values are redacted from it.
	result, image, credentials string

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

// execute runs the steps of cfg and records them in rep.
func execute(ctx context.Context, cfg config, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal, rep *report) int {
	// fail reports the runner's own failure: on its last line, and in the
	// result document with its kind (SPEC O1, O2).
	fail := func(kind runresult.Kind, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintln(stderr, "captf runner: "+msg)
		rep.fail(kind, msg)
		return ExitRunnerError
	}
	image := runresult.KindImageLayout
	other := runresult.KindRunner

	var err error
	// SPEC O10: an image laid out as upstream's (/captf/module,
	// /captf/runtime, /captf/providers) runs unchanged; flags given win.
	layout := detectLayout(cfg.imageRoot)
	if !cfg.chdirSet && layout.module != "" {
		cfg.chdir = layout.module
	}
	if !cfg.terraformSet && layout.runtime != "" {
		cfg.terraform = layout.runtime
	}
	if layout.found() {
		fmt.Fprintf(stderr, "captf runner: image layout under %s (SPEC O10): %s\n", cfg.imageRoot, layout)
	}
	if cfg.chdir == "" {
		if cfg.chdir, err = os.Getwd(); err != nil {
			return fail(other, "cannot determine the working directory: %v; set the module directory with --chdir", err)
		}
	}
	if cfg.chdir, err = filepath.Abs(cfg.chdir); err != nil {
		return fail(other, "module directory: %v", err)
	}
	switch fi, err := os.Stat(cfg.chdir); {
	case errors.Is(err, fs.ErrNotExist):
		return fail(image, "module directory %q does not exist; set it with --chdir", cfg.chdir)
	case err != nil:
		return fail(image, "module directory: %v", err)
	case !fi.IsDir():
		return fail(image, "module directory %q is not a directory; set it with --chdir", cfg.chdir)
	}
	// Upstream's image-layout preflight (A3-06, SPEC O2).
	if err := checkModule(cfg.chdir); err != nil {
		return fail(image, "%v", err)
	}

	// PATH comes from the environment the runner was given, not from
	// os.Getenv, so that Main is a function of its arguments.
	path, err := lookPath(cfg.terraform, getenv(environ, "PATH"))
	if err != nil {
		return fail(image, "%v", err)
	}

	// SPEC T3: the variables are checked before anything is written.
	var varsFile []byte
	var varNames []string
	if value, ok := lookupEnv(environ, VariablesEnv); ok {
		if cfg.workdir == "" {
			return fail(other, "%s is set but --workdir is not: the variables file is written only into a working copy, never into the module directory", VariablesEnv)
		}
		if varsFile, varNames, err = parseVariables(value); err != nil {
			return fail(other, "%v", err)
		}
	}

	// SPEC K6: the contract inputs, checked before anything is written.
	var inputsFile []byte
	var inputNames []string
	if cfg.inputs != "" {
		if cfg.workdir == "" {
			return fail(other, "--inputs is set but --workdir is not: the inputs file is written only into a working copy, never into the module directory")
		}
		if inputsFile, inputNames, err = readInputs(cfg.inputs); err != nil {
			return fail(other, "%v", err)
		}
		// SPEC O1: no input value (bootstrap data among them) reaches
		// the result document.
		_ = rep.redactor.AddJSON(inputsFile)
	}

	// SPEC T2: a writable copy of the module directory, which stays as the
	// image has it.
	dir := cfg.chdir
	if cfg.workdir != "" {
		mod, wd, err := prepareWorkdir(cfg.chdir, cfg.workdir)
		if err != nil {
			return fail(other, "%v", err)
		}
		if err := copyModule(mod, wd); err != nil {
			return fail(image, "copying the module directory %q to the working directory %q: %v", mod, wd, err)
		}
		fmt.Fprintf(stderr, "captf runner: copied the module directory %s to the working directory %s\n", mod, wd)
		dir = wd
	}
	if varsFile != nil {
		if err := writeFile(filepath.Join(dir, VariablesFile), varsFile); err != nil {
			return fail(other, "writing %s: %v", VariablesFile, err)
		}
		names := showNames(varNames)
		if len(varNames) == 0 {
			names = "(none)"
		}
		fmt.Fprintf(stderr, "captf runner: wrote %d input variables from %s to %s (SPEC T3): %s\n",
			len(varNames), VariablesEnv, VariablesFile, names)
	}
	if inputsFile != nil {
		if err := writeFile(filepath.Join(dir, InputsFile), inputsFile); err != nil {
			return fail(other, "writing %s: %v", InputsFile, err)
		}
		// Names only: bootstrap_data is sensitive (SPEC K5, X1).
		fmt.Fprintf(stderr, "captf runner: wrote %d contract inputs to %s (SPEC K6; a module declares those it uses): %s\n",
			len(inputNames), InputsFile, showNames(inputNames))
	}
	if cfg.stateNamespace != "" {
		if err := writeFile(filepath.Join(dir, BackendOverrideFile), []byte(backendOverride)); err != nil {
			return fail(other, "writing %s: %v", BackendOverrideFile, err)
		}
		fmt.Fprintf(stderr, "captf runner: state in the kubernetes backend (SPEC T2): Secret tfstate-default-%s in namespace %s\n", cfg.stateSuffix, cfg.stateNamespace)
	}
	if cfg.home != "" {
		if err := os.MkdirAll(cfg.home, 0o700); err != nil {
			return fail(other, "creating the home directory: %v", err)
		}
	}
	// SPEC O10 (A3-04): the image's provider mirror, through a CLI
	// configuration of the runner's (the Job's environment cannot name
	// one: envfilter drops TF_*).
	var cliConfig string
	if layout.providers != "" {
		cliDir := cfg.home
		if cliDir == "" && cfg.workdir != "" {
			cliDir = dir
		}
		if cliDir == "" {
			fmt.Fprintf(stderr, "captf runner: provider mirror %s not used: neither --home nor --workdir gives a place for its CLI configuration\n", layout.providers)
		} else {
			cliConfig = filepath.Join(cliDir, CLIConfigFile)
			if err := writeFile(cliConfig, providerMirrorConfig(layout.providers)); err != nil {
				return fail(other, "writing %s: %v", cliConfig, err)
			}
			fmt.Fprintf(stderr, "captf runner: providers from the image's mirror %s first (%s)\n", layout.providers, cliConfig)
		}
	}

	kept, dropped := envfilter.Filter(environ)
	logDropped(stderr, dropped)
	// The variables reach Terraform as the file only.
	kept = slices.DeleteFunc(kept, func(e string) bool { return envName(e) == VariablesEnv })
	if cfg.home != "" {
		kept = slices.DeleteFunc(kept, func(e string) bool { return envName(e) == "HOME" })
		kept = append(kept, "HOME="+cfg.home)
	}
	// Terraform and OpenTofu call home to check for updates unless told not
	// to (upstream A3-78): a Job has no use for it, and its egress may be
	// closed.
	if _, ok := lookupEnv(kept, "CHECKPOINT_DISABLE"); !ok {
		kept = append(kept, "CHECKPOINT_DISABLE=1")
	}
	if cliConfig != "" {
		kept = append(kept, "TF_CLI_CONFIG_FILE="+cliConfig)
	}
	// A shell's cd would update PWD, and os/exec only does it when it builds
	// the environment itself; without this Terraform would see the runner's
	// directory in PWD.
	env := append(kept, "PWD="+dir)

	if cfg.result != "" {
		// SPEC O1: the runtime's version, for the result document only.
		rep.result.Runtime = runtimeVersion(path, dir, env)
	}
	s := &supervisor{sigs: sigs, done: ctx.Done(), timeout: cfg.stopTimeout, stderr: stderr}
	var results []result
	for _, st := range cfg.steps() {
		s.poll()
		if s.stop != 0 || (len(results) > 0 && failedStep(results[len(results)-1])) {
			results = append(results, result{name: st.name})
			continue
		}
		fmt.Fprintf(stderr, "captf runner: running %s %s in %s\n", cfg.terraform, strings.Join(st.args, " "), dir)
		out, errOut := rep.stepWriters(st.name, stdout, stderr)
		r, err := s.run(path, st.name, st.args, dir, env, out, errOut)
		if err != nil {
			return fail(image, "%s could not start: %v", st.name, err)
		}
		markChanges(st, &r) // O7: a drift plan's exit code 2
		results = append(results, r)
	}
	line, code := summarize(results, s)
	fmt.Fprintln(stderr, "captf runner: "+line)
	rep.finish(results, s, code)
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
	fset.DurationVar(&cfg.stopTimeout, "stop-timeout", DefaultStopTimeout, "how long Terraform may take to stop after the first SIGTERM or SIGINT before it is killed")
	fset.StringVar(&cfg.imageRoot, "image-root", DefaultImageRoot, "where an image laid out as upstream's keeps module/ (the module directory unless --chdir), runtime (the binary, or a directory holding tofu or terraform, unless --terraform) and providers/ (a provider mirror) (SPEC O10)")
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
	case cfg.stopTimeout <= 0:
		return config{}, fmt.Errorf("%s: --stop-timeout must be positive, got %v", cfg.command, cfg.stopTimeout)
	case cfg.lockTimeout < 0 || cfg.lockTimeout%time.Second != 0:
		return config{}, fmt.Errorf("%s: --lock-timeout must be a whole number of seconds, 0s or more, got %v", cfg.command, cfg.lockTimeout)
	case cfg.stateNamespace != "" && cfg.stateSuffix == "":
		return config{}, fmt.Errorf("%s: --state-namespace needs --state-suffix: the kubernetes backend takes both, or leave both out for local state", cfg.command)
	case cfg.stateNamespace == "" && cfg.stateSuffix != "":
		return config{}, fmt.Errorf("%s: --state-suffix needs --state-namespace: the kubernetes backend takes both, or leave both out for local state", cfg.command)
	case cfg.stateKubeconfig != "" && cfg.stateNamespace == "":
		return config{}, fmt.Errorf("%s: --state-kubeconfig needs --state-namespace and --state-suffix", cfg.command)
	}
	if cfg.stateNamespace != "" {
		if err := checkState(cfg.stateNamespace, cfg.stateSuffix); err != nil {
			return config{}, fmt.Errorf("%s: %v", cfg.command, err)
		}
	}
	// Terraform runs in another directory than the runner: relative paths
	// are made absolute against the runner's.
	for _, p := range []*string{&cfg.home, &cfg.stateKubeconfig} {
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
