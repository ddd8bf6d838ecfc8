// Command captf-controlplane runs the local control plane for
// hack/local-up.sh until it receives SIGINT or SIGTERM: etcd,
// kube-apiserver and kube-controller-manager from bin/, the captf CRDs, a
// kubeconfig per user, and a serving certificate for the manager's webhook.
//
// It writes into --dir:
//
//	kubeconfig               the admin's (system:masters)
//	kubeconfig-<user>        alice, bob (no permissions), the manager's ServiceAccount user
//	webhook/tls.crt,tls.key  the webhook's serving certificate for 127.0.0.1
//	webhook/ca.crt           its CA
//	webhook-configuration.yaml  manifests/webhook pointed at https://127.0.0.1:<MANAGER_WEBHOOK_PORT>
//	controlplane.env         APISERVER_URL, the PIDs of every process, free ports for the manager,
//	                         WEBHOOK_CLIENT_CA: the CA of the client certificate kube-apiserver
//	                         presents to webhooks (its AdmissionConfiguration, SPEC B14), for the
//	                         manager's --webhook-client-ca; WEBHOOK_CLIENT_CERT and
//	                         WEBHOOK_CLIENT_KEY: that certificate and its key, for a test
//	                         that calls the webhook itself (B5, X3, X4)
//	controlplane.ready       once everything answers; removed on exit
//
// With --node it also starts a node (root; see docs/local-control-plane.md,
// "A node"): controlplane.env then says NODE=1 and CONTAINERD_ADDRESS.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/test/controlplane"
)

// webhookManifest is the deployed webhook configuration (--webhook-manifest).
var webhookManifest string

func main() {
	dir := flag.String("dir", ".local", "directory for data, logs, kubeconfigs and certificates")
	binDir := flag.String("bin-dir", "bin", "directory with etcd, kube-apiserver and kube-controller-manager")
	crds := flag.String("crds", "manifests/crds", "directory of CRD YAML to install")
	flag.StringVar(&webhookManifest, "webhook-manifest", "manifests/webhook/validating_webhook_configuration.yaml", "the ValidatingWebhookConfiguration to point at the local manager")
	node := flag.Bool("node", false, "also start a node (containerd, kubelet, kube-scheduler, kube-proxy); needs root")
	capi := flag.Bool("capi", false, "also install Cluster API's CRDs and run its core manager (bin/capi-manager, bin/capi-crds from hack/build-capi.sh)")
	flag.Parse()
	if err := run(*dir, *binDir, *crds, *node, *capi); err != nil {
		fmt.Fprintln(os.Stderr, "captf-controlplane:", err)
		os.Exit(1)
	}
}

