package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// The node's fixed names. They are global on this machine (one bridge, one
// range, one cgroup), so one node runs at a time (a lock serializes them),
// and the clean-up of a crashed run's leftovers touches only these.
const (
	// NodeName is the node's name and the kubelet's user,
	// system:node:localhost.
	NodeName = "localhost"
	// NodeUser authenticates the kubelet (group system:nodes), so the Node
	// authorizer and NodeRestriction apply to it.
	NodeUser = "system:node:" + NodeName
	// PauseImage is the sandbox image: a static binary that sleeps until
	// SIGTERM (hack/tools/images/pause), imported without a registry.
	PauseImage = "captf.local/pause:dev"

	// NodeBridge is the CNI bridge; NodeGateway, its address, is where the
	// API server listens for pods (and the node's InternalIP).
	NodeBridge  = "captf0"
	NodeSubnet  = "10.87.0.0/24"
	NodeGateway = "10.87.0.1"

	nodeLibDir   = "/var/lib/captf-node" // containerd's root (the image cache), kubelet root, IPAM
	nodeRunDir   = "/run/captf-node"     // containerd state and socket, runc, configs
	nodeLockFile = "/run/captf-node.lock"
	nodeCgroup   = "captf-node" // the kubelet's cgroupRoot, in every hierarchy
	nodeNetwork  = "captf-node" // the CNI network name
	// ContainerdAddress is the node's private containerd socket (for ctr and
	// the image import).
	ContainerdAddress = nodeRunDir + "/containerd.sock"
	// serviceIP is the kubernetes Service's address (first of
	// --service-cluster-ip-range).
	serviceIP = "10.0.0.1"
)

// NodeBinaries are what a node needs from bin/, besides the control plane.
var NodeBinaries = []string{"kubelet", "kube-scheduler", "kube-proxy", "captf-images", "captf-pause"}

// nodeHostTools are what a node needs from the host (hack/node-prereqs.sh).
var nodeHostTools = []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "iptables", "iptables-save", "ip", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"}

// NodePrerequisites says why this machine cannot run a node (not root, a
// missing package or binary), or nil when it can. Tests skip with its
// message.
func NodePrerequisites(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("a node needs root (mounts, network namespaces, cgroups, a bridge)")
	}
	var missing []string
	for _, t := range nodeHostTools {
		if strings.HasPrefix(t, "/") {
			if _, err := os.Stat(t); err != nil {
				missing = append(missing, t)
			}
		} else if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing on this host: %s (run hack/node-prereqs.sh as root)", strings.Join(missing, ", "))
	}
	for _, b := range NodeBinaries {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing in %s: %s (run hack/build-control-plane.sh --node, or make node-binaries)", binDir, strings.Join(missing, ", "))
	}
	return nil
}

// node is one node's processes.
type node struct {
	binDir     string
	lock       *os.File
	janitor    *exec.Cmd
	janitorEnd *os.File // closing it (or our death) starts the janitor's clean-up
	janitorLog string

	containerd, kubelet, scheduler, proxy *process
	apiPort                               int
}

