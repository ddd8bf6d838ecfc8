// Package framework starts one real control plane per integration test
// package (test/controlplane), installs the CRDs and the shipped admission
// policy (manifests/policy), and gives tests clients for
// the admin and for impersonated or token users, and a way to run the
// manager in-process or as a subprocess.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/test/controlplane"
)

// Env is the shared control plane of a test package.
type Env struct {
	// CP is the running control plane.
	CP *controlplane.ControlPlane
	// Root is the repository root.
	Root string
	// Admin is a client configuration for a system:masters user.
	Admin *rest.Config
	// Kube and Captf are admin clients.
	Kube  kubernetes.Interface
	Captf versioned.Interface
	// CaptfBinary is a captf binary built from this tree for subprocess managers.
	CaptfBinary string

	sharedOnce sync.Once
	shared     *Manager
	sharedErr  error
	// cleanups run after the package's tests, before the control plane stops.
	cleanups []func()
}

// Options configure Main.
type Options struct {
	// ControllerManager also runs kube-controller-manager.
	ControllerManager bool
	// BuildCaptf builds cmd/captf for subprocess managers.
	BuildCaptf bool
	// ManagerRBAC applies the manager's namespace and RBAC from manifests/,
	// so a manager run as controlplane.Manager has exactly those permissions.
	ManagerRBAC bool
	// Node also starts a node, so Pods run (controlplane.Options.Node; root
	// and the node's packages and binaries). Main fails without them: a
	// package that would rather skip checks controlplane.NodePrerequisites
	// in its TestMain first.
	Node bool
	// WebhookClientCert makes kube-apiserver present a client certificate
	// to admission webhooks (controlplane.Options.WebhookClientCert): a
	// manager run with --webhook-client-ca=<Env.CP.WebhookClient.CAFile>
	// then accepts its calls (SPEC B14).
	WebhookClientCert bool
}

// env is set by Main for the package's tests.
var env *Env

// Get returns the package's Env; Main must have started it.
func Get(t testing.TB) *Env {
	t.Helper()
	if env == nil {
		t.Fatal("framework.Main did not run: call it from TestMain")
	}
	return env
}

// Main starts the control plane, runs the tests and stops it. Use it as
//
//	func TestMain(m *testing.M) { framework.Main(m, framework.Options{...}) }
//
// A crash or timeout of the test binary also stops the control plane: its
// processes die with their parent.
func Main(m *testing.M, opts Options) {
	code, err := run(m, opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration framework:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M, opts Options) (int, error) {
	root, err := RepoRoot()
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		BinDir:            filepath.Join(root, "bin"),
		ControllerManager: opts.ControllerManager,
		Node:              opts.Node,
		WebhookClientCert: opts.WebhookClientCert,
	})
	if err != nil {
		return 0, err
	}
	defer cp.Stop()
	e := &Env{CP: cp, Root: root, Admin: cp.RestConfig(controlplane.Admin)}
	if err := controlplane.InstallCRDs(ctx, e.Admin, filepath.Join(root, "manifests", "crds")); err != nil {
		return 0, err
	}
	if e.Kube, err = kubernetes.NewForConfig(e.Admin); err != nil {
		return 0, err
	}
	if e.Captf, err = versioned.NewForConfig(e.Admin); err != nil {
		return 0, err
	}
	// The shipped ValidatingAdmissionPolicy (SPEC B3) guards every package:
	// the manager's writes, as its ServiceAccount user, must pass it, and
	// so must the admin's (system:masters) forged fixtures.
	if err := e.Apply(ctx, "manifests/policy"); err != nil {
		return 0, err
	}
	if opts.ManagerRBAC {
		if err := e.Apply(ctx, "manifests/manager/namespace.yaml", "manifests/rbac"); err != nil {
			return 0, err
		}
	}
	if opts.BuildCaptf {
		bin := filepath.Join(cp.Dir, "captf")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/captf")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("building captf: %v\n%s", err, out)
		}
		e.CaptfBinary = bin
	}
	fmt.Fprintf(os.Stderr, "integration framework: control plane ready at %s in %s (logs in %s)\n", cp.URL, time.Since(start).Round(time.Millisecond), filepath.Join(cp.Dir, "logs"))
	env = e
	code := m.Run()
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	return code, nil
}

// RepoRoot finds the repository root (the directory with go.mod of this module).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && len(b) > 0 && containsModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root with go.mod of github.com/captf/captf not found above the working directory")
		}
		dir = parent
	}
}

func containsModule(gomod []byte) bool {
	const want = "module github.com/captf/captf\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// As returns a client configuration of the admin impersonating user (with
// groups); the API server authorizes the request as that user.
func (e *Env) As(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(e.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return cfg
}

// CaptfAs returns a captf clientset impersonating user.
func (e *Env) CaptfAs(t testing.TB, user string, groups ...string) versioned.Interface {
	t.Helper()
	c, err := versioned.NewForConfig(e.As(user, groups...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
