package framework

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/captf/captf/test/controlplane"
)

// Manager is a `captf manager` subprocess.
type Manager struct {
	// HealthURL and MetricsURL are the manager's probe and metrics endpoints.
	HealthURL  string
	MetricsURL string
	// WebhookPort is the webhook server's port (0 when disabled).
	WebhookPort int
	// LogPath holds the manager's output.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// ManagerOptions configure StartManager.
type ManagerOptions struct {
	// User the manager authenticates as; default the admin.
	User string
	// Args are extra flags.
	Args []string
	// Webhook enables the webhook server on WebhookPort (a free port when 0)
	// with the certificate in WebhookCertDir.
	Webhook        bool
	WebhookPort    int
	WebhookCertDir string
	// NoWait returns without waiting for /readyz.
	NoWait bool
	// Kubeconfig, when set, is used instead of the user's (e.g. one that
	// points at a proxy in front of the API server).
	Kubeconfig string
	// SecureMetrics serves /metrics as in production: HTTPS, bearer token,
	// SubjectAccessReview (SPEC B4), with MetricsURL https://. Without it
	// the manager runs with --metrics-secure=false, so tests and tools that
	// read metrics to check other rules scrape plain HTTP.
	SecureMetrics bool
	// Env is added to the environment the manager inherits (e.g.
	// GOMEMLIMIT for the manager alone, not the control plane).
	Env []string
}

// StartManager runs bin/captf manager against the control plane and waits
// until it is ready. It is stopped (SIGTERM) when the test ends; on failure
// its log is printed.
func (e *Env) StartManager(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	return e.startManagerT(t, o, t.TempDir(), 20000, nil)
}

// managerReadyBound is how long a started manager may take to report
// /readyz before the start counts as failed.
const managerReadyBound = 3 * time.Minute

// startManagerT starts a manager with its log in dir for t: started, if
// not nil, is called with the process (even one that then failed to get
// ready), which is stopped when the test ends; the last logTail bytes of
// its log are printed when the test failed.
func (e *Env) startManagerT(t testing.TB, o ManagerOptions, dir string, logTail int, started func(*Manager)) *Manager {
	t.Helper()
	m, err := e.startManager(o, dir)
	if m != nil {
		if started != nil {
			started(m)
		}
		t.Cleanup(func() {
			m.stop()
			if t.Failed() {
				t.Logf("manager log (%s):\n%s", m.LogPath, tail([]byte(m.Log()), logTail))
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// SharedManager starts one manager for the whole test package on first use
// and stops it after the package's tests.
func (e *Env) SharedManager(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	e.sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "captf-manager-")
		if err != nil {
			e.sharedErr = err
			return
		}
		e.shared, e.sharedErr = e.startManager(o, dir)
		e.cleanups = append(e.cleanups, func() {
			if e.shared != nil {
				e.shared.stop()
			}
		})
	})
	if e.sharedErr != nil {
		t.Fatal(e.sharedErr)
	}
	if e.shared.Exited() {
		t.Fatalf("the shared manager has exited:\n%s", tail([]byte(e.shared.Log()), 5000))
	}
	return e.shared
}

// StartManagerProcess starts `captf manager` with its log in dir and
// waits for /readyz unless o.NoWait; the caller stops it. For programs such
// as the benchmark; tests use StartManager or SharedManager.
func (e *Env) StartManagerProcess(o ManagerOptions, dir string) (*Manager, error) {
	return e.startManager(o, dir)
}

func (e *Env) startManager(o ManagerOptions, dir string) (*Manager, error) {
	if e.CaptfBinary == "" {
		return nil, fmt.Errorf("framework.Options.BuildCaptf is needed to start a manager")
	}
	user := o.User
	if user == "" {
		user = controlplane.Admin
	}
	healthPort, _ := controlplane.FreePort()
	metricsPort, _ := controlplane.FreePort()
	metricsScheme := "http://"
	if o.SecureMetrics {
		metricsScheme = "https://"
	}
	m := &Manager{
		HealthURL:  "http://127.0.0.1:" + strconv.Itoa(healthPort),
		MetricsURL: metricsScheme + "127.0.0.1:" + strconv.Itoa(metricsPort),
		LogPath:    filepath.Join(dir, "manager.log"),
		done:       make(chan struct{}),
	}
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = e.CP.KubeconfigPath(user)
	}
	args := []string{"manager",
		"--kubeconfig", kubeconfig,
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(healthPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--leader-elect=false",
		"--runner-image=ghcr.io/captf/captf:test",
		"--v=2",
	}
	if !o.SecureMetrics {
		args = append(args, "--metrics-secure=false")
	}
	if o.Webhook {
		m.WebhookPort = o.WebhookPort
		if m.WebhookPort == 0 {
			m.WebhookPort, _ = controlplane.FreePort()
		}
		args = append(args, "--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(m.WebhookPort), "--webhook-cert-dir="+o.WebhookCertDir)
	} else {
		args = append(args, "--webhook-port=0")
	}
	args = append(args, o.Args...)
	logFile, err := os.Create(m.LogPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(e.CaptfBinary, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	if len(o.Env) > 0 {
		m.cmd.Env = append(os.Environ(), o.Env...)
	}
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() {
		m.err = m.cmd.Wait()
		logFile.Close()
		close(m.done)
	}()
	if o.NoWait {
		return m, nil
	}
	// A bound for a hung start, not a measure of start-up: on a loaded
	// 2-core machine (a cold CI run, suites side by side) syncing the
	// caches of a large test has taken over a minute.
	deadline := time.Now().Add(managerReadyBound)
	for {
		if m.Exited() {
			return m, fmt.Errorf("manager exited during start-up: %v\n%s", m.err, tail([]byte(m.Log()), 5000))
		}
		code, body := m.Get("/readyz")
		if code == http.StatusOK {
			return m, nil
		}
		if time.Now().After(deadline) {
			return m, fmt.Errorf("manager not ready after %v: /readyz %d %s\n%s", managerReadyBound, code, body, tail([]byte(m.Log()), 5000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Get fetches a path of the health endpoint (or a full URL) and returns the
// status code and body; code 0 when the request failed.
func (m *Manager) Get(pathOrURL string) (int, string) {
	url := pathOrURL
	if len(url) > 0 && url[0] == '/' {
		url = m.HealthURL + url
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, string(b)
}

// PID is the manager process's ID.
func (m *Manager) PID() int { return m.cmd.Process.Pid }

// Exited reports whether the process has exited.
func (m *Manager) Exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit; it fails the test if the
// manager needs more than 60s (it is then killed).
func (m *Manager) Stop(t testing.TB) {
	if !m.stop() {
		t.Errorf("manager did not stop within 60s of SIGTERM; killed it")
	}
}

// Terminate sends SIGTERM and waits up to 60s, then kills; false if it had to.
func (m *Manager) Terminate() bool { return m.stop() }

// stop sends SIGTERM and waits up to 60s, then kills; false if it had to.
func (m *Manager) stop() bool {
	if m.Exited() {
		return true
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		return true
	case <-time.After(60 * time.Second):
		m.Kill()
		return false
	}
}

// Kill sends SIGKILL and waits for the exit.
func (m *Manager) Kill() {
	if m.Exited() {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.done
}

// Wait waits for the process to exit and returns its error.
func (m *Manager) Wait() error {
	<-m.done
	return m.err
}

// Log returns the manager's output so far.
func (m *Manager) Log() string {
	b, _ := os.ReadFile(m.LogPath)
	return string(b)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
