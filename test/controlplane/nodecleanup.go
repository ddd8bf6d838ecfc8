package controlplane

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The node's clean-up runs in a janitor: a copy of the running binary (the
// test binary, captf-controlplane), started in a session of its own when
// the node starts, that waits for the end of a pipe from its parent. Stop
// closes the pipe; a parent killed by Ctrl-C, a failed test or SIGKILL
// closes it by dying. Either way the janitor kills what the node left
// running (containers and their shims outlive containerd), unmounts, and
// removes the network namespaces, the bridge, the iptables chains and the
// cgroups. The same clean-up runs before a node starts, for the leftovers
// of a janitor that could not run (a reboot, a SIGKILL of the janitor).

const janitorEnv = "CAPTF_NODE_JANITOR"

// iptablesMarker exists while this project's node may have iptables chains
// on this host (KUBE-* from kube-proxy and the kubelet, CAPTF-NODE-*): only
// then does the clean-up remove KUBE-* chains. In /run, so a reboot (which
// clears iptables) clears it too.
const iptablesMarker = "/run/captf-node.iptables"

func init() {
	if os.Getenv(janitorEnv) == "1" {
		os.Exit(runJanitor())
	}
}

func runJanitor() int {
	// Neither a terminal's Ctrl-C nor a signal to the parent's process
	// group may stop the clean-up.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Fprintf(os.Stderr, "%s node-janitor: the node's owner stopped or died; cleaning up\n", time.Now().Format(time.RFC3339))
	if err := cleanupNode(os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "node-janitor: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "%s node-janitor: done\n", time.Now().Format(time.RFC3339))
	return 0
}

// startJanitor starts the janitor; closing janitorEnd (or this process's
// death) starts its clean-up.
func (n *node) startJanitor(logPath string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		w.Close()
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), janitorEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = r, logFile, logFile
	// The janitor holds the node lock too (an flock belongs to the open
	// file, shared with the child): a node started right after its owner
	// died waits until the clean-up is over instead of racing it.
	if n.lock != nil {
		cmd.ExtraFiles = []*os.File{n.lock}
	}
	// A session of its own: outside the process group that Ctrl-C or
	// kill -- -PGID reaches.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting the node janitor: %w", err)
	}
	n.janitor, n.janitorEnd, n.janitorLog = cmd, w, logPath
	return nil
}

// nodeProcessNames are the programs a node runs outside its pods' cgroups.
var nodeProcessNames = map[string]bool{
	"containerd": true, "containerd-shim-runc-v2": true, "runc": true,
	"kubelet": true, "kube-proxy": true, "kube-scheduler": true,
}

