package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/test/controlplane"
)

// env is the benchmark's cluster: a real etcd + kube-apiserver, the CRDs,
// fast admin clients, a captf binary built from this tree, and at most one
// running manager.
type env struct {
	cfg  *Config
	dir  string // work directory: control plane, binary, manager logs
	cp   *controlplane.ControlPlane
	rest *rest.Config // fast admin client configuration
	kube kubernetes.Interface
	// captf is the fast admin client for the captf kinds.
	captf versioned.Interface
	// bin is the captf binary.
	bin string
	// mgr is the running manager, if any.
	mgr *manager
	// managerRuns counts started managers (log file names).
	managerRuns int
	log         io.Writer
}

// startEnv starts the control plane, installs the CRDs and builds captf.
func startEnv(ctx context.Context, cfg *Config, log io.Writer) (_ *env, err error) {
	e := &env{cfg: cfg, log: log}
	if e.dir, err = os.MkdirTemp(cfg.WorkDir, "captf-bench-"); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.stop(true)
		}
	}()
	start := time.Now()
	build := make(chan error, 1)
	e.bin = filepath.Join(e.dir, "captf")
	go func() {
		// Built while the control plane starts: both take a while on 2 cores.
		cmd := exec.CommandContext(ctx, "go", "build", "-o", e.bin, "./cmd/captf")
		cmd.Dir = cfg.Root
		if out, err := cmd.CombinedOutput(); err != nil {
			build <- fmt.Errorf("building captf: %v\n%s", err, out)
			return
		}
		build <- nil
	}()
	e.cp, err = controlplane.Start(ctx, controlplane.Options{
		BinDir: filepath.Join(cfg.Root, "bin"),
		Dir:    filepath.Join(e.dir, "controlplane"),
	})
	if err != nil {
		<-build
		return nil, err
	}
	e.rest = e.cp.RestConfig(controlplane.Admin)
	// The scenario builder and the watches must never be the bottleneck.
	e.rest.QPS, e.rest.Burst = 5000, 10000
	e.rest.UserAgent = "captf-bench"
	if err := controlplane.InstallCRDs(ctx, e.rest, filepath.Join(cfg.Root, "manifests", "crds")); err != nil {
		<-build
		return nil, err
	}
	if e.kube, err = kubernetes.NewForConfig(e.rest); err != nil {
		<-build
		return nil, err
	}
	if e.captf, err = versioned.NewForConfig(e.rest); err != nil {
		<-build
		return nil, err
	}
	if err := <-build; err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "control plane ready at %s, captf built, in %s (work directory %s)\n", e.cp.URL, time.Since(start).Round(time.Millisecond), e.dir)
	return e, nil
}

// stop stops the manager and the control plane; the work directory is
// removed unless keep.
func (e *env) stop(keep bool) {
	if e.mgr != nil {
		e.mgr.stop()
		e.mgr = nil
	}
	if e.cp != nil {
		e.cp.Stop()
	}
	if !keep && e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
}

// baselineClient returns a plain clientset limited like the manager's
// clients (one token bucket of QPS/burst).
func (e *env) baselineClient() (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(e.rest)
	cfg.QPS, cfg.Burst = float32(e.cfg.QPS), e.cfg.Burst
	cfg.UserAgent = "captf-bench-baseline"
	return kubernetes.NewForConfig(cfg)
}

// manager is a `captf manager` subprocess.
type manager struct {
	name       string
	args       []string
	metricsURL string
	healthURL  string
	logPath    string
	started    time.Time
	cmd        *exec.Cmd
	done       chan struct{}
	err        error
}

