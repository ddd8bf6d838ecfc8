package controlplane

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/captf/captf/pkg/admission/certs"
)

// User is a token-authenticated user of the control plane.
type User struct {
	Name   string
	Token  string
	Groups []string
}

// The users every control plane has. Admin is in system:masters and may
// impersonate anyone; Alice and Bob have no permissions until a test or an
// operator grants them some (authorization tests, SPEC A2-A4).
const (
	Admin = "captf-admin"
	Alice = "alice"
	Bob   = "bob"
	// Manager authenticates exactly as the manager's ServiceAccount in
	// manifests/ would, so running the manager as this user with the
	// manifests' RBAC applied proves those permissions suffice (SPEC X2).
	Manager = "system:serviceaccount:captf-system:captf-manager"
)

// Options configure a control plane.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager.
	BinDir string
	// Dir is where data, certificates and logs go. Empty means a new
	// temporary directory that Stop removes.
	Dir string
	// ControllerManager also starts kube-controller-manager (garbage
	// collector, namespace and Job controllers).
	ControllerManager bool
	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string
	// Node also starts one node, so Pods run: containerd, kubelet,
	// kube-scheduler and kube-proxy (implies ControllerManager). It needs
	// root, the Debian packages hack/node-prereqs.sh installs and the
	// binaries of hack/build-control-plane.sh --node; NodePrerequisites
	// says what is missing. The API server then listens on NodeGateway
	// (URL names it), with Node,RBAC authorization and NodeRestriction.
	// See docs/local-control-plane.md, "A node".
	Node bool
	// WebhookClientCert makes kube-apiserver present a client certificate
	// to every admission webhook (an AdmissionConfiguration, SPEC B14);
	// ControlPlane.WebhookClient then names it and its CA.
	WebhookClientCert bool
}

// ControlPlane is a running etcd + kube-apiserver (+ kube-controller-manager).
type ControlPlane struct {
	// Dir holds everything the control plane writes; logs are in Dir/logs.
	Dir string
	// URL is the kube-apiserver's https URL.
	URL string
	// CAData verifies the kube-apiserver's serving certificate.
	CAData []byte
	// Users are the token users, by name.
	Users map[string]User
	// WebhookClient is the client certificate kube-apiserver presents to
	// admission webhooks; nil without Options.WebhookClientCert.
	WebhookClient *WebhookClientCert

	removeDir bool
	etcdURL   string
	etcd      *process
	apiserver *process
	kcm       *process
	node      *node
}