// cleanupNode removes everything a node of this project left on this host,
// and nothing else: it finds processes by this project's directories on
// their command line or by this project's cgroup, mounts under this
// project's directories, the bridge by its name, iptables chains by name
// (KUBE-* only while the marker says this project created them).
func cleanupNode(log io.Writer) error {
	var errs []string
	note := func(format string, args ...any) { fmt.Fprintf(log, "node clean-up: "+format+"\n", args...) }

	// 1. Processes: the daemons, the shims, and every container process.
	for i := 0; ; i++ {
		pids := nodeProcesses()
		if len(pids) == 0 {
			break
		}
		if i == 50 {
			errs = append(errs, fmt.Sprintf("processes still running: %v", pids))
			break
		}
		if i == 0 {
			note("killing %d processes", len(pids))
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// 2. Mounts: the kubelet's volumes, the containers' root file systems,
	// the network namespaces (under containerd's state directory).
	for i := 0; ; i++ {
		mounts := nodeMounts()
		if len(mounts) == 0 {
			break
		}
		if i == 10 {
			errs = append(errs, fmt.Sprintf("mounts left: %v", mounts))
			break
		}
		if i == 0 {
			note("unmounting %d mounts", len(mounts))
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
				note("unmount %s: %v", m, err)
			}
		}
	}

	// 3. containerd's metadata keeps the containers of a run; the images
	// (the cache) stay.
	if err := purgeContainers(); err != nil {
		errs = append(errs, "purging containerd's containers: "+err.Error())
	}

	// 4. The bridge (the pods' veths went with their namespaces).
	if _, err := os.Stat("/sys/class/net/" + NodeBridge); err == nil {
		note("removing the bridge %s", NodeBridge)
		if out, err := exec.Command("ip", "link", "del", NodeBridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip link del %s: %v: %s", NodeBridge, err, out))
		}
	}

	// 5. iptables.
	if err := removeIptablesChains(note); err != nil {
		errs = append(errs, err.Error())
	}

	// 6. cgroups.
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, nodeCgroup)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				errs = append(errs, fmt.Sprintf("cgroup %s: %v", d, err))
			}
		}
	}

	// 7. Files: everything but containerd's root (the image cache).
	for _, p := range []string{nodeRunDir, nodeRunDir + "-purge", filepath.Join(nodeLibDir, "kubelet"), filepath.Join(nodeLibDir, "cni"),
		filepath.Join(nodeLibDir, "pod-logs"), filepath.Join(nodeLibDir, "containerd", "io.containerd.grpc.v1.cri")} {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// The kubelet links each container's log from /var/log/containers, and
	// containerd's CNI library caches results in /var/lib/cni.
	if links, _ := filepath.Glob("/var/log/containers/*"); len(links) > 0 {
		for _, l := range links {
			if t, err := os.Readlink(l); err == nil && strings.HasPrefix(t, nodeLibDir+"/") {
				_ = os.Remove(l)
			}
		}
	}
	if cached, _ := filepath.Glob("/var/lib/cni/results/" + nodeNetwork + "-*"); len(cached) > 0 {
		for _, c := range cached {
			_ = os.Remove(c)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// NodeLeftovers lists what a node of this project left on this host:
// processes, mounts, the bridge, iptables chains, cgroups, state
// directories. Empty after a clean Stop.
func NodeLeftovers() []string {
	var out []string
	for _, pid := range nodeProcesses() {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		out = append(out, fmt.Sprintf("process %d: %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	for _, m := range nodeMounts() {
		out = append(out, "mount "+m)
	}
	if _, err := os.Stat("/sys/class/net/" + NodeBridge); err == nil {
		out = append(out, "bridge "+NodeBridge)
	}
	for table, chains := range nodeIptablesChains(true) {
		for _, c := range chains {
			out = append(out, fmt.Sprintf("iptables chain %s in %s", c, table))
		}
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, nodeCgroup)); err == nil {
			out = append(out, "cgroup "+filepath.Join(h, nodeCgroup))
		}
	}
	for _, p := range []string{nodeRunDir, filepath.Join(nodeLibDir, "kubelet"), iptablesMarker} {
		if _, err := os.Stat(p); err == nil {
			out = append(out, "path "+p)
		}
	}
	sort.Strings(out)
	return out
}

// nodeProcesses returns the PIDs of this project's node processes: those
// in its cgroups, and the daemons and shims that name its directories.
func nodeProcesses() []int {
	self := os.Getpid()
	seen := map[int]bool{}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, nodeCgroup), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != self {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if !nodeProcessNames[filepath.Base(args[0])] {
			continue
		}
		for _, a := range args[1:] {
			if strings.Contains(a, nodeRunDir) || strings.Contains(a, nodeLibDir) {
				seen[pid] = true
				break
			}
		}
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// nodeMounts returns the mount points under this project's directories,
// deepest first.
func nodeMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	seen := map[string]bool{}
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range []string{nodeRunDir, nodeLibDir} {
			if (mp == d || strings.HasPrefix(mp, d+"/") || strings.HasPrefix(mp, d+"-")) && !seen[mp] {
				seen[mp] = true
				out = append(out, mp)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupHierarchies returns the mounted cgroup hierarchies (each v1
// controller, or the v2 root).
func cgroupHierarchies() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.procs"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() {
			continue // cpu,cpuacct style symlinks
		}
		if _, err := os.Stat(filepath.Join(p, "cgroup.procs")); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// makeNodeCgroups creates the kubelet's cgroupRoot in every hierarchy.
func makeNodeCgroups() error {
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, nodeCgroup)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// A new cpuset has no CPUs and no memory nodes until given some.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("%s: %w", filepath.Join(dir, f), err)
				}
			}
		}
	}
	return nil
}

// nodeIptablesChains returns, by table, the chains of this project's node:
// CAPTF-NODE-*, and KUBE-* when kube too (the caller knows they are ours).
func nodeIptablesChains(kube bool) map[string][]string {
	out := map[string][]string{}
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		b, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, ":") {
				continue
			}
			name := strings.Fields(line[1:])[0]
			if strings.HasPrefix(name, "CAPTF-NODE-") || (kube && strings.HasPrefix(name, "KUBE-")) {
				out[table] = append(out[table], name)
			}
		}
	}
	return out
}

