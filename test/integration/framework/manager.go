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
	// Webhook enables the webhook server on a free port with the certificate in
	// WebhookCertDir.
	Webhook        bool
	WebhookCertDir string
	// NoWait returns without waiting for /readyz.
	NoWait bool
}

// StartManager runs bin/captf manager against the control plane and waits
// until it is ready. It is stopped (SIGTERM) when the test ends.
func (e *Env) StartManager(t testing.TB, o ManagerOptions) *Manager {
	t.Helper()
	if e.CaptfBinary == "" {
		t.Fatal("framework.Options.BuildCaptf is needed for StartManager")
	}
	user := o.User
	if user == "" {
		user = controlplane.Admin
	}
	healthPort, _ := controlplane.FreePort()
	metricsPort, _ := controlplane.FreePort()
	m := &Manager{
		HealthURL:  "http://127.0.0.1:" + strconv.Itoa(healthPort),
		MetricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort),
		LogPath:    filepath.Join(t.TempDir(), "manager.log"),
		done:       make(chan struct{}),
	}
	args := []string{"manager",
		"--kubeconfig", e.CP.KubeconfigPath(user),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(healthPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--leader-elect=false",
		"--v=2",
	}
	if o.Webhook {
		m.WebhookPort, _ = controlplane.FreePort()
		args = append(args, "--webhook-host=127.0.0.1", "--webhook-port="+strconv.Itoa(m.WebhookPort), "--webhook-cert-dir="+o.WebhookCertDir)
	} else {
		args = append(args, "--webhook-port=0")
	}
	args = append(args, o.Args...)
	logFile, err := os.Create(m.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	m.cmd = exec.Command(e.CaptfBinary, args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		m.err = m.cmd.Wait()
		logFile.Close()
		close(m.done)
	}()
	t.Cleanup(func() {
		m.Stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(m.LogPath)
			t.Logf("manager log (%s):\n%s", m.LogPath, tail(b, 20000))
		}
	})
	if !o.NoWait {
		Eventually(t, 60*time.Second, func() (bool, string) {
			if m.Exited() {
				return true, ""
			}
			code, body := m.Get("/readyz")
			return code == http.StatusOK, fmt.Sprintf("/readyz: %d %s", code, body)
		})
		if m.Exited() {
			b, _ := os.ReadFile(m.LogPath)
			t.Fatalf("manager exited during start-up: %v\n%s", m.err, tail(b, 5000))
		}
	}
	return m
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

// Exited reports whether the process has exited.
func (m *Manager) Exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 60s).
func (m *Manager) Stop(t testing.TB) {
	if m.Exited() {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		t.Errorf("manager did not stop within 60s of SIGTERM; killing it")
		m.Kill()
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