// prepareNode runs before the API server: checks, the lock, the clean-up of
// a crashed run's leftovers, the janitor, the bridge (the API server listens
// on its address).
func (cp *ControlPlane) prepareNode(ctx context.Context, binDir string) (err error) {
	if err := NodePrerequisites(binDir); err != nil {
		return err
	}
	n := &node{binDir: binDir}
	cp.node = n
	if n.lock, err = lockNode(ctx); err != nil {
		return err
	}
	if err := cleanupNode(os.Stderr); err != nil {
		return fmt.Errorf("cleaning up a previous node: %w", err)
	}
	if chains := foreignKubeChains(); len(chains) > 0 {
		return fmt.Errorf("this host has Kubernetes iptables chains this project did not create (%s): another node runs here; not starting one", strings.Join(chains, ", "))
	}
	if err := n.startJanitor(cp.LogPath("node-janitor")); err != nil {
		return err
	}
	for _, d := range []string{nodeRunDir, nodeLibDir, filepath.Join(nodeRunDir, "config"), filepath.Join(nodeRunDir, "net.d")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// From here on the janitor's clean-up removes our iptables rules too.
	if err := os.WriteFile(iptablesMarker, nil, 0o600); err != nil {
		return err
	}
	return setupNodeNetwork()
}

// setupNodeNetwork creates the bridge with the gateway address, lets it
// forward between pods (a pod reaching another pod through a Service is
// routed by this host) but never off the bridge, and keeps ICMP redirects
// off it (they would send a pod straight to another pod's address for a
// Service address). ip_forward stays as it is: nothing leaves the machine.
func setupNodeNetwork() error {
	for _, args := range [][]string{
		{"ip", "link", "add", NodeBridge, "type", "bridge"},
		{"ip", "addr", "add", NodeGateway + "/24", "dev", NodeBridge},
		{"ip", "link", "set", NodeBridge, "up"},
		{"iptables", "-w", "-t", "mangle", "-N", "CAPTF-NODE-FORWARD"},
		{"iptables", "-w", "-t", "mangle", "-A", "CAPTF-NODE-FORWARD", "-i", NodeBridge, "!", "-o", NodeBridge, "-j", "DROP"},
		{"iptables", "-w", "-t", "mangle", "-I", "FORWARD", "-j", "CAPTF-NODE-FORWARD"},
		{"iptables", "-w", "-t", "mangle", "-N", "CAPTF-NODE-OUTPUT"},
		{"iptables", "-w", "-t", "mangle", "-A", "CAPTF-NODE-OUTPUT", "-o", NodeBridge, "-p", "icmp", "--icmp-type", "redirect", "-j", "DROP"},
		{"iptables", "-w", "-t", "mangle", "-I", "OUTPUT", "-j", "CAPTF-NODE-OUTPUT"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// Per interface: only packets arriving on the bridge may be forwarded.
	return os.WriteFile("/proc/sys/net/ipv4/conf/"+NodeBridge+"/forwarding", []byte("1"), 0o644)
}

// nodeAPIServerArgs are the API server's flags for a node.
func nodeAPIServerArgs() []string {
	return []string{
		"--bind-address", NodeGateway,
		"--advertise-address", NodeGateway,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		"--kubelet-preferred-address-types", "Hostname",
	}
}

// startNode runs once the API server is ready: the kubernetes Service's
// endpoints, containerd, the pause image, kubelet, kube-scheduler and
// kube-proxy; it waits until the node is Ready.
func (cp *ControlPlane) startNode(ctx context.Context) error {
	n := cp.node
	cfg := cp.RestConfig(Admin)
	cfg.WarningHandler = rest.NoWarnings{} // v1 Endpoints are deprecated; written for completeness
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := cp.writeKubernetesEndpoints(ctx, kube); err != nil {
		return err
	}
	if err := n.writeConfigs(cp); err != nil {
		return err
	}
	if err := n.containerd.start(); err != nil {
		return err
	}
	if err := cp.waitFor(ctx, n.containerd, 60*time.Second, func() error {
		return exec.Command("ctr", "--address", ContainerdAddress, "version").Run()
	}); err != nil {
		return err
	}
	if err := n.importPause(); err != nil {
		return err
	}
	for _, p := range []*process{n.kubelet, n.scheduler, n.proxy} {
		if err := p.start(); err != nil {
			return err
		}
	}
	return cp.waitFor(ctx, n.kubelet, 120*time.Second, func() error {
		node, err := kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready", NodeName)
	})
}

// writeKubernetesEndpoints points the kubernetes Service at the API server
// on the bridge's address. There is no endpoint reconciler
// (--endpoint-reconciler-type none), so nothing else writes them; kube-proxy
// reads the EndpointSlice, the Endpoints are for completeness.
func (cp *ControlPlane) writeKubernetesEndpoints(ctx context.Context, kube kubernetes.Interface) error {
	port := int32(cp.node.apiPort)
	ep := &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: NodeGateway}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	if _, err := kube.CoreV1().Endpoints(metav1.NamespaceDefault).Create(ctx, ep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes Endpoints: %w", err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: "kubernetes",
				discoveryv1.LabelManagedBy:   "captf-controlplane",
			}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{NodeGateway}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: &port, Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	if _, err := kube.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes EndpointSlice: %w", err)
	}
	return nil
}

// importPause imports the sandbox image (cached by digest).
func (n *node) importPause() error {
	out, err := exec.Command(filepath.Join(n.binDir, "captf-images"), "build",
		"-name", PauseImage, "-user", "65535:65535", "-entrypoint", "/pause",
		"-file", filepath.Join(n.binDir, "captf-pause")+"=/pause",
		"-address", ContainerdAddress).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s: %v: %s", PauseImage, err, out)
	}
	return nil
}

