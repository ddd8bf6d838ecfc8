// Package fakecloud is a small in-memory "cloud" for tests (issue 12): it
// keeps resources, accepts a request only with the current credential, and
// says what it saw. The end-to-end test uses it to prove which credential a
// Terraform Job used and through which path it got it (SPEC J2: environment
// and file; R3: a running Job's file follows a rotation, its environment does
// not).
//
// The expected credential comes from a file re-read on every request (a
// mounted Secret: a rotation is seen as soon as the kubelet refreshes the
// file) or from an environment variable read once at start. The server
// remembers every credential value it has expected so far, as a SHA-256
// digest only, so it can tell a client that used an older one ("previous")
// from one that used something it never expected ("unknown"). Nothing it
// logs or answers contains a credential or a digest of one (SPEC X1): only
// "current", "previous", "unknown" or "none" and the generation number
// (1 for the first value seen, 2 after the first rotation, ...).
//
// API (JSON):
//
//	POST   /resources            {"name": "n"}            -> 201 {"id": "r-1", ...}
//	PUT    /resources/{id}       {"name": "n"}            -> 201 created, 200 already there
//	GET    /resources/{id}                                -> 200 or 404
//	GET    /resources/{id}/bootstrap-data                 -> 200 {"bootstrapData": "...", "bootstrapFormat": "..."}
//	PATCH  /resources/{id}       {"content": "c"}         -> 200 or 404
//	DELETE /resources/{id}                                -> 204 or 404
//	GET    /resources                                     -> 200 {"resources": [...]}
//	GET    /whoami                                        -> 200 {"credential": "current", "generation": 2}
//	GET    /seen                 (no credential needed)   -> 200 {"requests": [...]}
//	GET    /healthz              (no credential needed)   -> 200 ok
//
// A create (POST or PUT) may carry "bootstrapData" and "bootstrapFormat", as
// a machine a real cloud creates takes its user data (SPEC K5): the server
// keeps them with the resource, and answers with the data's size and
// SHA-256 only. Only GET /resources/{id}/bootstrap-data returns the data
// itself, for a test to check it arrived intact; the module's client never
// asks for it, so bootstrap data never reaches a Job's log through an
// answer (X1).
//
// A create may also carry "content", and PATCH sets it: the attribute the
// fakecloud provider (hack/tools/fakecloud-provider) reads back on refresh,
// so a test that PATCHes a resource behind a module's back makes drift
// (SPEC O7, issue 24).
//
// A client authenticates with "Authorization: Bearer <credential>" and says
// where it took the credential from with "X-Credential-Source" (for example
// "env" or "file"); the server records that word, it does not check it.
package fakecloud

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
)

// SourceHeader is the request header naming where the client took its
// credential from.
const SourceHeader = "X-Credential-Source"

// Credential classes recorded for a request.
const (
	// CredentialCurrent: the credential the server expects now.
	CredentialCurrent = "current"
	// CredentialPrevious: a credential the server expected earlier.
	CredentialPrevious = "previous"
	// CredentialUnknown: a credential the server never expected.
	CredentialUnknown = "unknown"
	// CredentialNone: no credential in the request.
	CredentialNone = "none"
)

// maxSeen bounds the audit log: the oldest entries go first.
const maxSeen = 10000

// idPattern is what a resource id may look like (a DNS label).
var idPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// sourcePattern bounds what the server records of X-Credential-Source.
var sourcePattern = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)

// CredentialSource returns the credential the server expects now.
type CredentialSource func() (string, error)

// FileCredential reads the credential from path on every call, so a
// rotation of a mounted Secret is seen without a restart. Surrounding white
// space is ignored (clients trim it too).
func FileCredential(path string) CredentialSource {
	return func() (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		return strings.TrimSpace(string(b)), nil
	}
}

// StaticCredential always expects value.
func StaticCredential(value string) CredentialSource {
	v := strings.TrimSpace(value)
	return func() (string, error) { return v, nil }
}