// foreignKubeChains lists KUBE-* chains that exist while this project has
// no node here (the clean-up removed ours): another Kubernetes owns them.
func foreignKubeChains() []string {
	if _, err := os.Stat(iptablesMarker); err == nil {
		return nil
	}
	var out []string
	for table, chains := range nodeIptablesChains(true) {
		for _, c := range chains {
			if strings.HasPrefix(c, "KUBE-") {
				out = append(out, table+"/"+c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// removeIptablesChains removes this project's chains and the rules that
// jump to them, with one iptables-restore --noflush per table (the other
// rules are not touched).
func removeIptablesChains(note func(string, ...any)) error {
	_, err := os.Stat(iptablesMarker)
	owned := err == nil
	for table, chains := range nodeIptablesChains(owned) {
		if len(chains) == 0 {
			continue
		}
		ours := map[string]bool{}
		for _, c := range chains {
			ours[c] = true
		}
		b, err := exec.Command("iptables-save", "-t", table).Output()
		if err != nil {
			return fmt.Errorf("iptables-save -t %s: %w", table, err)
		}
		var del bytes.Buffer
		fmt.Fprintf(&del, "*%s\n", table)
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || ours[f[1]] {
				continue
			}
			for i := 0; i+1 < len(f); i++ {
				if (f[i] == "-j" || f[i] == "-g") && ours[f[i+1]] {
					del.WriteString("-D" + strings.TrimPrefix(line, "-A") + "\n")
					break
				}
			}
		}
		for _, c := range chains {
			fmt.Fprintf(&del, "-F %s\n", c)
		}
		for _, c := range chains {
			fmt.Fprintf(&del, "-X %s\n", c)
		}
		del.WriteString("COMMIT\n")
		note("removing %d iptables chains from %s", len(chains), table)
		cmd := exec.Command("iptables-restore", "-w", "--noflush")
		cmd.Stdin = &del
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("iptables-restore -t %s: %v: %s\ninput:\n%s", table, err, out, del.String())
		}
	}
	if owned {
		_ = os.Remove(iptablesMarker)
	}
	return nil
}

// purgeContainers removes the containers a run left in containerd's
// metadata, keeping the images: a containerd without the CRI plugin, on a
// socket of its own, for the moment it takes.
func purgeContainers() error {
	root := filepath.Join(nodeLibDir, "containerd")
	if _, err := os.Stat(filepath.Join(root, "io.containerd.metadata.v1.bolt", "meta.db")); err != nil {
		return nil
	}
	dir := nodeRunDir + "-purge"
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n[grpc]\n  address = %q\n",
		root, filepath.Join(dir, "state"), sock)
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(cfg), 0o600); err != nil {
		return err
	}
	cmd := exec.Command("containerd", "--config", filepath.Join(dir, "config.toml"), "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	ctr := func(args ...string) ([]byte, error) {
		return exec.Command("ctr", append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...).Output()
	}
	var ids []byte
	var err error
	for i := 0; i < 100; i++ {
		if ids, err = ctr("containers", "ls", "-q"); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("ctr containers ls: %w", err)
	}
	if list := strings.Fields(string(ids)); len(list) > 0 {
		if out, err := ctr(append([]string{"containers", "rm"}, list...)...); err != nil {
			return fmt.Errorf("ctr containers rm: %v: %s", err, out)
		}
		for _, id := range list {
			// The CNI library's cache of each sandbox's loopback network.
			_ = os.Remove("/var/lib/cni/results/cni-loopback-" + id + "-lo")
			// The shim's socket, which containerd 1.6 puts under
			// /run/containerd/s whatever its state directory, named by
			// sha256(<containerd address>/<namespace>/<id>).
			sum := sha256.Sum256([]byte(filepath.Join(ContainerdAddress, "k8s.io", id)))
			_ = os.Remove(fmt.Sprintf("/run/containerd/s/%x", sum))
		}
	}
	return nil
}
