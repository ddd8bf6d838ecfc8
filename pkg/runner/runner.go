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

	// waitDelay bounds how long the runner waits for the output pipes after
	// Terraform has exited, in case a provider it started still holds them.
	waitDelay = 10 * time.Second
)

// subcommands are the valid first arguments, in the order usage lists them.
var subcommands = []string{"apply", "destroy"}

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
	stopTimeout time.Duration
}

// run is Main with the signal source injected, so tests can deliver signals
// without signalling the test process.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	stdout, stderr = syncWriters(stdout, stderr)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "captf runner: "+format+"\n", a...)
		return ExitRunnerError
	}

	cfg, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail("%v", err)
	}

	if cfg.chdir == "" {
		if cfg.chdir, err = os.Getwd(); err != nil {
			return fail("cannot determine the working directory: %v; set the module directory with --chdir", err)
		}
	}
	if cfg.chdir, err = filepath.Abs(cfg.chdir); err != nil {
		return fail("module directory: %v", err)
	}
	switch fi, err := os.Stat(cfg.chdir); {
	case errors.Is(err, fs.ErrNotExist):
		return fail("module directory %q does not exist; set it with --chdir", cfg.chdir)
	case err != nil:
		return fail("module directory: %v", err)
	case !fi.IsDir():
		return fail("module directory %q is not a directory; set it with --chdir", cfg.chdir)
	}

	// PATH comes from the environment the runner was given, not from
	// os.Getenv, so that Main is a function of its arguments.
	path, err := lookPath(cfg.terraform, getenv(environ, "PATH"))
	if err != nil {
		return fail("%v", err)
	}

	kept, dropped := envfilter.Filter(environ)
	logDropped(stderr, dropped)
	// A shell's cd would update PWD, and os/exec only does it when it builds
	// the environment itself; without this Terraform would see the runner's
	// directory in PWD.
	env := append(kept, "PWD="+cfg.chdir)

	s := &supervisor{sigs: sigs, done: ctx.Done(), timeout: cfg.stopTimeout, stderr: stderr}
	steps := [][]string{
		{"init", "-input=false"},
		{cfg.command, "-auto-approve", "-input=false"},
	}
	var results []result
	for _, args := range steps {
		s.poll()
		if s.stop != 0 || (len(results) > 0 && results[len(results)-1].code != 0) {
			results = append(results, result{name: args[0]})
			continue
		}
		fmt.Fprintf(stderr, "captf runner: running %s %s in %s\n", cfg.terraform, strings.Join(args, " "), cfg.chdir)
		r, err := s.run(path, args, cfg.chdir, env, stdout, stderr)
		if err != nil {
			return fail("%s could not start: %v", args[0], err)
		}
		results = append(results, r)
	}
	line, code := summarize(results, s)
	fmt.Fprintln(stderr, "captf runner: "+line)
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
	fset.StringVar(&cfg.chdir, "chdir", "", "module directory to run Terraform in (default the working directory)")
	fset.DurationVar(&cfg.stopTimeout, "stop-timeout", DefaultStopTimeout, "how long Terraform may take to stop after the first SIGTERM or SIGINT before it is killed")
	err := fset.Parse(args[1:])
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

// logDropped writes the J6 line: names only, on one line. A name holding
// anything but the usual characters is quoted, so that a stray newline or
// space cannot split or blur the line.
func logDropped(w io.Writer, names []string) {
	if len(names) == 0 {
		fmt.Fprintln(w, "captf runner: no TF_, KUBE_, TERRAFORM_CONFIG or GODEBUG environment variables to remove")
		return
	}
	shown := make([]string, len(names))
	for i, n := range names {
		shown[i] = n
		if n == "" || strings.ContainsFunc(n, func(r rune) bool {
			return !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z')
		}) {
			shown[i] = fmt.Sprintf("%q", n)
		}
	}
	fmt.Fprintf(w, "captf runner: removed environment variables (SPEC J6, B7): %s\n", strings.Join(shown, " "))
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