// Start starts the control plane and waits until kube-apiserver is ready.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.BinDir == "" {
		return nil, errors.New("controlplane: BinDir is required")
	}
	cp := &ControlPlane{Dir: opts.Dir}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "captf-controlplane-"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	for _, d := range []string{"etcd", "pki", "logs", "apiserver"} {
		if err := os.MkdirAll(filepath.Join(cp.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if opts.Node {
		opts.ControllerManager = true
		// Before the API server: it listens on the bridge's address.
		if err := cp.prepareNode(ctx, opts.BinDir); err != nil {
			return nil, err
		}
	}

	if err := cp.prepare(opts); err != nil {
		return nil, err
	}
	if err := cp.StartEtcd(ctx); err != nil {
		return nil, err
	}
	if err := cp.StartAPIServer(ctx); err != nil {
		return nil, err
	}
	if cp.kcm != nil {
		if err := cp.kcm.start(); err != nil {
			return nil, err
		}
	}
	if cp.node != nil {
		if err := cp.startNode(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// prepare writes certificates, keys, the token file and kubeconfigs, and
// chooses ports.
func (cp *ControlPlane) prepare(opts Options) error {
	pki := filepath.Join(cp.Dir, "pki")

	hosts := []string{"127.0.0.1", "localhost"}
	if opts.Node {
		// Pods reach the API server through the kubernetes Service.
		hosts = append(hosts, NodeGateway, serviceIP, "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
	}
	caPEM, certPEM, keyPEM, err := certs.Generate(hosts, 365*24*time.Hour)
	if err != nil {
		return fmt.Errorf("apiserver certificate: %w", err)
	}
	cp.CAData = caPEM
	if err := os.WriteFile(filepath.Join(pki, "ca.crt"), caPEM, 0o600); err != nil {
		return err
	}
	if err := certs.WriteFiles(filepath.Join(pki, "apiserver"), certPEM, keyPEM); err != nil {
		return err
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saKeyPath := filepath.Join(pki, "sa.key")
	if err := os.WriteFile(saKeyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER}), 0o600); err != nil {
		return err
	}

	cp.Users = map[string]User{}
	var tokens strings.Builder
	users := []User{
		{Name: Admin, Groups: []string{"system:masters"}},
		{Name: Alice},
		{Name: Bob},
		{Name: Manager, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:captf-system"}},
	}
	if opts.Node {
		users = append(users, User{Name: NodeUser, Groups: []string{"system:nodes"}})
	}
	for i, u := range users {
		u.Token = randomToken()
		cp.Users[u.Name] = u
		// token,user,uid,"group1,group2"
		fmt.Fprintf(&tokens, "%s,%s,uid-%d,%q\n", u.Token, u.Name, i, strings.Join(u.Groups, ","))
	}
	tokenFile := filepath.Join(pki, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens.String()), 0o600); err != nil {
		return err
	}

	etcdPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	apiPort, err := FreePort()
	if err != nil {
		return err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	cp.etcdURL = etcdURL
	cp.URL = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	apiArgs := []string{
		"--bind-address", "127.0.0.1",
		"--authorization-mode", "RBAC",
		"--advertise-address", "10.0.0.1",
	}
	if opts.Node {
		cp.URL = "https://" + NodeGateway + ":" + strconv.Itoa(apiPort)
		cp.node.apiPort = apiPort
		apiArgs = nodeAPIServerArgs()
	}

	if opts.WebhookClientCert {
		w, args, err := writeWebhookClientCert(filepath.Join(pki, "webhook-client"))
		if err != nil {
			return fmt.Errorf("webhook client certificate: %w", err)
		}
		cp.WebhookClient = w
		apiArgs = append(apiArgs, args...)
	}

	etcdBin, err := binary(opts.BinDir, "etcd")
	if err != nil {
		return err
	}
	cp.etcd = &process{
		name: "etcd", path: etcdBin, logPath: filepath.Join(cp.Dir, "logs", "etcd.log"),
		args: []string{
			"--data-dir", filepath.Join(cp.Dir, "etcd"),
			"--listen-client-urls", etcdURL,
			"--advertise-client-urls", etcdURL,
			"--listen-peer-urls", "http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--initial-advertise-peer-urls", "http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--initial-cluster", "default=http://127.0.0.1:" + strconv.Itoa(peerPort),
			"--unsafe-no-fsync", // test data: durability across power loss is not needed
			"--log-level", "warn",
		},
	}

	apiBin, err := binary(opts.BinDir, "kube-apiserver")
	if err != nil {
		return err
	}
	cp.apiserver = &process{
		name: "kube-apiserver", path: apiBin, logPath: filepath.Join(cp.Dir, "logs", "kube-apiserver.log"),
		args: append([]string{
			"--etcd-servers", etcdURL,
			"--secure-port", strconv.Itoa(apiPort),
			"--cert-dir", filepath.Join(cp.Dir, "apiserver"),
			"--tls-cert-file", filepath.Join(pki, "apiserver", "tls.crt"),
			"--tls-private-key-file", filepath.Join(pki, "apiserver", "tls.key"),
			"--token-auth-file", tokenFile,
			"--service-account-issuer", "https://kubernetes.default.svc",
			"--service-account-key-file", saKeyPath,
			"--service-account-signing-key-file", saKeyPath,
			"--service-cluster-ip-range", "10.0.0.0/24",
			"--endpoint-reconciler-type", "none",
			"--allow-privileged",
			"--v", "1",
		}, append(apiArgs, opts.ExtraAPIServerArgs...)...),
	}

	adminKubeconfig := cp.KubeconfigPath(Admin)
	for name := range cp.Users {
		if err := cp.WriteKubeconfig(cp.KubeconfigPath(name), name); err != nil {
			return err
		}
	}

	if opts.ControllerManager {
		kcmBin, err := binary(opts.BinDir, "kube-controller-manager")
		if err != nil {
			return err
		}
		cp.kcm = &process{
			name: "kube-controller-manager", path: kcmBin, logPath: filepath.Join(cp.Dir, "logs", "kube-controller-manager.log"),
			args: []string{
				"--kubeconfig", adminKubeconfig,
				"--authentication-kubeconfig", adminKubeconfig,
				"--authorization-kubeconfig", adminKubeconfig,
				"--service-account-private-key-file", saKeyPath,
				"--root-ca-file", filepath.Join(pki, "ca.crt"),
				"--use-service-account-credentials=false",
				"--controllers", "*",
				"--secure-port", "0",
				"--leader-elect=false",
				"--v", "1",
			},
		}
	}
	return nil
}

// StartEtcd starts etcd (again, after StopEtcd, on the same data) and waits
// until it is healthy.
func (cp *ControlPlane) StartEtcd(ctx context.Context) error {
	if err := cp.etcd.start(); err != nil {
		return err
	}
	url := cp.etcdURL + "/health"
	return cp.waitFor(ctx, cp.etcd, 60*time.Second, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("etcd /health: %s", resp.Status)
		}
		return nil
	})
}

// StopEtcd stops etcd, keeping its data.
func (cp *ControlPlane) StopEtcd() { cp.etcd.stop(syscall.SIGTERM, 10*time.Second) }

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) and
// waits until /readyz answers ok.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if err := cp.apiserver.start(); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cp.CAData)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	token := cp.Users[Admin].Token
	return cp.waitFor(ctx, cp.apiserver, 120*time.Second, func() error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cp.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-apiserver /readyz: %s", resp.Status)
		}
		return nil
	})
}

