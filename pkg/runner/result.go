package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/captf/captf/pkg/runresult"
)

// SPEC O1: the runner's result document, written to --result (the Job's
// termination message) when the runner ends, however it ends but by a
// SIGKILL.
const (
	// DefaultCredentialsDir is where the Job mounts the mirror (SPEC J2):
	// the values of its files are redacted from the error tail.
	DefaultCredentialsDir = "/var/run/captf/credentials"
	// maxCredentialFiles and maxCredentialBytes bound what is read of it.
	maxCredentialFiles = 512
	maxCredentialBytes = 1 << 20
	// tailBytes is how much of a step's error output is kept to find the
	// error in: the end of it.
	tailBytes = 16 << 10
	// maxScanLine bounds a stdout line the plan scanner looks at.
	maxScanLine = 4 << 10
	// versionTimeout bounds `terraform version`.
	versionTimeout = 30 * time.Second
)

// keptEnv are environment variables whose values are not redacted: they
// carry paths, the namespace and the API server's address, never a
// credential. Every other value of the runner's environment is (the
// mirror's keys, spec.jobs.env, service links).
var keptEnv = map[string]bool{
	"PATH": true, "HOME": true, "PWD": true, "OLDPWD": true, "HOSTNAME": true, "SHLVL": true, "TERM": true,
	"LANG": true, "LANGUAGE": true, "TZ": true, "USER": true, "LOGNAME": true, "SHELL": true, "_": true,
	"TF_IN_AUTOMATION": true, "TF_INPUT": true, "KUBE_NAMESPACE": true, "CHECKPOINT_DISABLE": true,
}

func keptEnvName(name string) bool {
	return keptEnv[name] || strings.HasPrefix(name, "KUBERNETES_") || strings.HasPrefix(name, "LC_")
}

// report collects what the result document says.
type report struct {
	result   runresult.Result
	redactor *runresult.Redactor
	// tails holds each Terraform step's error output, the end of it.
	tails map[string]*ring
	plan  *planScanner
	// logs holds the values Terraform's output may not carry to the pod's
	// log (O9, K5; nil: none); flush ends the current step's lines.
	logs    *runresult.Redactor
	flushes []*lineRedactor
}

func newReport(cfg config, environ []string) *report {
	r := &report{
		result:   runresult.Result{Version: runresult.Version, Operation: cfg.command, Image: cfg.image},
		redactor: runresult.NewRedactor(),
		tails:    map[string]*ring{},
		plan:     &planScanner{},
	}
	for _, e := range environ {
		name, value, _ := strings.Cut(e, "=")
		if keptEnvName(name) {
			continue
		}
		r.redactor.Add(value)
		// A JSON value (a key file in a variable, the variables) has its
		// leaves redacted too: an error quotes a field, not the document.
		_ = r.redactor.AddJSON([]byte(value))
	}
	if cfg.credentials != "" {
		addCredentialFiles(r.redactor, cfg.credentials)
	}
	return r
}

// addCredentialFiles adds the value of each file of the mirror's volume
// (one per key, SPEC J2). A Secret volume holds the keys as symlinks into
// a hidden directory: hidden entries are skipped, the keys followed.
func addCredentialFiles(r *runresult.Redactor, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || n == maxCredentialFiles {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		fi, err := f.Stat()
		if err == nil && fi.Mode().IsRegular() {
			if b, err := io.ReadAll(io.LimitReader(f, maxCredentialBytes)); err == nil {
				r.Add(string(b))
				_ = r.AddJSON(b) // a service account key file
				n++
			}
		}
		f.Close()
	}
}

// fail records a failure of the runner itself (no Terraform step failed).
func (r *report) fail(kind runresult.Kind, msg string) {
	r.result.Error = &runresult.Error{Kind: kind, Step: runresult.StepSetup, Tail: msg}
}

// stepWriters returns the writers of a Terraform step: its stderr is also
// kept in a ring for the error tail; the command step's stdout goes
// through the plan scanner.
func (r *report) stepWriters(step string, stdout, stderr io.Writer) (io.Writer, io.Writer) {
	ring := &ring{max: tailBytes}
	r.tails[step] = ring
	if r.logs != nil {
		out, errOut := &lineRedactor{w: stdout, r: r.logs}, &lineRedactor{w: stderr, r: r.logs}
		r.flushes = append(r.flushes[:0], out, errOut)
		stdout, stderr = out, errOut
	}
	if step == runresult.StepApply || step == runresult.StepDestroy || step == runresult.StepPlan {
		stdout = io.MultiWriter(stdout, r.plan)
	}
	return stdout, io.MultiWriter(stderr, ring)
}

// flushLogs writes the end of a step's last lines to the pod's log.
func (r *report) flushLogs() {
	for _, l := range r.flushes {
		_ = l.Flush()
	}
	r.flushes = r.flushes[:0]
}

// finish records the steps and, when the run did not succeed, why.
func (r *report) finish(results []result, s *supervisor, code int) {
	failed := ""
	for _, res := range results {
		if res.ran {
			r.result.Steps = append(r.result.Steps, runresult.Step{Name: res.name, ExitCode: res.code, DurationMilliseconds: res.duration.Milliseconds()})
		}
		if failed == "" && failedStep(res) {
			failed = res.name
		}
	}
	if r.result.Operation == runresult.OperationDrift {
		if code == 0 {
			// O7: only a plan that ran to its end says what drifted.
			r.result.Drift = r.plan.drift(r.redactor.Redact)
		}
	} else {
		r.result.Changes = r.plan.changes()
	}
	if code == 0 {
		return
	}
	switch {
	case s.stop != 0:
		r.result.Error = &runresult.Error{Kind: runresult.KindInterrupted, Step: failed,
			Tail: fmt.Sprintf("stopped by %s while %s ran; the run is retried (SPEC O2)", s.stopLabel, failed)}
	default:
		r.result.Error = &runresult.Error{Kind: runresult.KindStep, Step: failed, Tail: r.errorTail(failed)}
	}
}

