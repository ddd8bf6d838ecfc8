package controlplane

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The janitor removes what a node's set-up made (bridge, iptables chains,
// cgroups, a process in the node's cgroup, a mount under the node's
// directories) once the pipe from its owner closes, and NodeLeftovers then
// finds nothing. Root only; it takes the node lock, so it never races a
// running node.
func TestJanitorRemovesNodeLeftovers(t *testing.T) {
	if os.Getenv("CAPTF_NODE_TEST") == "" {
		t.Skip("runs with make test-node (CAPTF_NODE_TEST=1): it makes a bridge, iptables chains and cgroups on this host")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-save", "iptables-restore", "sleep"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (hack/node-prereqs.sh)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n := &node{}
	var err error
	if n.lock, err = lockNode(ctx); err != nil {
		t.Fatal(err)
	}
	defer n.lock.Close()
	if err := cleanupNode(os.Stderr); err != nil {
		t.Fatalf("clean-up before the test: %v", err)
	}
	if left := NodeLeftovers(); len(left) > 0 {
		t.Fatalf("leftovers before the test:\n%s", strings.Join(left, "\n"))
	}
	if err := n.startJanitor(filepath.Join(t.TempDir(), "janitor.log")); err != nil {
		t.Fatal(err)
	}

	// What a node makes.
	if err := os.WriteFile(iptablesMarker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := setupNodeNetwork(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("iptables", "-w", "-t", "nat", "-N", "KUBE-SERVICES").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("iptables", "-w", "-t", "nat", "-I", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if err := makeNodeCgroups(); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(cgroupHierarchies()[0], nodeCgroup, "kubepods", "pod1")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	sleeper := exec.Command("sleep", "600")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = sleeper.Wait() }()
	if err := os.WriteFile(filepath.Join(pod, "cgroup.procs"), []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(nodeLibDir, "kubelet", "pods", "x", "volumes", "secret")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	left := NodeLeftovers()
	for _, want := range []string{"bridge " + NodeBridge, "iptables chain KUBE-SERVICES in nat", "iptables chain CAPTF-NODE-FORWARD in mangle", "mount " + mnt, "cgroup "} {
		if !containsPrefix(left, want) {
			t.Errorf("NodeLeftovers() lacks %q: %v", want, left)
		}
	}
	if !containsPrefix(left, "process "+strconv.Itoa(sleeper.Process.Pid)) {
		t.Errorf("NodeLeftovers() lacks the process in the node's cgroup: %v", left)
	}

	// The owner goes away: the janitor cleans up.
	_ = n.janitorEnd.Close()
	if err := n.janitor.Wait(); err != nil {
		b, _ := os.ReadFile(n.janitorLog)
		t.Fatalf("janitor: %v\n%s", err, b)
	}
	if left := NodeLeftovers(); len(left) > 0 {
		b, _ := os.ReadFile(n.janitorLog)
		t.Errorf("after the janitor:\n  %s\njanitor log:\n%s", strings.Join(left, "\n  "), b)
	}
}

func containsPrefix(list []string, prefix string) bool {
	for _, s := range list {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}
