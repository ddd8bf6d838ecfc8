package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/captf/captf/test/fakecloud"
)

const (
	tokenA = "token-a-0123456789"
	tokenB = "token-b-9876543210"
)

type harness struct {
	t      *testing.T
	server *fakecloud.Server
	url    string
	file   string
	env    map[string]string
}

// newHarness starts a fake cloud expecting the content of a credential file
// that also serves as the client's --credential-file.
func newHarness(t *testing.T, token string) *harness {
	t.Helper()
	file := filepath.Join(t.TempDir(), "FAKECLOUD_TOKEN")
	require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o440))
	s := fakecloud.NewServer(fakecloud.FileCredential(file))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &harness{t: t, server: s, url: srv.URL, file: file, env: map[string]string{"FAKECLOUD_TOKEN": token, "FAKECLOUD_ENDPOINT": srv.URL}}
}

func (h *harness) run(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	args = append(args, "--credential-file", h.file)
	code := run(context.Background(), args, func(k string) string { return h.env[k] }, &stdout, &stderr)
	for _, out := range []string{stdout.String(), stderr.String()} {
		for _, tok := range []string{tokenA, tokenB} {
			assert.NotContains(h.t, out, tok, "the client never prints a credential")
		}
	}
	return code, stdout.String(), stderr.String()
}

func TestCreateGetDeleteThroughBothPaths(t *testing.T) {
	h := newHarness(t, tokenA)

	code, out, errOut := h.run("create", "--id", "res-1", "--name", "demo", "--credential-source", "env")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"id":"res-1"`)
	assert.Contains(t, errOut, "PUT /resources/res-1 with the credential from env: 201 Created")

	code, out, errOut = h.run("get", "--id", "res-1", "--credential-source", "file")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"name":"demo"`)

	code, out, errOut = h.run("create", "--name", "generated")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `"id":"r-1"`)

	code, _, errOut = h.run("delete", "--id", "res-1", "--credential-source", "file")
	require.Equal(t, 0, code, errOut)
	code, _, _ = h.run("delete", "--id", "res-1", "--credential-source", "file")
	assert.Equal(t, 1, code, "deleting a missing resource fails without --missing-ok")
	code, _, errOut = h.run("delete", "--id", "res-1", "--credential-source", "file", "--missing-ok")
	assert.Equal(t, 0, code, errOut)

	var sources []string
	for _, r := range h.server.Seen() {
		sources = append(sources, r.Method+" "+r.Source+" "+r.Credential)
	}
	assert.Equal(t, []string{
		"PUT env current", "GET file current", "POST env current",
		"DELETE file current", "DELETE file current", "DELETE file current",
	}, sources)
	assert.Equal(t, []string{"r-1"}, ids(h.server.Resources()))
}

// create sends the bootstrap data from the variable --bootstrap-data-env
// names, never from its arguments, and prints neither it nor the answer's
// copy of it (the fake cloud answers with its size and digest; X1).
func TestCreateWithBootstrapData(t *testing.T) {
	h := newHarness(t, tokenA)
	const data = "I2Nsb3VkLWNvbmZpZwpqb2luLXRva2VuLTkxYzM="
	h.env["BOOTSTRAP"] = data

	code, out, errOut := h.run("create", "--id", "m-1", "--name", "m1", "--bootstrap-data-env", "BOOTSTRAP", "--bootstrap-format", "cloud-config")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out+errOut, data)
	assert.Contains(t, out, `"bootstrapDataBytes":40`)
	got, ok := h.server.BootstrapDataOf("m-1")
	require.True(t, ok)
	assert.Equal(t, fakecloud.BootstrapData{BootstrapData: data, BootstrapFormat: "cloud-config"}, got)

	// An unset or empty variable sends no data.
	code, _, errOut = h.run("create", "--id", "m-2", "--name", "m2", "--bootstrap-data-env", "UNSET", "--bootstrap-format", "cloud-config")
	require.Equal(t, 0, code, errOut)
	got, ok = h.server.BootstrapDataOf("m-2")
	require.True(t, ok)
	assert.Equal(t, fakecloud.BootstrapData{}, got)
}

func TestWrongCredentialFails(t *testing.T) {
	h := newHarness(t, tokenA)
	h.env["FAKECLOUD_TOKEN"] = tokenB
	code, _, errOut := h.run("create", "--id", "res-1", "--name", "demo")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "401 Unauthorized")
	assert.Empty(t, h.server.Resources())
}

func TestUsage(t *testing.T) {
	h := newHarness(t, tokenA)
	for _, args := range [][]string{
		{},
		{"--endpoint", "x"},
		{"create", "--credential-source", "vault"},
		{"create", "stray"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, func(k string) string { return h.env[k] }, &stdout, &stderr)
		assert.Equal(t, 2, code, "%q", args)
		assert.NotEmpty(t, stderr.String())
	}
	code, _, errOut := h.run("create")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--name is required")
	code, _, errOut = h.run("frobnicate")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "unknown subcommand")

	delete(h.env, "FAKECLOUD_ENDPOINT")
	code, _, errOut = h.run("whoami")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "no endpoint")
}

// wait-rotation: the environment keeps the old credential, the file and the
// fake cloud move to the new one (R3); the client returns once the file's
// credential is accepted and reports that the environment's was refused.
func TestWaitRotation(t *testing.T) {
	h := newHarness(t, tokenA)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Let the client look at least once before the rotation.
		for len(h.server.Seen()) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		tmp := h.file + ".new"
		if err := os.WriteFile(tmp, []byte(tokenB), 0o440); err == nil {
			_ = os.Rename(tmp, h.file)
		}
	}()
	// Make one request first so the fake cloud knows tokenA as generation 1.
	code, _, errOut := h.run("whoami")
	require.Equal(t, 0, code, errOut)

	code, out, errOut := h.run("wait-rotation", "--wait", "1m", "--interval", "20ms")
	wg.Wait()
	require.Equal(t, 0, code, errOut)
	assert.JSONEq(t, `{"rotated":true,"file":200,"env":401}`, strings.TrimSpace(out))

	seen := h.server.Seen()
	last := seen[len(seen)-1]
	assert.Equal(t, "env", last.Source)
	assert.Equal(t, fakecloud.CredentialPrevious, last.Credential)
	assert.Equal(t, 1, last.Generation)
	beforeLast := seen[len(seen)-2]
	assert.Equal(t, "file", beforeLast.Source)
	assert.Equal(t, fakecloud.CredentialCurrent, beforeLast.Credential)
	assert.Equal(t, 2, beforeLast.Generation)
}

func TestWaitRotationTimesOut(t *testing.T) {
	h := newHarness(t, tokenA)
	code, _, errOut := h.run("wait-rotation", "--wait", "50ms", "--interval", "10ms")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "no rotation accepted")
}

func ids(rs []fakecloud.Resource) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