// Server is the fake cloud. Create it with NewServer.
type Server struct {
	credential CredentialSource
	now        func() time.Time

	mu sync.Mutex
	// history holds the SHA-256 of every credential expected so far, oldest
	// first; the last is the current one.
	history   [][sha256.Size]byte
	resources map[string]Resource
	// bootstrap holds each resource's bootstrap data, by id.
	bootstrap map[string]string
	nextID    int
	seen      []Request
	seq       int
}

// NewServer returns a fake cloud expecting the credential from source.
func NewServer(source CredentialSource) *Server {
	return &Server{credential: source, now: time.Now, resources: map[string]Resource{}, bootstrap: map[string]string{}}
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/healthz":
		_, _ = w.Write([]byte("ok\n"))
		return
	case r.URL.Path == "/seen":
		if r.Method != http.MethodGet {
			httpError(w, http.StatusMethodNotAllowed, "use GET")
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"requests": s.Seen()})
		return
	}

	rec := Request{Method: r.Method, Path: r.URL.Path, Source: recordedSource(r.Header.Get(SourceHeader))}
	status := s.serve(w, r, &rec)
	rec.Status = status
	s.record(rec)
}

// serve answers an API request and fills rec; it returns the status written.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, rec *Request) int {
	id, isItem, dataPath, ok := route(r.URL.Path)
	if !ok {
		return httpError(w, http.StatusNotFound, "no such path")
	}
	rec.ID = id
	if id != "" && !idPattern.MatchString(id) {
		rec.ID = ""
		return httpError(w, http.StatusBadRequest, "invalid resource id: want a DNS label")
	}

	class, generation, err := s.authenticate(r)
	rec.Credential, rec.Generation = class, generation
	if err != nil {
		return httpError(w, http.StatusServiceUnavailable, "the fake cloud cannot read its own credential")
	}
	if class != CredentialCurrent {
		w.Header().Set("WWW-Authenticate", `Bearer realm="fakecloud"`)
		return httpError(w, http.StatusUnauthorized, "credential is "+class)
	}
	rec.Matched = true

	if r.URL.Path == "/whoami" {
		if r.Method != http.MethodGet {
			return httpError(w, http.StatusMethodNotAllowed, "use GET")
		}
		return writeJSON(w, http.StatusOK, map[string]any{"credential": class, "generation": generation})
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case dataPath:
		if r.Method != http.MethodGet {
			return httpError(w, http.StatusMethodNotAllowed, "use GET")
		}
		res, exists := s.resources[id]
		if !exists {
			return httpError(w, http.StatusNotFound, "no such resource")
		}
		return writeJSON(w, http.StatusOK, BootstrapData{BootstrapData: s.bootstrap[id], BootstrapFormat: res.BootstrapFormat})
	case !isItem && r.Method == http.MethodGet:
		list := make([]Resource, 0, len(s.resources))
		for _, res := range s.resources {
			list = append(list, res)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		return writeJSON(w, http.StatusOK, map[string]any{"resources": list})
	case !isItem && r.Method == http.MethodPost:
		body, err := decodeCreate(r)
		if err != nil {
			return httpError(w, http.StatusBadRequest, err.Error())
		}
		for {
			s.nextID++
			id = fmt.Sprintf("r-%d", s.nextID)
			if _, taken := s.resources[id]; !taken {
				break
			}
		}
		rec.ID = id
		return writeJSON(w, http.StatusCreated, s.create(id, body, generation))
	case isItem && r.Method == http.MethodPut:
		body, err := decodeCreate(r)
		if err != nil {
			return httpError(w, http.StatusBadRequest, err.Error())
		}
		if res, exists := s.resources[id]; exists {
			// The first create's bootstrap data stays, as a machine keeps
			// the user data it booted with.
			if res.Name != body.Name {
				return httpError(w, http.StatusConflict, "resource exists with another name")
			}
			return writeJSON(w, http.StatusOK, res)
		}
		return writeJSON(w, http.StatusCreated, s.create(id, body, generation))
	case isItem && r.Method == http.MethodGet:
		res, exists := s.resources[id]
		if !exists {
			return httpError(w, http.StatusNotFound, "no such resource")
		}
		return writeJSON(w, http.StatusOK, res)
	case isItem && r.Method == http.MethodPatch:
		return s.patch(w, r, id)
	case isItem && r.Method == http.MethodDelete:
		if _, exists := s.resources[id]; !exists {
			return httpError(w, http.StatusNotFound, "no such resource")
		}
		delete(s.resources, id)
		delete(s.bootstrap, id)
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	default:
		return httpError(w, http.StatusMethodNotAllowed, "method not allowed")
	}
}

