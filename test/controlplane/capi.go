package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/admission/certs"
)

// Cluster API's core manager and its CRDs, as hack/build-capi.sh puts them
// into bin/ (SPEC K12; docs/local-control-plane.md, "Cluster API").
const (
	// CAPIManagerBinary is Cluster API's core manager
	// (sigs.k8s.io/cluster-api/core).
	CAPIManagerBinary = "capi-manager"
	// CAPICRDDir holds the release's CRDs (core/config/crd/bases).
	CAPICRDDir = "capi-crds"
)

// CAPIOptions configure StartCAPI.
type CAPIOptions struct {
	// BinDir holds capi-manager and capi-crds (hack/build-capi.sh).
	BinDir string
	// Args are appended to the manager's flags, e.g. feature gates.
	Args []string
	// ReadyTimeout bounds the wait for /readyz; default 3 minutes (it
	// answered within 20 s on an idle machine).
	ReadyTimeout time.Duration
}

// CAPIManager is Cluster API's core manager running as a local process
// against a ControlPlane, as the admin (system:masters: it needs no RBAC of
// its own here). Its webhooks serve a self-signed certificate and no webhook
// configuration points at them, so objects are stored as written: without
// its defaulting, they must be complete.
type CAPIManager struct {
	// HealthURL serves /readyz and /healthz.
	HealthURL string
	// LogPath holds its output; it stays in the control plane's Dir/logs
	// after Stop.
	LogPath string

	proc *process
}

// StartCAPI applies Cluster API's CRDs from BinDir/capi-crds with a
// server-side apply and starts its core manager, waiting until /readyz
// answers. The caller stops it (Stop); it also dies with this process.
func (cp *ControlPlane) StartCAPI(ctx context.Context, opts CAPIOptions) (*CAPIManager, error) {
	bin := filepath.Join(opts.BinDir, CAPIManagerBinary)
	crds := filepath.Join(opts.BinDir, CAPICRDDir)
	for _, p := range []string{bin, crds} {
		if _, err := os.Stat(p); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, fmt.Errorf("%s not found: run hack/build-capi.sh (make capi-tools; make test-integration does)", p)
			}
			return nil, err
		}
	}
	if err := ApplyCRDs(ctx, cp.RestConfig(Admin), crds); err != nil {
		return nil, err
	}

	// One directory per manager: a control plane may run more than one
	// over its life (a restart, a move test's second manager).
	dir, err := os.MkdirTemp(cp.Dir, "capi-")
	if err != nil {
		return nil, err
	}
	certDir := filepath.Join(dir, "webhook-certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, err
	}
	// The manager refuses to start without a serving pair; nothing calls
	// it, so the CA is not kept.
	if _, err := certs.WriteSelfSigned(certDir, []string{"127.0.0.1", "localhost"}); err != nil {
		return nil, fmt.Errorf("webhook certificate for Cluster API: %w", err)
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = FreePort(); err != nil {
			return nil, err
		}
	}
	webhookPort, healthPort, diagPort := ports[0], ports[1], ports[2]
	m := &CAPIManager{
		HealthURL: "http://127.0.0.1:" + strconv.Itoa(healthPort),
		LogPath:   filepath.Join(cp.Dir, "logs", filepath.Base(dir)+"-manager.log"),
	}
	m.proc = &process{
		name: "cluster-api manager", path: bin, logPath: m.LogPath,
		args: append([]string{
			"--kubeconfig", cp.KubeconfigPath(Admin),
			// The webhook server binds every address (the manager has no
			// flag for its host); nothing is configured to call it.
			"--webhook-port", strconv.Itoa(webhookPort),
			"--webhook-cert-dir", certDir,
			"--health-addr", "127.0.0.1:" + strconv.Itoa(healthPort),
			"--diagnostics-address", "127.0.0.1:" + strconv.Itoa(diagPort),
			"--insecure-diagnostics",
			"--leader-elect=false",
			// Both phases migrate stored objects of an older release; a
			// fresh control plane has none.
			"--skip-crd-migration-phases=StorageVersionMigration,CleanupManagedFields",
		}, opts.Args...),
	}
	if err := m.proc.start(); err != nil {
		return nil, err
	}
	timeout := opts.ReadyTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	client := &http.Client{Timeout: 5 * time.Second}
	err = cp.waitFor(ctx, m.proc, timeout, func() error {
		resp, err := client.Get(m.HealthURL + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz: %s", resp.Status)
		}
		return nil
	})
	if err != nil {
		m.Stop()
		if strings.Contains(m.LogTail(1<<20), "unsupported management cluster server version") {
			err = fmt.Errorf("%w\nhint: kube-apiserver reports no real version; rebuild it stamped with hack/build-control-plane.sh", err)
		}
		return nil, err
	}
	return m, nil
}

// Stop stops the manager (SIGTERM, then SIGKILL after 15 s).
func (m *CAPIManager) Stop() { m.proc.stop(syscall.SIGTERM, 15*time.Second) }

// Exited reports whether the manager has exited.
func (m *CAPIManager) Exited() bool { return m.proc.exited() }

// PID is the manager's process ID, 0 once stopped.
func (m *CAPIManager) PID() int { return m.proc.pid() }

// LogTail returns the last n bytes of the manager's log.
func (m *CAPIManager) LogTail(n int64) string { return m.proc.logTail(n) }

// ApplyCRDs applies every CRD in the YAML files of dir with a server-side
// apply (some of Cluster API's are too large for the annotation of a
// client-side apply) and waits until each is Established.
func ApplyCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRD files in %s", dir)
	}
	sort.Strings(files)
	var names []string
	for _, f := range files {
		objs, err := readYAML(f)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetKind() != "CustomResourceDefinition" {
				continue
			}
			data, err := json.Marshal(obj.Object)
			if err != nil {
				return err
			}
			force := true
			if _, err := client.Resource(crdGVR).Patch(ctx, obj.GetName(), types.ApplyPatchType, data,
				metav1.PatchOptions{FieldManager: "captf-controlplane", Force: &force}); err != nil {
				return fmt.Errorf("applying CRD %s from %s: %w", obj.GetName(), f, err)
			}
			names = append(names, obj.GetName())
		}
	}
	return waitEstablished(ctx, client, names)
}
