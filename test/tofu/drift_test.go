package tofu

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/runner"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/fakecloud"
	"github.com/captf/captf/test/integration/framework"
)

// driftAddress is the drift module's resource (test/e2e/module-drift).
const driftAddress = "fakecloud_resource.resource"

// driftImage lays out an image root as hack/build-e2e-images.sh lays out
// the drift module's image (SPEC O10): the module test/e2e/module-drift in
// module/, bin/tofu as runtime, and providers/ the provider mirror that
// hack/build-fakecloud-provider.sh builds (the provider is built here,
// from its own module, by that script).
func driftImage(t *testing.T) string {
	t.Helper()
	img := t.TempDir()
	require.NoError(t, os.CopyFS(filepath.Join(img, "module"), os.DirFS(filepath.Join(root, "test", "e2e", "module-drift"))))
	require.NoError(t, os.Symlink(tofuBinary, filepath.Join(img, "runtime")))
	cmd := exec.Command(filepath.Join(root, "hack", "build-fakecloud-provider.sh"), filepath.Join(img, "providers"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/build-fakecloud-provider.sh: %s", out)
	t.Logf("%s", strings.TrimSpace(string(out)))
	return img
}

// behindTheBack changes the fake cloud without the module: a PATCH of the
// content (body) or a DELETE (body "").
func behindTheBack(t *testing.T, c *cloud, token, method, id, body string) {
	t.Helper()
	req, err := http.NewRequest(method, c.url+"/resources/"+id, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(fakecloud.SourceHeader, "test")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Less(t, resp.StatusCode, 300, "%s /resources/%s: %s", method, id, resp.Status)
}

// TestDriftModuleThroughTheRunnerO7 proves the drift module and its
// provider with OpenTofu before the node (issue 24): captf runner, as a
// Job runs it, on an image laid out as the e2e's drift image (SPEC O10:
// the provider from the image's mirror, with no registry reachable: a
// proxy that refuses every connection stands in for a pod without a
// network), state in the kubernetes backend (T2). After the apply, a
// content changed behind the module's back is drift naming
// fakecloud_resource.resource (an update), and the drift run applies
// nothing; deleted behind its back, it is drift again (a create); an
// apply puts it back, and destroy leaves the fake cloud empty (O7).
func TestDriftModuleThroughTheRunnerO7(t *testing.T) {
	requireTofu(t)
	e := framework.Get(t)
	ns := e.CreateNamespace(t, "drift", nil)
	grantT1(t, e, ns, controlplane.Alice)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, e.CP.WriteKubeconfig(kubeconfig, controlplane.Alice))

	img := driftImage(t)
	c := startCloud(t, buildFakecloud(t), tokenA)
	id := moduleID(ns, "drifty")
	vars, err := json.Marshal(map[string]any{"name": "drifty", "namespace": ns, "fakecloud_endpoint": c.url, "credential_file": c.credentialFile})
	require.NoError(t, err)
	env := append(tofuEnv(t, t.TempDir(), tokenA), runner.VariablesEnv+"="+string(vars),
		// Any request off this host fails at once (Go's HTTP clients
		// never proxy loopback: the fake cloud and the API server).
		"HTTPS_PROXY=http://127.0.0.1:1", "HTTP_PROXY=http://127.0.0.1:1")
	env[0] = "PATH=/usr/bin:/bin" // only the image's runtime can run
	run := func(op string) (*runresult.Result, string) {
		t.Helper()
		result := filepath.Join(t.TempDir(), "termination-log")
		args := []string{op, "--image-root=" + img, "--result=" + result, "--workdir=" + t.TempDir(), "--home=" + filepath.Join(t.TempDir(), "home"),
			"--state-namespace=" + ns, "--state-suffix=drifty", "--state-kubeconfig=" + kubeconfig}
		out := &strings.Builder{}
		code := runner.Main(framework.Context(t), args, env, out, out)
		t.Logf("captf runner %s (exit %d):\n%s", op, code, out)
		require.Equal(t, 0, code, "captf runner %s", op)
		raw, err := os.ReadFile(result)
		require.NoError(t, err)
		doc, err := runresult.Unmarshal(raw)
		require.NoError(t, err, "%s", raw)
		assert.NotContains(t, out.String()+string(raw), tokenA, "X1")
		return doc, out.String()
	}
	content := func() string {
		t.Helper()
		for _, r := range c.resources(t, tokenA) {
			if r.ID == id {
				return r.Content
			}
		}
		return "(none)"
	}

	_, out := run("apply")
	assert.Contains(t, out, "from the mirror only: captf.local/captf/fakecloud")
	require.Equal(t, "as the module says", content())

	doc, _ := run("drift")
	require.False(t, doc.Drift.Found(), "drift right after the apply: %+v", doc.Drift)

	behindTheBack(t, c, tokenA, http.MethodPatch, id, `{"content":"changed behind its back"}`)
	doc, _ = run("drift")
	require.NotNil(t, doc.Drift)
	assert.Equal(t, runresult.Changes{Update: 1}, doc.Drift.Changes)
	assert.Equal(t, []string{driftAddress}, doc.Drift.Resources)
	assert.Equal(t, "changed behind its back", content(), "a drift run applies nothing")

	behindTheBack(t, c, tokenA, http.MethodDelete, id, "")
	doc, _ = run("drift")
	require.NotNil(t, doc.Drift)
	assert.Equal(t, runresult.Changes{Create: 1}, doc.Drift.Changes)
	assert.Equal(t, []string{driftAddress}, doc.Drift.Resources)
	assert.Equal(t, "(none)", content(), "a drift run applies nothing")

	run("apply")
	assert.Equal(t, "as the module says", content(), "the apply puts the resource back")
	doc, _ = run("drift")
	assert.False(t, doc.Drift.Found(), "drift after the apply put it back: %+v", doc.Drift)

	run("destroy")
	assert.Empty(t, c.resources(t, tokenA))
	for _, r := range c.seen(t) {
		if r.Source != "test" && r.Path != "/seen" {
			assert.Equal(t, fakecloud.CredentialCurrent, r.Credential, "%s %s", r.Method, r.Path)
		}
	}
}