// create stores a new resource; s.mu is held.
func (s *Server) create(id string, body createBody, generation int) Resource {
	res := Resource{ID: id, Name: body.Name, Created: s.now(), CreatedWithGeneration: generation, Content: body.Content}
	if body.BootstrapData != "" {
		sum := sha256.Sum256([]byte(body.BootstrapData))
		res.BootstrapDataBytes = len(body.BootstrapData)
		res.BootstrapDataSHA256 = hex.EncodeToString(sum[:])
		res.BootstrapFormat = body.BootstrapFormat
		s.bootstrap[id] = body.BootstrapData
	}
	s.resources[id] = res
	return res
}

// route splits an API path: "/resources" (id "", isItem false),
// "/resources/{id}" (isItem true), "/resources/{id}/bootstrap-data"
// (dataPath true) or "/whoami".
func route(path string) (id string, isItem, dataPath, ok bool) {
	switch {
	case path == "/resources" || path == "/whoami":
		return "", false, false, true
	case strings.HasPrefix(path, "/resources/"):
		id = strings.TrimPrefix(path, "/resources/")
		if rest, found := strings.CutSuffix(id, "/bootstrap-data"); found {
			return rest, false, true, !strings.Contains(rest, "/")
		}
		return id, true, false, !strings.Contains(id, "/")
	}
	return "", false, false, false
}

// authenticate classifies the request's credential against the current one
// and the history. It updates the history when the expected credential has
// changed since the last request.
func (s *Server) authenticate(r *http.Request) (class string, generation int, err error) {
	want, err := s.credential()
	if err != nil || want == "" {
		if err == nil {
			err = errors.New("empty credential")
		}
		return CredentialNone, 0, err
	}
	wantSum := sha256.Sum256([]byte(want))

	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.history); n == 0 || s.history[n-1] != wantSum {
		// A value expected before and back again (a rotation undone) is a
		// new generation too: it is the current one now.
		s.history = append(s.history, wantSum)
	}

	got, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	if !found || got == "" {
		return CredentialNone, 0, nil
	}
	gotSum := sha256.Sum256([]byte(got))
	for i := len(s.history) - 1; i >= 0; i-- {
		if subtle.ConstantTimeCompare(gotSum[:], s.history[i][:]) == 1 {
			if i == len(s.history)-1 {
				return CredentialCurrent, i + 1, nil
			}
			return CredentialPrevious, i + 1, nil
		}
	}
	return CredentialUnknown, 0, nil
}

func (s *Server) record(rec Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	rec.Seq = s.seq
	rec.Time = s.now()
	s.seen = append(s.seen, rec)
	if len(s.seen) > maxSeen {
		s.seen = append([]Request(nil), s.seen[len(s.seen)-maxSeen:]...)
	}
}

// Seen returns a copy of the recorded requests, oldest first.
func (s *Server) Seen() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request{}, s.seen...)
}

// Resources returns a copy of the resources, sorted by id.
func (s *Server) Resources() []Resource {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := make([]Resource, 0, len(s.resources))
	for _, res := range s.resources {
		list = append(list, res)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	return list
}

// BootstrapDataOf returns the bootstrap data resource id was created with
// (false when there is no such resource).
func (s *Server) BootstrapDataOf(id string) (BootstrapData, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, ok := s.resources[id]
	if !ok {
		return BootstrapData{}, false
	}
	return BootstrapData{BootstrapData: s.bootstrap[id], BootstrapFormat: res.BootstrapFormat}, true
}

func recordedSource(v string) string {
	if v == "" || sourcePattern.MatchString(v) {
		return v
	}
	return "invalid"
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}

func httpError(w http.ResponseWriter, status int, msg string) int {
	return writeJSON(w, status, map[string]string{"error": msg})
}
