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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/generated/clientset/versioned"
	mgr "github.com/captf/captf/pkg/manager"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
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
	// fw starts managers: the integration framework's Env on this
	// control plane and binary.
	fw *framework.Env
	// mgr is the running manager, if any.
	mgr *manager
	// managerRuns counts started managers (log file names).
	managerRuns int
	log         io.Writer
	// profileNext, when set, is the file the next manager's CPU profile
	// goes to: its first 25 s from the start of its process (-profile).
	profileNext string
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
	e.fw = &framework.Env{CP: e.cp, Root: cfg.Root, Admin: e.rest, Kube: e.kube, Captf: e.captf, CaptfBinary: e.bin}
	fmt.Fprintf(log, "control plane ready at %s, captf built, in %s (work directory %s)\n", e.cp.URL, time.Since(start).Round(time.Millisecond), e.dir)
	return e, nil
}

// stop stops the manager and the control plane; the work directory is
// removed unless keep.
func (e *env) stop(keep bool) {
	if e.mgr != nil {
		e.mgr.Terminate()
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

// manager is a `captf manager` subprocess (the integration framework's)
// started for a scenario.
type manager struct {
	*framework.Manager
	name string
	// cpuProfile reports the end of the CPU profile started with the
	// process (env.profileNext), nil when none was.
	cpuProfile chan error
}

// startManager stops the running manager, if any, and starts one named
// name with the common flags plus args; it waits until /readyz is ok.
func (e *env) startManager(ctx context.Context, name string, args ...string) (*manager, error) {
	if e.mgr != nil {
		if !e.mgr.Terminate() {
			fmt.Fprintf(e.log, "manager %s did not stop within 60s of SIGTERM; killed it\n", e.mgr.name)
		}
		e.mgr = nil
	}
	e.managerRuns++
	dir := filepath.Join(e.dir, fmt.Sprintf("manager-%d-%s", e.managerRuns, name))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// The framework runs its managers with --v=2 and a test runner image;
	// the benchmark measures the manager's defaults (the last flag wins).
	o := framework.ManagerOptions{NoWait: true, Args: []string{"--v=0", "--runner-image=" + mgr.NewOptions().RunnerImage}}
	if e.cfg.qpsSet {
		o.Args = append(o.Args, "--kube-api-qps="+strconv.FormatFloat(e.cfg.QPS, 'f', -1, 64))
	}
	if e.cfg.burstSet {
		o.Args = append(o.Args, "--kube-api-burst="+strconv.Itoa(e.cfg.Burst))
	}
	if e.cfg.workersSet {
		o.Args = append(o.Args, "--workers="+strconv.Itoa(e.cfg.Workers))
	}
	if e.cfg.Profile != "" {
		o.Args = append(o.Args, "--profiling")
	}
	if e.cfg.ManagerMemoryLimit != "" {
		o.Env = append(o.Env, "GOMEMLIMIT="+e.cfg.ManagerMemoryLimit)
	}
	o.Args = append(o.Args, args...)
	o.Args = append(o.Args, e.cfg.ManagerArgs...)
	fm, err := e.fw.StartManagerProcess(o, dir)
	if err != nil {
		return nil, err
	}
	m := &manager{Manager: fm, name: name}
	e.mgr = m
	if file := e.profileNext; file != "" {
		e.profileNext = ""
		m.cpuProfile = make(chan error, 1)
		go func() { m.cpuProfile <- m.saveProfile(ctx, "profile?seconds=25", file) }()
	}
	fmt.Fprintf(e.log, "manager %q: %s (log %s)\n", name, strings.Join(o.Args, " "), m.LogPath)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if exited, err := m.ExitError(); exited {
			return nil, fmt.Errorf("manager %s exited during start-up: %v\n%s", name, err, tail(m.Log(), 5000))
		}
		if code, _ := m.Get("/readyz"); code == http.StatusOK {
			return m, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("manager %s not ready after 2m:\n%s", name, tail(m.Log(), 5000))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// metrics scrapes the manager's /metrics.
func (m *manager) metrics(ctx context.Context) (faultkit.Metrics, error) {
	if exited, err := m.ExitError(); exited {
		return nil, fmt.Errorf("manager %s has exited: %v\n%s", m.name, err, tail(m.Log(), 5000))
	}
	met, err := faultkit.Scrape(ctx, m.MetricsURL+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("manager %s: %w", m.name, err)
	}
	return met, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
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
