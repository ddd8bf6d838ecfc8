package fakecloud

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	tokenA = "token-a-0123456789"
	tokenB = "token-b-9876543210"
)

// call sends one request and returns the status and body.
func call(t *testing.T, srv *httptest.Server, method, path, token, source, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, srv.URL+path, rd)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if source != "" {
		req.Header.Set(SourceHeader, source)
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func seen(t *testing.T, srv *httptest.Server) ([]Request, string) {
	t.Helper()
	code, body := call(t, srv, http.MethodGet, "/seen", "", "", "")
	require.Equal(t, http.StatusOK, code)
	var out struct {
		Requests []Request `json:"requests"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	return out.Requests, body
}

func TestLifecycleWithTheCurrentCredential(t *testing.T) {
	srv := httptest.NewServer(NewServer(StaticCredential(tokenA)))
	defer srv.Close()

	code, body := call(t, srv, http.MethodPost, "/resources", tokenA, "env", `{"name":"one"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var created Resource
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	assert.Equal(t, "r-1", created.ID)
	assert.Equal(t, 1, created.CreatedWithGeneration)

	code, body = call(t, srv, http.MethodPut, "/resources/fixed-id", tokenA, "file", `{"name":"two"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, _ = call(t, srv, http.MethodPut, "/resources/fixed-id", tokenA, "file", `{"name":"two"}`)
	assert.Equal(t, http.StatusOK, code, "PUT of the same resource again is idempotent")
	code, _ = call(t, srv, http.MethodPut, "/resources/fixed-id", tokenA, "file", `{"name":"other"}`)
	assert.Equal(t, http.StatusConflict, code)

	code, body = call(t, srv, http.MethodGet, "/resources", tokenA, "env", "")
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `"id":"fixed-id"`)
	assert.Contains(t, body, `"id":"r-1"`)

	code, _ = call(t, srv, http.MethodGet, "/resources/fixed-id", tokenA, "env", "")
	assert.Equal(t, http.StatusOK, code)
	code, _ = call(t, srv, http.MethodDelete, "/resources/fixed-id", tokenA, "file", "")
	assert.Equal(t, http.StatusNoContent, code)
	code, _ = call(t, srv, http.MethodDelete, "/resources/fixed-id", tokenA, "file", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv, http.MethodGet, "/resources/fixed-id", tokenA, "env", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv, http.MethodPut, "/resources/Not_A_Label", tokenA, "env", `{"name":"x"}`)
	assert.Equal(t, http.StatusBadRequest, code)

	reqs, _ := seen(t, srv)
	require.Len(t, reqs, 10)
	first := reqs[0]
	assert.Equal(t, Request{Seq: 1, Time: first.Time, Method: "POST", Path: "/resources", ID: "r-1", Status: 201,
		Matched: true, Credential: CredentialCurrent, Generation: 1, Source: "env"}, first)
	del := reqs[6]
	assert.Equal(t, "DELETE", del.Method)
	assert.Equal(t, "fixed-id", del.ID)
	assert.Equal(t, 204, del.Status)
	assert.Equal(t, "file", del.Source)
	assert.Empty(t, reqs[9].ID, "an invalid id is not recorded")
}

func TestWrongOrMissingCredentialIsRefused(t *testing.T) {
	s := NewServer(StaticCredential(tokenA))
	srv := httptest.NewServer(s)
	defer srv.Close()

	code, _ := call(t, srv, http.MethodPut, "/resources/x", tokenB, "env", `{"name":"x"}`)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = call(t, srv, http.MethodPut, "/resources/x", "", "", `{"name":"x"}`)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = call(t, srv, http.MethodGet, "/whoami", tokenB, "env", "")
	assert.Equal(t, http.StatusUnauthorized, code)

	reqs, _ := seen(t, srv)
	require.Len(t, reqs, 3)
	assert.Equal(t, CredentialUnknown, reqs[0].Credential)
	assert.False(t, reqs[0].Matched)
	assert.Equal(t, 0, reqs[0].Generation)
	assert.Equal(t, CredentialNone, reqs[1].Credential)
	assert.Empty(t, s.Resources(), "a refused create creates nothing")
}

// A rotation of the credential file is seen at the next request: the old
// credential becomes "previous" and is refused (what R3's environment copy
// will meet), the new one is "current".
func TestFileRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "FAKECLOUD_TOKEN")
	require.NoError(t, os.WriteFile(path, []byte(tokenA+"\n"), 0o600))
	s := NewServer(FileCredential(path))
	srv := httptest.NewServer(s)
	defer srv.Close()

	code, body := call(t, srv, http.MethodGet, "/whoami", tokenA, "file", "")
	require.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"credential":"current","generation":1}`, body)

	require.NoError(t, os.WriteFile(path, []byte(tokenB), 0o600))
	code, body = call(t, srv, http.MethodGet, "/whoami", tokenA, "env", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.Contains(t, body, "previous")
	code, body = call(t, srv, http.MethodGet, "/whoami", tokenB, "file", "")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"credential":"current","generation":2}`, body)

	reqs, _ := seen(t, srv)
	require.Len(t, reqs, 3)
	assert.Equal(t, []string{CredentialCurrent, CredentialPrevious, CredentialCurrent},
		[]string{reqs[0].Credential, reqs[1].Credential, reqs[2].Credential})
	assert.Equal(t, []int{1, 1, 2}, []int{reqs[0].Generation, reqs[1].Generation, reqs[2].Generation})
	assert.Equal(t, []string{"file", "env", "file"}, []string{reqs[0].Source, reqs[1].Source, reqs[2].Source})

	// Its own credential unreadable: 503, not an open door.
	require.NoError(t, os.Remove(path))
	code, _ = call(t, srv, http.MethodGet, "/whoami", tokenB, "file", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
}

// SPEC X1 spirit: nothing the server answers contains a credential.
func TestNoCredentialInAnswers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "FAKECLOUD_TOKEN")
	require.NoError(t, os.WriteFile(path, []byte(tokenA), 0o600))
	srv := httptest.NewServer(NewServer(FileCredential(path)))
	defer srv.Close()

	var bodies []string
	for _, tok := range []string{tokenA, tokenB} {
		_, b := call(t, srv, http.MethodPut, "/resources/x", tok, "env", `{"name":"x"}`)
		bodies = append(bodies, b)
		_, b = call(t, srv, http.MethodGet, "/whoami", tok, "env", "")
		bodies = append(bodies, b)
	}
	require.NoError(t, os.WriteFile(path, []byte(tokenB), 0o600))
	_, b := call(t, srv, http.MethodGet, "/whoami", tokenA, "env", "")
	bodies = append(bodies, b)
	_, b = call(t, srv, http.MethodGet, "/resources", tokenB, "env", "")
	bodies = append(bodies, b)
	_, all := seen(t, srv)
	bodies = append(bodies, all)
	for _, body := range bodies {
		for _, tok := range []string{tokenA, tokenB, "0123456789", "9876543210"} {
			assert.NotContains(t, body, tok)
		}
	}
}

func TestSourceHeaderIsBounded(t *testing.T) {
	srv := httptest.NewServer(NewServer(StaticCredential(tokenA)))
	defer srv.Close()
	call(t, srv, http.MethodGet, "/whoami", tokenA, "Env With Spaces", "")
	call(t, srv, http.MethodGet, "/whoami", tokenA, strings.Repeat("a", 17), "")
	call(t, srv, http.MethodGet, "/whoami", tokenA, "", "")
	reqs, _ := seen(t, srv)
	require.Len(t, reqs, 3)
	assert.Equal(t, []string{"invalid", "invalid", ""}, []string{reqs[0].Source, reqs[1].Source, reqs[2].Source})
}

func TestSeenIsBounded(t *testing.T) {
	s := NewServer(StaticCredential(tokenA))
	for range maxSeen + 5 {
		s.record(Request{Method: "GET"})
	}
	got := s.Seen()
	require.Len(t, got, maxSeen)
	assert.Equal(t, 6, got[0].Seq, "the oldest go first")
	assert.Equal(t, maxSeen+5, got[len(got)-1].Seq)
}

// A create may carry bootstrap data (SPEC K5): the server keeps it with the
// resource and answers every request but GET .../bootstrap-data with its
// size and digest only, so a client that prints answers never prints it
// (X1); a second PUT does not replace it; the delete removes it.
func TestBootstrapData(t *testing.T) {
	srv := httptest.NewServer(NewServer(StaticCredential(tokenA)))
	defer srv.Close()
	const data = "I2Nsb3VkLWNvbmZpZwpib290c3RyYXAtc2VjcmV0LTdmMmE="

	code, body := call(t, srv, http.MethodPut, "/resources/m-1", tokenA, "env", `{"name":"m1","bootstrapData":"`+data+`","bootstrapFormat":"cloud-config"}`)
	require.Equal(t, http.StatusCreated, code, body)
	var res Resource
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	assert.Equal(t, len(data), res.BootstrapDataBytes)
	assert.Len(t, res.BootstrapDataSHA256, 64)
	assert.Equal(t, "cloud-config", res.BootstrapFormat)

	code, body = call(t, srv, http.MethodPut, "/resources/m-1", tokenA, "env", `{"name":"m1","bootstrapData":"b3RoZXI="}`)
	assert.Equal(t, http.StatusOK, code, body)
	var answers []string
	answers = append(answers, body)
	_, body = call(t, srv, http.MethodGet, "/resources/m-1", tokenA, "file", "")
	answers = append(answers, body)
	_, body = call(t, srv, http.MethodGet, "/resources", tokenA, "file", "")
	answers = append(answers, body)
	_, body = seen(t, srv)
	answers = append(answers, body)
	for _, a := range answers {
		assert.NotContains(t, a, data)
	}

	code, body = call(t, srv, http.MethodGet, "/resources/m-1/bootstrap-data", tokenA, "test", "")
	require.Equal(t, http.StatusOK, code, body)
	var got BootstrapData
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	assert.Equal(t, BootstrapData{BootstrapData: data, BootstrapFormat: "cloud-config"}, got, "the first create's data stays")

	code, _ = call(t, srv, http.MethodGet, "/resources/m-1/bootstrap-data", tokenB, "test", "")
	assert.Equal(t, http.StatusUnauthorized, code, "the data needs the credential")
	code, _ = call(t, srv, http.MethodPut, "/resources/m-1/bootstrap-data", tokenA, "test", `{"name":"x"}`)
	assert.Equal(t, http.StatusMethodNotAllowed, code)
	code, _ = call(t, srv, http.MethodPut, "/resources/m-2", tokenA, "env", `{"name":"m2","bootstrapData":"`+strings.Repeat("a", maxBootstrapData+1)+`"}`)
	assert.Equal(t, http.StatusBadRequest, code)

	code, _ = call(t, srv, http.MethodDelete, "/resources/m-1", tokenA, "file", "")
	require.Equal(t, http.StatusNoContent, code)
	code, _ = call(t, srv, http.MethodGet, "/resources/m-1/bootstrap-data", tokenA, "test", "")
	assert.Equal(t, http.StatusNotFound, code)
	code, _ = call(t, srv, http.MethodPut, "/resources/m-1", tokenA, "env", `{"name":"m1"}`)
	require.Equal(t, http.StatusCreated, code)
	_, body = call(t, srv, http.MethodGet, "/resources/m-1/bootstrap-data", tokenA, "test", "")
	assert.JSONEq(t, `{"bootstrapData":""}`, body, "a re-created resource starts without data")
}

// TestContentChangedBehindTheModulesBack: a create's content is kept and
// answered, and PATCH changes it (the fakecloud provider's update, and a
// test's change behind a module's back that a refresh reads as drift,
// SPEC O7); it needs the current credential like every other call.
func TestContentChangedBehindTheModulesBack(t *testing.T) {
	srv := httptest.NewServer(NewServer(StaticCredential(tokenA)))
	defer srv.Close()
	content := func(body string) string {
		t.Helper()
		var res Resource
		require.NoError(t, json.Unmarshal([]byte(body), &res), body)
		return res.Content
	}

	code, body := call(t, srv, http.MethodPut, "/resources/r-drift", tokenA, "env", `{"name":"drift","content":"as the module says"}`)
	require.Equal(t, http.StatusCreated, code, body)
	assert.Equal(t, "as the module says", content(body))
	code, body = call(t, srv, http.MethodGet, "/resources/r-drift", tokenA, "file", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "as the module says", content(body))

	code, body = call(t, srv, http.MethodPatch, "/resources/r-drift", tokenA, "test", `{"content":"changed behind its back"}`)
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "changed behind its back", content(body))
	code, body = call(t, srv, http.MethodGet, "/resources/r-drift", tokenA, "file", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "changed behind its back", content(body))
	require.Len(t, listResources(t, srv), 1)

	for _, tc := range []struct {
		name, path, token, body string
		want                    int
	}{
		{"another credential", "/resources/r-drift", tokenB, `{"content":"x"}`, http.StatusUnauthorized},
		{"no such resource", "/resources/r-none", tokenA, `{"content":"x"}`, http.StatusNotFound},
		{"no content", "/resources/r-drift", tokenA, `{}`, http.StatusBadRequest},
		{"unknown field", "/resources/r-drift", tokenA, `{"content":"x","name":"y"}`, http.StatusBadRequest},
		{"too long", "/resources/r-drift", tokenA, `{"content":"` + strings.Repeat("x", maxContent+1) + `"}`, http.StatusBadRequest},
		{"the collection", "/resources", tokenA, `{"content":"x"}`, http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, srv, http.MethodPatch, tc.path, tc.token, "test", tc.body)
			assert.Equal(t, tc.want, code, body)
		})
	}
	code, body = call(t, srv, http.MethodGet, "/resources/r-drift", tokenA, "file", "")
	require.Equal(t, http.StatusOK, code, body)
	assert.Equal(t, "changed behind its back", content(body), "a refused PATCH changed the content")

	code, body = call(t, srv, http.MethodPost, "/resources", tokenA, "env", `{"name":"big","content":"`+strings.Repeat("x", maxContent+1)+`"}`)
	assert.Equal(t, http.StatusBadRequest, code, body)
}

// listResources lists srv's resources through the API.
func listResources(t *testing.T, srv *httptest.Server) []Resource {
	t.Helper()
	code, body := call(t, srv, http.MethodGet, "/resources", tokenA, "test", "")
	require.Equal(t, http.StatusOK, code, body)
	var out struct {
		Resources []Resource `json:"resources"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	return out.Resources
}