// StopAPIServer stops kube-apiserver (SIGKILL when hard, else SIGTERM).
func (cp *ControlPlane) StopAPIServer(hard bool) {
	sig := syscall.SIGTERM
	if hard {
		sig = syscall.SIGKILL
	}
	cp.apiserver.stop(sig, 30*time.Second)
}

// waitFor polls check until it succeeds, the process exits, or the timeout.
func (cp *ControlPlane) waitFor(ctx context.Context, p *process, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = check(); last == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited during start-up; end of %s:\n%s", p.name, p.logPath, p.logTail(4000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %v; end of %s:\n%s", p.name, timeout, last, p.logPath, p.logTail(4000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops every process, controller-manager first, and removes a
// temporary directory.
func (cp *ControlPlane) Stop() {
	if cp.node != nil {
		cp.node.stop()
	}
	if cp.kcm != nil {
		cp.kcm.stop(syscall.SIGTERM, 10*time.Second)
	}
	if cp.apiserver != nil {
		cp.apiserver.stop(syscall.SIGTERM, 15*time.Second)
	}
	if cp.etcd != nil {
		cp.etcd.stop(syscall.SIGTERM, 10*time.Second)
	}
	if cp.removeDir {
		_ = os.RemoveAll(cp.Dir)
	}
}

// PIDs returns the PIDs of the running processes by name.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	procs := []*process{cp.etcd, cp.apiserver, cp.kcm}
	if n := cp.node; n != nil {
		procs = append(procs, n.containerd, n.kubelet, n.scheduler, n.proxy)
	}
	for _, p := range procs {
		if p != nil && p.pid() != 0 {
			out[p.name] = p.pid()
		}
	}
	return out
}

// RestConfig returns a client configuration authenticating as user.
func (cp *ControlPlane) RestConfig(user string) *rest.Config {
	return &rest.Config{
		Host:            cp.URL,
		BearerToken:     cp.Users[user].Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData},
		QPS:             1000,
		Burst:           2000,
	}
}

// KubeconfigPath is where the kubeconfig of user is written.
func (cp *ControlPlane) KubeconfigPath(user string) string {
	return filepath.Join(cp.Dir, "kubeconfig-"+strings.NewReplacer(":", "_", "/", "_").Replace(user))
}

// WriteKubeconfig writes a kubeconfig authenticating as user to path.
func (cp *ControlPlane) WriteKubeconfig(path, user string) error {
	u, ok := cp.Users[user]
	if !ok {
		return fmt.Errorf("unknown user %q", user)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["captf-local"] = &clientcmdapi.Cluster{Server: cp.URL, CertificateAuthorityData: cp.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: u.Token}
	cfg.Contexts["captf-local"] = &clientcmdapi.Context{Cluster: "captf-local", AuthInfo: user}
	cfg.CurrentContext = "captf-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// LogPath returns the log file of a component ("etcd", "kube-apiserver",
// "kube-controller-manager").
func (cp *ControlPlane) LogPath(component string) string {
	return filepath.Join(cp.Dir, "logs", component+".log")
}

func randomToken() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%x", b)
}