// writeConfigs writes containerd's, the CNI's, the kubelet's and
// kube-proxy's configuration and defines the node's processes.
func (n *node) writeConfigs(cp *ControlPlane) error {
	cfgDir := filepath.Join(nodeRunDir, "config")
	state := filepath.Join(nodeRunDir, "containerd")
	containerdConfig := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
oom_score = 0

[grpc]
  address = %[3]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  # This VM drops CAP_SYS_RESOURCE: writing -998 to oom_score_adj fails and
  # every sandbox dies with "can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Network namespaces under the state directory, so the clean-up finds them.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = %[6]q
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[7]q
    max_conf_num = 1
`, filepath.Join(nodeLibDir, "containerd"), state, ContainerdAddress, filepath.Join(nodeLibDir, "opt"),
		PauseImage, filepath.Join(nodeRunDir, "runc"), filepath.Join(nodeRunDir, "net.d"))
	if err := os.WriteFile(filepath.Join(cfgDir, "containerd.toml"), []byte(containerdConfig), 0o600); err != nil {
		return err
	}

	cni := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "isDefaultGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "dataDir": %q
    }
  }]
}
`, nodeNetwork, NodeBridge, NodeSubnet, NodeGateway, filepath.Join(nodeLibDir, "cni"))
	if err := os.WriteFile(filepath.Join(nodeRunDir, "net.d", "10-captf.conflist"), []byte(cni), 0o600); err != nil {
		return err
	}

	ports := make([]int, 6)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	kubeletPort, kubeletHealthz, schedulerPort, proxyHealthz, proxyMetrics := ports[0], ports[1], ports[2], ports[3], ports[4]

	kubeletDir := filepath.Join(nodeLibDir, "kubelet")
	kubeletConfig := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
# cgroup v1 here; 1.37 refuses it unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
failSwapOn: false
containerRuntimeEndpoint: unix://%s
# A Secret volume follows a rotation in 6-9 s (the default 1m gives ~62 s).
syncFrequency: 10s
podLogsDir: %s
# The API server reaches the kubelet (logs, exec) on 127.0.0.1 only.
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
# Locally imported images cannot be pulled again: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The disk is shared with builds: the default hard thresholds
# (imagefs.available<15%%, nodefs.available<10%%) tainted the node with
# disk-pressure at 15%% free (38 of 252 GB), leaving every new pod Pending.
# The node runs few, small pods: evict only when the disk is nearly full.
# All five signals are set: one left out would have no threshold.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 2%%
  imagefs.available: 2%%
  nodefs.inodesFree: 2%%
  imagefs.inodesFree: 2%%