// startManager stops the running manager, if any, and starts one named
// name with the common flags plus args; it waits until /readyz is ok.
func (e *env) startManager(ctx context.Context, name string, args ...string) (*manager, error) {
	if e.mgr != nil {
		if !e.mgr.stop() {
			fmt.Fprintf(e.log, "manager %s did not stop within 60s of SIGTERM; killed it\n", e.mgr.name)
		}
		e.mgr = nil
	}
	healthPort, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	e.managerRuns++
	m := &manager{
		name:       name,
		metricsURL: "http://127.0.0.1:" + strconv.Itoa(metricsPort) + "/metrics",
		healthURL:  "http://127.0.0.1:" + strconv.Itoa(healthPort),
		logPath:    filepath.Join(e.dir, fmt.Sprintf("manager-%d-%s.log", e.managerRuns, name)),
		done:       make(chan struct{}),
	}
	m.args = []string{"manager",
		"--kubeconfig", e.cp.KubeconfigPath(controlplane.Admin),
		"--leader-elect=false",
		"--webhook-port=0",
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(healthPort),
	}
	if e.cfg.qpsSet {
		m.args = append(m.args, "--kube-api-qps="+strconv.FormatFloat(e.cfg.QPS, 'f', -1, 64))
	}
	if e.cfg.burstSet {
		m.args = append(m.args, "--kube-api-burst="+strconv.Itoa(e.cfg.Burst))
	}
	if e.cfg.workersSet {
		m.args = append(m.args, "--workers="+strconv.Itoa(e.cfg.Workers))
	}
	m.args = append(m.args, args...)
	m.args = append(m.args, e.cfg.ManagerArgs...)
	logFile, err := os.Create(m.logPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(e.bin, m.args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	m.started = time.Now()
	go func() {
		m.err = m.cmd.Wait()
		logFile.Close()
		close(m.done)
	}()
	e.mgr = m
	fmt.Fprintf(e.log, "manager %q: %s\n", name, strings.Join(m.args[1:], " "))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if m.exited() {
			return nil, fmt.Errorf("manager %s exited during start-up: %v\n%s", name, m.err, tailFile(m.logPath, 5000))
		}
		if code, _ := httpGet(ctx, m.healthURL+"/readyz"); code == http.StatusOK {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("manager %s not ready after 2m:\n%s", name, tailFile(m.logPath, 5000))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (m *manager) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to 60s, then kills; false if it had to.
func (m *manager) stop() bool {
	if m.exited() {
		return true
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		return true
	case <-time.After(60 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		return false
	}
}

// metrics scrapes the manager's /metrics.
func (m *manager) metrics(ctx context.Context) (metrics, error) {
	if m.exited() {
		return nil, fmt.Errorf("manager %s has exited: %v\n%s", m.name, m.err, tailFile(m.logPath, 5000))
	}
	code, body := httpGet(ctx, m.metricsURL)
	if code != http.StatusOK {
		return nil, fmt.Errorf("manager %s /metrics: %d %s", m.name, code, truncate(body, 300))
	}
	return parseMetrics(body)
}

// rss returns the manager's resident set size in bytes (VmRSS).
func (m *manager) rss() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS in /proc/<pid>/status")
}

func httpGet(ctx context.Context, url string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return resp.StatusCode, string(b)
}

func tailFile(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// retriable reports whether a fast-client write may simply be retried.
func retriable(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err)
}

// parallel runs fn(i) for i in [0, n) on workers goroutines and returns the
// errors joined (at most 10 reported). Retriable API errors are retried.
func parallel(ctx context.Context, n, workers int, fn func(ctx context.Context, i int) error) error {
	if workers > n {
		workers = n
	}
	next := make(chan int)
	errs := make(chan error, n)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range next {
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					if err = fn(ctx, i); err == nil || !retriable(err) {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 200 * time.Millisecond)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
loop:
	for i := 0; i < n; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
			break loop
		}
	}
	close(next)
	for range workers {
		<-done
	}
	close(errs)
	var all []error
	for err := range errs {
		if len(all) < 10 {
			all = append(all, err)
		}
	}
	if ctx.Err() != nil {
		all = append(all, ctx.Err())
	}
	return errors.Join(all...)
}
