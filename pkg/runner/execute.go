package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/captf/captf/pkg/runner/envfilter"
	"github.com/captf/captf/pkg/runresult"
)

// runError is the runner's own failure, with its kind for the result
// document (SPEC O1, O2).
type runError struct {
	kind runresult.Kind
	msg  string
}

func (e *runError) Error() string { return e.msg }

// imageErr is a failure of the image's layout (ImageInvalid), otherErr
// any other failure of the runner.
func imageErr(format string, a ...any) error {
	return &runError{kind: runresult.KindImageLayout, msg: fmt.Sprintf(format, a...)}
}

func otherErr(format string, a ...any) error {
	return &runError{kind: runresult.KindRunner, msg: fmt.Sprintf(format, a...)}
}

// files are what the runner writes into the working copy, read and
// checked before anything is written.
type files struct {
	vars, inputs         []byte
	varNames, inputNames []string
}

// execute runs the steps of cfg and records them in rep: it finds the
// module and Terraform, reads the variables and inputs, prepares the
// working copy, then runs the steps under the supervisor.
func execute(ctx context.Context, cfg config, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal, rep *report) int {
	code, err := executeSteps(ctx, &cfg, environ, stdout, stderr, sigs, rep)
	var re *runError
	if errors.As(err, &re) {
		// The runner's own failure: on its last line, and in the result
		// document with its kind.
		fmt.Fprintln(stderr, "captf runner: "+re.msg)
		rep.fail(re.kind, re.msg)
		return ExitRunnerError
	}
	return code
}

func executeSteps(ctx context.Context, cfg *config, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal, rep *report) (int, error) {
	lay, path, err := locate(cfg, environ, stderr)
	if err != nil {
		return 0, err
	}
	f, err := readFiles(*cfg, environ, rep)
	if err != nil {
		return 0, err
	}
	dir, err := prepare(*cfg, f, stderr)
	if err != nil {
		return 0, err
	}
	cliConfig, err := mirrorConfig(*cfg, lay, dir, stderr)
	if err != nil {
		return 0, err
	}
	if cfg.restoreChunks != "" {
		// O5: the backup's state, decompressed, for `state push`.
		if err := writeRestoreState(cfg.restoreChunks, dir, stderr); err != nil {
			return 0, err
		}
	}
	env := runEnv(*cfg, environ, dir, cliConfig, stderr)
	if cfg.result != "" {
		// SPEC O1: the runtime's version, for the result document only.
		rep.result.Runtime = runtimeVersion(path, dir, env)
	}
	s := &supervisor{sigs: sigs, done: ctx.Done(), timeout: cfg.stopTimeout, stderr: stderr}
	var results []result
	changed, stopKind := "", runresult.Kind("")
	for _, st := range cfg.steps() {
		s.poll()
		if s.stop != 0 || changed != "" || (len(results) > 0 && failedStep(results[len(results)-1])) {
			results = append(results, result{name: st.name})
			continue
		}
		if st.gated {
			if changed, stopKind = gate(*cfg, rep); changed != "" {
				fmt.Fprintln(stderr, "captf runner: "+changed)
				results = append(results, result{name: st.name})
				continue
			}
			gateLine(*cfg, stderr)
		}
		fmt.Fprintf(stderr, "captf runner: running %s %s in %s\n", cfg.terraform, strings.Join(st.args, " "), dir)
		out, errOut := rep.stepWriters(st.name, stdout, stderr)
		var show *showBuffer
		if st.show {
			show = &showBuffer{}
			out = show // O8: planned values, never logged
		}
		r, err := s.run(path, st.name, st.args, dir, env, out, errOut)
		rep.flushLogs()
		if err != nil {
			return 0, imageErr("%s could not start: %v", st.name, err)
		}
		markChanges(st, &r) // O7: a drift plan's exit code 2
		results = append(results, r)
		if show != nil && !failedStep(r) {
			if err := rep.readPlan(show); err != nil {
				return 0, err
			}
		}
	}
	line, code := summarize(results, s)
	fmt.Fprintln(stderr, "captf runner: "+line)
	rep.finish(results, s, code)
	if changed != "" && code == 0 {
		// O8: nothing applied; not a failure of the module (A3-69).
		rep.result.Error = &runresult.Error{Kind: stopKind, Step: runresult.StepApply, Tail: changed}
		if stopKind == runresult.KindDestructive {
			return ExitDestructive, nil
		}
		return ExitPlanChanged, nil
	}
	return code, nil
}

