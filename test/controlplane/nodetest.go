package controlplane

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NodeForTest is a control plane with one node, started for a test.
type NodeForTest struct {
	*ControlPlane
	t       testing.TB
	stopped bool
}

// StartNodeForTest starts the control plane (presenting a client
// certificate to webhooks, Options.WebhookClientCert) and one node for t, logs how
// long that took, and stops them when t ends unless StopAndCheck did
// first. A machine without the node's prerequisites skips t when
// skipMissing, else fails it (a make target installs and builds them
// first, so a missing one is a failure there).
func StartNodeForTest(ctx context.Context, t testing.TB, binDir string, skipMissing bool) *NodeForTest {
	t.Helper()
	if err := NodePrerequisites(binDir); err != nil {
		if skipMissing {
			t.Skipf("no node on this machine: %v", err)
		}
		t.Fatalf("no node on this machine: %v", err)
	}
	start := time.Now()
	// kube-apiserver presents a client certificate to admission webhooks
	// (WebhookClient): a webhook run with --webhook-client-ca needs it, one
	// without does not ask for it (SPEC B14).
	cp, err := Start(ctx, Options{BinDir: binDir, Node: true, WebhookClientCert: true})
	if err != nil {
		t.Fatalf("starting the control plane and the node: %v", err)
	}
	n := &NodeForTest{ControlPlane: cp, t: t}
	t.Cleanup(func() {
		if !n.stopped {
			cp.Stop()
		}
	})
	t.Logf("control plane and node Ready in %s (logs in %s)", time.Since(start).Round(time.Millisecond), filepath.Join(cp.Dir, "logs"))
	return n
}

// Stopped reports whether StopAndCheck has run.
func (n *NodeForTest) Stopped() bool { return n.stopped }

// StopAndCheck stops the control plane and the node, and fails the test
// when the node left anything behind (processes, mounts, network, cgroups).
func (n *NodeForTest) StopAndCheck() {
	n.t.Helper()
	start := time.Now()
	n.Stop()
	n.stopped = true
	n.t.Logf("stopped and cleaned up in %s", time.Since(start).Round(time.Millisecond))
	if left := NodeLeftovers(); len(left) > 0 {
		n.t.Errorf("the node left behind:\n  %s", strings.Join(left, "\n  "))
	}
}