serializeImagePulls: false
staticPodPath: ""
`, kubeletPort, kubeletHealthz, nodeCgroup, ContainerdAddress, filepath.Join(nodeLibDir, "pod-logs"))
	if err := os.WriteFile(filepath.Join(cfgDir, "kubelet.yaml"), []byte(kubeletConfig), 0o600); err != nil {
		return err
	}
	nodeKubeconfig := filepath.Join(cfgDir, "kubelet.kubeconfig")
	if err := cp.WriteKubeconfig(nodeKubeconfig, NodeUser); err != nil {
		return err
	}
	adminKubeconfig := filepath.Join(cfgDir, "admin.kubeconfig")
	if err := cp.WriteKubeconfig(adminKubeconfig, Admin); err != nil {
		return err
	}

	proxyConfig := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
mode: iptables
hostnameOverride: %s
clusterCIDR: %s
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
# NodePorts only on the bridge's address: nothing is reachable from outside.
nodePortAddresses: ["%s/32"]
iptables:
  # A pod reaching another pod through a Service is routed by this host;
  # without bridge netfilter the reply only finds its way back when the
  # request was masqueraded to the gateway.
  masqueradeAll: true
  localhostNodePorts: false
# Leave the host's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, adminKubeconfig, NodeName, NodeSubnet, proxyHealthz, proxyMetrics, NodeGateway)
	if err := os.WriteFile(filepath.Join(cfgDir, "kube-proxy.yaml"), []byte(proxyConfig), 0o600); err != nil {
		return err
	}

	logs := filepath.Join(cp.Dir, "logs")
	n.containerd = &process{name: "containerd", path: "containerd", logPath: filepath.Join(logs, "containerd.log"),
		args: []string{"--config", filepath.Join(cfgDir, "containerd.toml"), "--log-level", "warn"}}
	n.kubelet = &process{name: "kubelet", path: filepath.Join(n.binDir, "kubelet"), logPath: filepath.Join(logs, "kubelet.log"),
		args: []string{
			"--config", filepath.Join(cfgDir, "kubelet.yaml"),
			"--kubeconfig", nodeKubeconfig,
			"--root-dir", kubeletDir,
			"--cert-dir", filepath.Join(kubeletDir, "pki"),
			"--hostname-override", NodeName,
			"--node-ip", NodeGateway,
			"--v", "1",
		}}
	n.scheduler = &process{name: "kube-scheduler", path: filepath.Join(n.binDir, "kube-scheduler"), logPath: filepath.Join(logs, "kube-scheduler.log"),
		args: []string{
			"--kubeconfig", adminKubeconfig,
			"--authentication-kubeconfig", adminKubeconfig,
			"--authorization-kubeconfig", adminKubeconfig,
			"--bind-address", "127.0.0.1",
			"--secure-port", strconv.Itoa(schedulerPort),
			"--leader-elect=false",
			"--v", "1",
		}}
	n.proxy = &process{name: "kube-proxy", path: filepath.Join(n.binDir, "kube-proxy"), logPath: filepath.Join(logs, "kube-proxy.log"),
		args: []string{"--config", filepath.Join(cfgDir, "kube-proxy.yaml"), "--v", "1"}}

	// The kubelet's cgroupRoot must exist in every hierarchy.
	return makeNodeCgroups()
}

// stop stops the node's processes (kubelet first, so it stops starting
// containers), then has the janitor clean up, and waits for it.
func (n *node) stop() {
	// Short graces: the kubelet does not drain pods on SIGTERM, and the
	// janitor kills whatever is left anyway.
	for _, p := range []*process{n.kubelet, n.proxy, n.scheduler} {
		if p != nil {
			p.stop(syscall.SIGTERM, 2*time.Second)
		}
	}
	if n.containerd != nil {
		n.containerd.stop(syscall.SIGTERM, 5*time.Second)
	}
	if n.janitor != nil {
		_ = n.janitorEnd.Close()
		done := make(chan error, 1)
		go func() { done <- n.janitor.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				b, _ := os.ReadFile(n.janitorLog)
				fmt.Fprintf(os.Stderr, "controlplane: node clean-up: %v\n%s", err, b)
			}
		case <-time.After(2 * time.Minute):
			fmt.Fprintf(os.Stderr, "controlplane: node clean-up did not finish; see %s\n", n.janitorLog)
		}
	}
	if n.lock != nil {
		_ = n.lock.Close()
	}
}

// lockNode takes the machine-wide node lock, waiting for another node to
// finish.
func lockNode(ctx context.Context) (*os.File, error) {
	f, err := os.OpenFile(nodeLockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			_ = f.Truncate(0)
			_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
			return f, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for another node on this machine (%s): %w", nodeLockFile, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}