func run(dir, binDir, crds string, node, capi bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	cpDir := filepath.Join(dir, "controlplane")
	// A previous run's data is not reused: a fresh cluster every time.
	if err := os.RemoveAll(cpDir); err != nil {
		return err
	}
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return err
	}
	start := time.Now()
	// kube-apiserver presents a client certificate to the webhook, which
	// local-up.sh runs with --webhook-client-ca (SPEC B14).
	cp, err := controlplane.Start(ctx, controlplane.Options{BinDir: binDir, Dir: cpDir, ControllerManager: true, Node: node, WebhookClientCert: true})
	if err != nil {
		return err
	}
	defer cp.Stop()
	ready := filepath.Join(dir, "controlplane.ready")
	defer os.Remove(ready)

	if err := controlplane.InstallCRDs(ctx, cp.RestConfig(controlplane.Admin), crds); err != nil {
		return err
	}
	if err := cp.WriteKubeconfig(filepath.Join(dir, "kubeconfig"), controlplane.Admin); err != nil {
		return err
	}
	// Cluster API before the manager starts: the manager discovers it once,
	// at start-up (SPEC K2-K6).
	var capiManager *controlplane.CAPIManager
	if capi {
		if capiManager, err = cp.StartCAPI(ctx, controlplane.CAPIOptions{BinDir: binDir}); err != nil {
			return err
		}
		defer capiManager.Stop()
	}
	for _, u := range []string{controlplane.Alice, controlplane.Bob, controlplane.Manager} {
		name := "kubeconfig-" + u
		if u == controlplane.Manager {
			name = "kubeconfig-manager"
		}
		if err := cp.WriteKubeconfig(filepath.Join(dir, name), u); err != nil {
			return err
		}
	}
	caPEM, err := certs.WriteSelfSigned(filepath.Join(dir, "webhook"), []string{"127.0.0.1", "localhost"})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "webhook", "ca.crt"), caPEM, 0o600); err != nil {
		return err
	}

	// The identity webhook, pointed at the manager local-up.sh starts on a
	// free port; local-up.sh applies it once the manager is ready.
	webhookPort, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	whc, err := controlplane.LoadWebhookConfiguration(webhookManifest, fmt.Sprintf("https://127.0.0.1:%d", webhookPort), caPEM)
	if err != nil {
		return err
	}
	whYAML, err := yaml.Marshal(whc)
	if err != nil {
		return err
	}
	// The plans' mutating configuration (O8) sits beside it.
	mwc, err := controlplane.LoadMutatingWebhookConfiguration(filepath.Join(filepath.Dir(webhookManifest), "mutating_webhook_configuration.yaml"),
		fmt.Sprintf("https://127.0.0.1:%d", webhookPort), caPEM)
	if err != nil {
		return err
	}
	mwcYAML, err := yaml.Marshal(mwc)
	if err != nil {
		return err
	}
	whYAML = append(append(whYAML, "---\n"...), mwcYAML...)
	if err := os.WriteFile(filepath.Join(dir, "webhook-configuration.yaml"), whYAML, 0o600); err != nil {
		return err
	}

	var env strings.Builder
	fmt.Fprintf(&env, "APISERVER_URL=%s\nCONTROLPLANE_PID=%d\n", cp.URL, os.Getpid())
	pids := cp.PIDs()
	names := make([]string, 0, len(pids))
	for n := range pids {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&env, "%s_PID=%d\n", strings.ToUpper(strings.ReplaceAll(n, "-", "_")), pids[n])
	}
	fmt.Fprintf(&env, "LOG_DIR=%s\n", filepath.Join(cpDir, "logs"))
	fmt.Fprintf(&env, "WEBHOOK_CLIENT_CA=%s\nWEBHOOK_CLIENT_CERT=%s\nWEBHOOK_CLIENT_KEY=%s\n",
		cp.WebhookClient.CAFile, cp.WebhookClient.CertFile, cp.WebhookClient.KeyFile)
	if capiManager != nil {
		fmt.Fprintf(&env, "CAPI_MANAGER_PID=%d\nCAPI_MANAGER_LOG=%s\n", capiManager.PID(), capiManager.LogPath)
	}
	if node {
		fmt.Fprintf(&env, "NODE=1\nCONTAINERD_ADDRESS=%s\n", controlplane.ContainerdAddress)
	}
	// Free ports for the manager that local-up.sh starts next.
	fmt.Fprintf(&env, "MANAGER_WEBHOOK_PORT=%d\n", webhookPort)
	for _, name := range []string{"MANAGER_METRICS_PORT", "MANAGER_HEALTH_PORT"} {
		port, err := controlplane.FreePort()
		if err != nil {
			return err
		}
		fmt.Fprintf(&env, "%s=%d\n", name, port)
	}
	if err := os.WriteFile(filepath.Join(dir, "controlplane.env"), []byte(env.String()), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(ready, nil, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "captf-controlplane: ready at %s in %s (logs in %s)\n", cp.URL, time.Since(start).Round(time.Millisecond), filepath.Join(cpDir, "logs"))
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "captf-controlplane: stopping")
	return nil
}
