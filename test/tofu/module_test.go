package tofu

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/test/fakecloud"
)

const (
	tokenA = "fake-token-A-4f1c9e"
	tokenB = "fake-token-B-7d2a10"
)

// moduleID is the id test/e2e/module gives its resource.
func moduleID(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return "r-" + hex.EncodeToString(sum[:])[:16]
}

// assertOutputs checks `tofu output -json` of an applied module.
func assertOutputs(t *testing.T, o outputs, id string) {
	t.Helper()
	require.Contains(t, o, "resource_id")
	assert.JSONEq(t, `"`+id+`"`, string(o["resource_id"].Value))
	assert.False(t, o["resource_id"].Sensitive)
	require.Contains(t, o, "control_plane_endpoint")
	assert.JSONEq(t, `{"host":"`+id+`.fakecloud.test","port":6443}`, string(o["control_plane_endpoint"].Value))
	require.Contains(t, o, "admin_token")
	assert.True(t, o["admin_token"].Sensitive)
}

// Local state (SPEC T2: without state flags the state stays in the working
// copy): apply creates exactly one resource, with the current credential
// from the environment, checks it through the file (J2), outputs the id
// and the endpoint; a second apply changes nothing; destroy deletes it.
func TestModuleLocalState(t *testing.T) {
	requireTofu(t)
	bin := buildFakecloud(t)
	c := startCloud(t, bin, tokenA)
	id := moduleID("tenant-a", "demo")
	w := newWorkdir(t, map[string]any{
		"name":               "demo",
		"namespace":          "tenant-a",
		"fakecloud_endpoint": c.url,
		"credential_file":    c.credentialFile,
	}, tofuEnv(t, bin, tokenA))

	w.mustRun(t, "init", "-input=false")
	applyOut := w.mustRun(t, "apply", "-auto-approve", "-input=false")
	t.Logf("tofu apply:\n%s", applyOut)
	assert.NotContains(t, applyOut, tokenA, "the credential never reaches Terraform's output")

	res := c.resources(t, tokenA)
	require.Len(t, res, 1)
	assert.Equal(t, id, res[0].ID)
	assert.Equal(t, "demo", res[0].Name)
	seen := c.seen(t)
	puts := requestsTo(seen, "PUT", "/resources/"+id)
	require.Len(t, puts, 1, describe(seen))
	assert.Equal(t, fakecloud.Request{Seq: puts[0].Seq, Time: puts[0].Time, Method: "PUT", Path: "/resources/" + id, ID: id,
		Status: 201, Matched: true, Credential: "current", Generation: 1, Source: "env"}, puts[0])
	gets := requestsTo(seen, "GET", "/resources/"+id)
	require.Len(t, gets, 1, describe(seen))
	assert.Equal(t, "file", gets[0].Source)
	assert.Equal(t, 200, gets[0].Status)
	assert.FileExists(t, filepath.Join(w.dir, "terraform.tfstate"))

	assertOutputs(t, w.outputs(t), id)

	again := w.mustRun(t, "apply", "-auto-approve", "-input=false")
	assert.Contains(t, again, "0 added, 0 changed, 0 destroyed")
	assert.Len(t, requestsTo(c.seen(t), "PUT", "/resources/"+id), 1, "a second apply creates nothing")

	destroyOut := w.mustRun(t, "destroy", "-auto-approve", "-input=false")
	t.Logf("tofu destroy:\n%s", destroyOut)
	seen = c.seen(t)
	dels := requestsTo(seen, "DELETE", "/resources/"+id)
	require.Len(t, dels, 1, describe(seen))
	assert.Equal(t, 204, dels[0].Status)
	assert.Equal(t, "file", dels[0].Source)
	assert.Equal(t, "current", dels[0].Credential)
	assert.Empty(t, c.resources(t, tokenA))
}

// A wrong credential in the environment: the fake cloud refuses the create,
// apply fails, nothing exists.
func TestModuleWrongCredentialFailsApply(t *testing.T) {
	requireTofu(t)
	bin := buildFakecloud(t)
	c := startCloud(t, bin, tokenA)
	id := moduleID("", "demo")
	w := newWorkdir(t, map[string]any{
		"name":               "demo",
		"fakecloud_endpoint": c.url,
		"credential_file":    c.credentialFile,
	}, tofuEnv(t, bin, tokenB))

	w.mustRun(t, "init", "-input=false")
	out, code := w.run(t, "apply", "-auto-approve", "-input=false")
	t.Logf("tofu apply with a wrong credential (exit %d):\n%s", code, out)
	assert.NotEqual(t, 0, code)
	// The create's output is suppressed (its configuration holds the
	// sensitive bootstrap_data); its error carries it, wrapped in a box.
	assert.Contains(t, out, `PUT /resources/`+id+`: 401`)
	assert.Contains(t, out, `{"error":"credential is unknown"}`)
	assert.NotContains(t, out, tokenB)
	assert.Empty(t, c.resources(t, tokenA))
	seen := c.seen(t)
	puts := requestsTo(seen, "PUT", "/resources/"+id)
	require.Len(t, puts, 1, describe(seen))
	assert.Equal(t, 401, puts[0].Status)
	assert.Equal(t, "unknown", puts[0].Credential)
	assert.Equal(t, "env", puts[0].Source)
	assert.Empty(t, requestsTo(seen, "GET", "/resources/"+id), "the check after the create never ran")
}

// The module directory declares no backend (the runner injects one) and
// nothing in it depends on a provider download.
func TestModuleNeedsNoProvider(t *testing.T) {
	requireTofu(t)
	bin := buildFakecloud(t)
	w := newWorkdir(t, map[string]any{"name": "demo", "fakecloud_endpoint": "http://127.0.0.1:1"}, tofuEnv(t, bin, tokenA))
	out := w.mustRun(t, "init", "-input=false")
	assert.NotContains(t, out, "Installing")
	assert.NoDirExists(t, filepath.Join(w.dir, ".terraform", "providers"))
	b, err := os.ReadFile(filepath.Join(root, "test", "e2e", "module", "main.tf"))
	require.NoError(t, err)
	assert.False(t, strings.Contains(string(b), "backend \""), "the module declares no backend")
}