// errorTail is the end of a failed step's error output, redacted:
// Terraform's own error blocks when it printed any (from the first
// "Error:" line, without their frame), else its last lines.
func (r *report) errorTail(step string) string {
	ring := r.tails[step]
	if ring == nil {
		return ""
	}
	text := r.redactor.Redact(ring.text())
	var lines []string
	start := -1
	for l := range strings.Lines(text) {
		l = strings.TrimRight(l, "\r\n")
		switch t := strings.TrimSpace(l); {
		case t == "╷" || t == "╵":
			continue
		case strings.HasPrefix(l, "│"):
			l = strings.TrimPrefix(strings.TrimPrefix(l, "│"), " ")
		}
		if start < 0 && strings.HasPrefix(l, "Error:") {
			start = len(lines)
		}
		if strings.TrimSpace(l) == "" && (len(lines) == 0 || lines[len(lines)-1] == "") {
			continue // one blank line at most
		}
		lines = append(lines, strings.TrimRight(l, " \t"))
	}
	if start > 0 {
		lines = lines[start:]
	}
	// Cleaning may join what the redactor saw apart: redact again.
	return r.redactor.Redact(runresult.Clean(strings.TrimSpace(strings.Join(lines, "\n"))))
}

// write writes the document to path. A failure is logged, and changes
// nothing else: the manager then reports the run from the Job alone.
func (r *report) write(path string, stderr io.Writer) {
	if r.result.Error != nil {
		r.result.Error.Tail = r.redactor.Redact(r.result.Error.Tail)
	}
	b, err := r.result.Marshal()
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(stderr, "captf runner: could not write the result document to %s: %v\n", path, err)
	}
}

// runtimeVersion returns the first line of `<terraform> version`, "" when
// it cannot be run.
func runtimeVersion(path, dir string, env []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout = &limitedBuffer{b: &out, max: 4 << 10}
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return ""
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	return runresult.Shorten(strings.TrimSpace(first), runresult.MaxRuntime)
}

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// ring keeps the last max bytes written to it.
type ring struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
		r.truncated = true
	}
	return len(p), nil
}

// text is what was kept; when the start was cut, from the first whole
// line (a value cut in two must not show its second half).
func (r *ring) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(r.buf)
	if r.truncated {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		} else {
			s = ""
		}
	}
	return s
}

// planScanner reads Terraform's plan from its stdout: the summary line
// ("Plan: 1 to add, 0 to change, 0 to destroy.", "No changes.") and the
// resources it replaces ("# x must be replaced").
type planScanner struct {
	mu      sync.Mutex
	line    []byte
	long    bool
	seen    bool
	counts  map[string]int
	replace int
	// addresses are the resources the plan changes (SPEC O7), in order.
	addresses []string
}

var (
	planLine    = regexp.MustCompile(`^Plan: .*\d+ to (add|change|destroy)`)
	planCount   = regexp.MustCompile(`(\d+) to (add|change|destroy)`)
	replaceLine = regexp.MustCompile(`^\s*# \S.* (must be replaced|will be replaced, as requested)$`)
)

func (p *planScanner) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range b {
		if c != '\n' {
			if len(p.line) < maxScanLine {
				p.line = append(p.line, c)
			} else {
				p.long = true
			}
			continue
		}
		if !p.long {
			p.scan(string(p.line))
		}
		p.line, p.long = p.line[:0], false
	}
	return len(b), nil
}

func (p *planScanner) scan(l string) {
	l = strings.TrimRight(l, "\r")
	switch {
	case strings.HasPrefix(l, "No changes."):
		p.seen, p.counts = true, map[string]int{}
	case planLine.MatchString(l):
		p.seen, p.counts = true, map[string]int{}
		for _, m := range planCount.FindAllStringSubmatch(l, -1) {
			if n, err := strconv.Atoi(m[1]); err == nil && n <= runresult.MaxCount {
				p.counts[m[2]] = n
			}
		}
	case replaceLine.MatchString(l):
		p.replace++
	}
	p.address(l)
}

// changes returns the planned changes, nil when no plan summary was seen.
// Terraform counts a replacement as an add and a destroy.
func (p *planScanner) changes() *runresult.Changes {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.seen {
		return nil
	}
	replace := min(p.replace, p.counts["add"], p.counts["destroy"])
	return &runresult.Changes{
		Create:  p.counts["add"] - replace,
		Update:  p.counts["change"],
		Replace: replace,
		Delete:  p.counts["destroy"] - replace,
	}
}

// moduleFiles are the names of Terraform and OpenTofu configuration files.
var moduleFiles = []string{"*.tf", "*.tf.json", "*.tofu", "*.tofu.json"}

// checkModule is the image-layout preflight (upstream A3-06): the module
// directory must hold Terraform configuration, else Terraform would
// "initialize an empty directory" and apply nothing, successfully.
func checkModule(dir string) error {
	for _, pattern := range moduleFiles {
		if m, _ := filepath.Glob(filepath.Join(dir, pattern)); len(m) > 0 {
			return nil
		}
	}
	return fmt.Errorf("module directory %q holds no Terraform configuration (%s): the image is not a module image; set the module directory with --chdir",
		dir, strings.Join(moduleFiles, ", "))
}