// gateLine says why the saved plan is applied (O8).
func gateLine(cfg config, stderr io.Writer) {
	if cfg.guardDeletes {
		fmt.Fprintln(stderr, "captf runner: the saved plan deletes and replaces nothing, applying it (SPEC O8, --guard-deletes)")
		return
	}
	fmt.Fprintf(stderr, "captf runner: the saved plan is the approved one (%s), applying it (SPEC O8)\n", cfg.expectPlan)
}

// locate sets cfg's module directory and Terraform from the image's layout
// when the flags do not (SPEC O10: upstream's /captf/module and
// /captf/runtime run unchanged), checks that the directory holds a module
// (upstream's image-layout preflight, A3-06, SPEC O2), and finds the
// Terraform binary on the PATH the runner was given (not os.Getenv, so
// that Main is a function of its arguments).
func locate(cfg *config, environ []string, stderr io.Writer) (layout, string, error) {
	lay := detectLayout(cfg.imageRoot)
	if !cfg.chdirSet && lay.module != "" {
		cfg.chdir = lay.module
	}
	if !cfg.terraformSet && lay.runtime != "" {
		cfg.terraform = lay.runtime
	}
	if lay.found() {
		fmt.Fprintf(stderr, "captf runner: image layout under %s (SPEC O10): %s\n", cfg.imageRoot, lay)
	}
	var err error
	if cfg.chdir == "" {
		if cfg.chdir, err = os.Getwd(); err != nil {
			return lay, "", otherErr("cannot determine the working directory: %v; set the module directory with --chdir", err)
		}
	}
	if cfg.chdir, err = filepath.Abs(cfg.chdir); err != nil {
		return lay, "", otherErr("module directory: %v", err)
	}
	switch fi, err := os.Stat(cfg.chdir); {
	case errors.Is(err, fs.ErrNotExist):
		return lay, "", imageErr("module directory %q does not exist; set it with --chdir", cfg.chdir)
	case err != nil:
		return lay, "", imageErr("module directory: %v", err)
	case !fi.IsDir():
		return lay, "", imageErr("module directory %q is not a directory; set it with --chdir", cfg.chdir)
	}
	if err := checkModule(cfg.chdir); err != nil {
		return lay, "", imageErr("%v", err)
	}
	path, err := lookPath(cfg.terraform, getenv(environ, "PATH"))
	if err != nil && !cfg.terraformSet && lay.runtime == "" {
		// T8: an OpenTofu image without the upstream layout has tofu, not
		// terraform, on its PATH; the Job passes no --terraform.
		if tofu, terr := lookPath("tofu", getenv(environ, "PATH")); terr == nil {
			fmt.Fprintf(stderr, "captf runner: no terraform in PATH; running %s (SPEC T8)\n", tofu)
			cfg.terraform = "tofu"
			return lay, tofu, nil
		}
	}
	if err != nil {
		return lay, "", imageErr("%v", err)
	}
	return lay, path, nil
}

// readFiles reads and checks the variables (SPEC T3) and the contract
// inputs (K6) before anything is written; no input value (bootstrap data
// among them) reaches the result document (O1).
func readFiles(cfg config, environ []string, rep *report) (files, error) {
	var f files
	var err error
	if value, ok := lookupEnv(environ, VariablesEnv); ok {
		if cfg.workdir == "" {
			return f, otherErr("%s is set but --workdir is not: the variables file is written only into a working copy, never into the module directory", VariablesEnv)
		}
		if f.vars, f.varNames, err = parseVariables(value); err != nil {
			return f, otherErr("%v", err)
		}
	}
	if cfg.inputs != "" {
		if cfg.workdir == "" {
			return f, otherErr("--inputs is set but --workdir is not: the inputs file is written only into a working copy, never into the module directory")
		}
		if f.inputs, f.inputNames, rep.logs, err = readInputs(cfg.inputs); err != nil {
			return f, otherErr("%v", err)
		}
		_ = rep.redactor.AddJSON(f.inputs)
		// The error tail reaches status and events (O1): what stays out of
		// the log, the decoded bootstrap data among it (K5), stays out of
		// it too.
		rep.redactor.AddFrom(rep.logs)
	}
	return f, nil
}

