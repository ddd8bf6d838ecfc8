package runner

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// supervisor runs the Terraform steps one at a time and tracks stop
// requests across them: once a stop has been requested, no further step
// starts.
type supervisor struct {
	sigs    <-chan os.Signal
	done    <-chan struct{} // the caller's ctx.Done(); nil once handled
	timeout time.Duration   // --stop-timeout
	stderr  io.Writer

	stop      syscall.Signal // first stop request (SIGTERM for a cancelled ctx); 0 if none
	stopLabel string         // how to name the stop request in messages
	// fromCtx is true while the stop request came from ctx alone. A caller
	// using signal.NotifyContext sees the same SIGTERM on both channels, in
	// either order; the first OS signal after a ctx stop is taken as that
	// twin rather than as a second signal.
	fromCtx bool
}

// result is how one step ended.
type result struct {
	name   string
	ran    bool
	code   int            // exit code; 128+n when terminated by signal n
	signal syscall.Signal // the terminating signal, 0 if it exited
	killed string         // why the runner killed it, "" if it did not
	stop   string         // stop request that arrived while it ran, "" if none
	// duration is how long it ran (SPEC O1).
	duration time.Duration
	// changes: a -detailed-exitcode plan exited 2, changes present (SPEC
	// O7: drift found); the step succeeded.
	changes bool
}

// action is what a stop request asks the supervisor to do to the child.
type action int

const (
	ignore action = iota
	forward
	kill
)

// request records a stop request and says what it means for a running step.
func (s *supervisor) request(sig syscall.Signal, fromCtx bool) action {
	switch {
	case s.stop == 0:
		s.stop, s.fromCtx = sig, fromCtx
		s.stopLabel = signalName(sig)
		if fromCtx {
			s.stopLabel = "stop request (context cancelled)"
		}
		return forward
	case fromCtx:
		// Most likely the echo of the signal already handled.
		fmt.Fprintln(s.stderr, "captf runner: context cancelled, taken as the same stop request")
		return ignore
	case s.fromCtx:
		// The twin of the ctx stop, and its real cause.
		s.fromCtx = false
		s.stop, s.stopLabel = sig, signalName(sig)
		fmt.Fprintf(s.stderr, "captf runner: %s received, taken as the same stop request\n", s.stopLabel)
		return ignore
	default:
		return kill
	}
}

// poll takes in stop requests that arrived while no step was running.
func (s *supervisor) poll() {
	for {
		select {
		case sig := <-s.sigs:
			s.request(toSyscall(sig), false)
			continue
		case <-s.done:
			s.done = nil
			s.request(syscall.SIGTERM, true)
			continue
		default:
		}
		return
	}
}

// run runs one Terraform step to completion. The error is only for a step
// that could not be started; how a started step ended is in the result.
func (s *supervisor) run(path, name string, args []string, dir string, env []string, stdout, stderr io.Writer) (result, error) {
	r := result{name: name, ran: true}
	cmd := exec.Command(path, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, stdout, stderr
	// Terraform gets its own process group. On a terminal, Ctrl-C then
	// reaches only the runner, which forwards it once; otherwise Terraform
	// would see it twice and take the second as "abort now", skipping the
	// state unlock. The group also lets a kill take the providers along, so
	// none outlives Terraform holding the output open.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return r, err
	}
	started := time.Now()
	waited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // how it ended is read from ProcessState
		close(waited)
	}()

	var deadline <-chan time.Time
	var timer *time.Timer
	handle := func(sig syscall.Signal, fromCtx bool) {
		act := s.request(sig, fromCtx)
		if r.stop != "" || act == forward {
			r.stop = s.stopLabel // a ctx stop's twin names the real cause
		}
		switch act {
		case forward:
			fmt.Fprintf(s.stderr, "captf runner: %s received, sending %s to terraform %s; it is killed if still running in %v or on a second signal\n",
				s.stopLabel, signalName(sig), r.name, s.timeout)
			// Only Terraform, not its group: Terraform stops its providers
			// itself, and a provider stopped from outside could leave the
			// lock held.
			_ = cmd.Process.Signal(sig)
			timer = time.NewTimer(s.timeout)
			deadline = timer.C
		case kill:
			s.kill(cmd, &r, "the second signal "+signalName(sig))
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	for {
		select {
		case <-waited:
			r.duration = time.Since(started)
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			r.code = cmd.ProcessState.ExitCode()
			if ws.Signaled() {
				r.signal = ws.Signal()
				r.code = 128 + int(r.signal)
			}
			if r.signal != syscall.SIGKILL {
				r.killed = "" // it ended on its own before the kill landed
			}
			return r, nil
		case sig := <-s.sigs:
			handle(toSyscall(sig), false)
		case <-s.done:
			s.done = nil
			handle(syscall.SIGTERM, true)
		case <-deadline:
			deadline = nil
			s.kill(cmd, &r, fmt.Sprintf("the %v stop timeout", s.timeout))
		}
	}
}

// kill ends Terraform and everything in its process group.
func (s *supervisor) kill(cmd *exec.Cmd, r *result, why string) {
	if r.killed != "" {
		return
	}
	r.killed = why
	fmt.Fprintf(s.stderr, "captf runner: killing terraform %s after %s\n", r.name, why)
	// The negative pid addresses the group created by Setpgid.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// summarize turns the step results into the runner's last line and exit
// code: Terraform's code for a failed step, 0 for success, and 128+signal
// of the first stop request for a run that a stop request ended without
// success: a step failed or was killed after it, or a step did not run
// even though the previous one succeeded (an apply that never ran is never
// a success). The Job's pod failure policy knows these codes (SPEC O2): a
// pod deleted while it ran is an interruption, however Terraform exited.
func summarize(results []result, s *supervisor) (string, int) {
	parts := make([]string, 0, len(results))
	code, skipped := 0, false
	for _, r := range results {
		var p string
		switch {
		case !r.ran:
			p, skipped = r.name+" not run", true
		case r.killed != "":
			p = fmt.Sprintf("%s killed after %s (exit code %d)", r.name, r.killed, r.code)
		case r.signal != 0:
			p = fmt.Sprintf("%s terminated by %s (exit code %d)", r.name, signalName(r.signal), r.code)
		case r.changes:
			p = r.name + " found changes (exit code 2)"
		case r.code == 0:
			p = r.name + " succeeded"
		default:
			p = fmt.Sprintf("%s failed with exit code %d", r.name, r.code)
		}
		if r.ran && r.killed == "" && r.stop != "" {
			p += " after " + r.stop
		}
		if r.ran && !r.changes {
			code = r.code
		}
		parts = append(parts, p)
	}
	line := strings.Join(parts, ", ")
	if s.stop != 0 && (code != 0 || skipped) {
		code = 128 + int(s.stop)
		line += fmt.Sprintf("; stopped by %s (exit code %d)", s.stopLabel, code)
	}
	return line, code
}

// toSyscall maps the signals Main subscribes to; anything else (only
// possible through the test seam) is treated as SIGTERM.
func toSyscall(sig os.Signal) syscall.Signal {
	if s, ok := sig.(syscall.Signal); ok {
		return s
	}
	return syscall.SIGTERM
}

// signalName gives the conventional name, which syscall.Signal.String does
// not ("terminated").
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGKILL:
		return "SIGKILL"
	}
	return fmt.Sprintf("signal %d", int(sig))
}