// prepare makes the writable copy of the module directory, which stays as
// the image has it (SPEC T2), writes the variables, the inputs and the
// backend override into it, and the home directory; it returns the
// directory Terraform runs in.
func prepare(cfg config, f files, stderr io.Writer) (string, error) {
	dir := cfg.chdir
	if cfg.workdir != "" {
		mod, wd, err := prepareWorkdir(cfg.chdir, cfg.workdir)
		if err != nil {
			return "", otherErr("%v", err)
		}
		if err := copyModule(mod, wd); err != nil {
			return "", imageErr("copying the module directory %q to the working directory %q: %v", mod, wd, err)
		}
		fmt.Fprintf(stderr, "captf runner: copied the module directory %s to the working directory %s\n", mod, wd)
		dir = wd
	}
	if f.vars != nil {
		if err := writeFile(filepath.Join(dir, VariablesFile), f.vars); err != nil {
			return "", otherErr("writing %s: %v", VariablesFile, err)
		}
		names := showNames(f.varNames)
		if len(f.varNames) == 0 {
			names = "(none)"
		}
		fmt.Fprintf(stderr, "captf runner: wrote %d input variables from %s to %s (SPEC T3): %s\n",
			len(f.varNames), VariablesEnv, VariablesFile, names)
	}
	if f.inputs != nil {
		if err := writeFile(filepath.Join(dir, InputsFile), f.inputs); err != nil {
			return "", otherErr("writing %s: %v", InputsFile, err)
		}
		// Names only: bootstrap_data is sensitive (SPEC K5, X1).
		fmt.Fprintf(stderr, "captf runner: wrote %d contract inputs to %s (SPEC K6; a module declares those it uses): %s\n",
			len(f.inputNames), InputsFile, showNames(f.inputNames))
	}
	if cfg.stateNamespace != "" {
		if err := writeFile(filepath.Join(dir, BackendOverrideFile), []byte(backendOverride)); err != nil {
			return "", otherErr("writing %s: %v", BackendOverrideFile, err)
		}
		fmt.Fprintf(stderr, "captf runner: state in the kubernetes backend (SPEC T2): Secret tfstate-default-%s in namespace %s\n", cfg.stateSuffix, cfg.stateNamespace)
	}
	if cfg.home != "" {
		if err := os.MkdirAll(cfg.home, 0o700); err != nil {
			return "", otherErr("creating the home directory: %v", err)
		}
	}
	return dir, nil
}

// mirrorConfig writes the CLI configuration that makes Terraform take
// providers from the image's mirror first (SPEC O10, A3-04; the Job's
// environment cannot name one: envfilter drops TF_*) and returns its path,
// "" when the image has no mirror or there is nowhere to write it.
func mirrorConfig(cfg config, lay layout, dir string, stderr io.Writer) (string, error) {
	if lay.providers == "" {
		return "", nil
	}
	cliDir := cfg.home
	if cliDir == "" && cfg.workdir != "" {
		cliDir = dir
	}
	if cliDir == "" {
		fmt.Fprintf(stderr, "captf runner: provider mirror %s not used: neither --home nor --workdir gives a place for its CLI configuration\n", lay.providers)
		return "", nil
	}
	cliConfig := filepath.Join(cliDir, CLIConfigFile)
	providers := mirrorProviders(lay.providers)
	if err := writeFile(cliConfig, providerMirrorConfig(lay.providers, providers)); err != nil {
		return "", otherErr("writing %s: %v", cliConfig, err)
	}
	only := ""
	if len(providers) > 0 {
		only = "; from the mirror only: " + strings.Join(providers, ", ")
	}
	fmt.Fprintf(stderr, "captf runner: providers from the image's mirror %s first (%s%s)\n", lay.providers, cliConfig, only)
	return cliConfig, nil
}

// runEnv is Terraform's environment: the runner's without the forbidden
// TF_ and KUBE_ names (J6, their names logged) and without the variables
// (they reach Terraform as the file only), with HOME, CHECKPOINT_DISABLE
// (Terraform and OpenTofu call home to check for updates unless told not
// to, upstream A3-78: a Job has no use for it, and its egress may be
// closed), the mirror's CLI configuration, and PWD (os/exec sets it only
// when it builds the environment itself; a shell's cd would).
func runEnv(cfg config, environ []string, dir, cliConfig string, stderr io.Writer) []string {
	kept, dropped := envfilter.Filter(environ)
	logDropped(stderr, dropped)
	kept = slices.DeleteFunc(kept, func(e string) bool { return envName(e) == VariablesEnv })
	if cfg.home != "" {
		kept = slices.DeleteFunc(kept, func(e string) bool { return envName(e) == "HOME" })
		kept = append(kept, "HOME="+cfg.home)
	}
	if _, ok := lookupEnv(kept, "CHECKPOINT_DISABLE"); !ok {
		kept = append(kept, "CHECKPOINT_DISABLE=1")
	}
	if cliConfig != "" {
		kept = append(kept, "TF_CLI_CONFIG_FILE="+cliConfig)
	}
	return append(kept, "PWD="+dir)
}
