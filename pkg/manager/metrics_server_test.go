package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	captfmetrics "github.com/captf/captf/pkg/metrics"
)

// The reviewers' world: tokens and who may get /metrics.
const (
	tokenReader   = "reader-token"
	tokenStranger = "stranger-token"
	userReader    = "system:serviceaccount:monitoring:prometheus"
	userStranger  = "alice"
)

// reviews is a fake API server's TokenReview and SubjectAccessReview
// endpoints, counting calls and keeping the last SubjectAccessReview.
type reviews struct {
	mu            sync.Mutex
	tokenReviews  int
	accessReviews int
	lastAccess    *authorizationv1.SubjectAccessReview
	tokenErr      error
	accessErr     error
	allowedUsers  map[string]bool
	// allowedPaths are the non-resource URLs allowed users may get; a
	// trailing "*" matches a prefix, as in RBAC.
	allowedPaths []string
	usersByToken map[string]authenticationv1.UserInfo
}

func newReviews() *reviews {
	return &reviews{
		allowedUsers: map[string]bool{userReader: true},
		allowedPaths: []string{"/metrics"},
		usersByToken: map[string]authenticationv1.UserInfo{
			tokenReader: {Username: userReader, UID: "uid-1", Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}},
			tokenStranger: {Username: userStranger, UID: "uid-2", Groups: []string{"system:authenticated"}},
		},
	}
}

func (rv *reviews) client() *fake.Clientset {
	c := fake.NewClientset()
	c.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv.mu.Lock()
		defer rv.mu.Unlock()
		rv.tokenReviews++
		if rv.tokenErr != nil {
			return true, nil, rv.tokenErr
		}
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if u, ok := rv.usersByToken[tr.Spec.Token]; ok {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u}
		} else {
			tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
		}
		return true, tr, nil
	})
	c.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		rv.mu.Lock()
		defer rv.mu.Unlock()
		rv.accessReviews++
		if rv.accessErr != nil {
			return true, nil, rv.accessErr
		}
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		rv.lastAccess = sar.DeepCopy()
		nr := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = rv.allowedUsers[sar.Spec.User] && nr != nil && rv.pathAllowed(nr.Path) && nr.Verb == "get"
		return true, sar, nil
	})
	return c
}

func (rv *reviews) pathAllowed(path string) bool {
	for _, p := range rv.allowedPaths {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(path, prefix) || p == path {
			return true
		}
	}
	return false
}

func (rv *reviews) counts() (tokens, access int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.tokenReviews, rv.accessReviews
}

type scrapeFixture struct {
	t       *testing.T
	reviews *reviews
	clock   *clocktesting.FakeClock
	handler http.Handler
}

func newScrapeFixture(t *testing.T) *scrapeFixture {
	logger, _ := ktesting.NewTestContext(t)
	rv := newReviews()
	clk := clocktesting.NewFakeClock(time.Now())
	return &scrapeFixture{t: t, reviews: rv, clock: clk, handler: metricsHandler(newScrapeAuth(logger, rv.client(), clk), false)}
}

// do sends method /metrics with token (none when empty).
func (f *scrapeFixture) do(method, token string) (int, string) {
	f.t.Helper()
	r := httptest.NewRequest(method, "https://manager:8443/metrics", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.handler.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

// TestMetricsAuthentication: SPEC B4, the TokenReview step.
func TestMetricsAuthentication(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header string
	}{
		{"no header", ""},
		{"empty bearer", "Bearer "},
		{"basic auth", "Basic cmVhZGVyOnB3"},
		{"unknown token", "Bearer not-a-token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newScrapeFixture(t)
			r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			w := httptest.NewRecorder()
			f.handler.ServeHTTP(w, r)
			assert.Equal(t, http.StatusUnauthorized, w.Code, w.Body.String())
			assert.Contains(t, w.Header().Get("WWW-Authenticate"), "Bearer")
			assert.NotContains(t, w.Body.String(), "captf_", "a refusal must not carry metrics")
			assert.NotContains(t, w.Body.String(), "not-a-token", "a refusal must not echo the token")
			_, access := f.reviews.counts()
			assert.Zero(t, access, "no SubjectAccessReview without an authenticated user")
		})
	}
}

// TestMetricsAuthorization: SPEC B4, the SubjectAccessReview step, with
// the user's name, UID, groups and extra, for get on /metrics.
func TestMetricsAuthorization(t *testing.T) {
	f := newScrapeFixture(t)

	code, body := f.do(http.MethodGet, tokenStranger)
	assert.Equal(t, http.StatusForbidden, code, body)
	assert.NotContains(t, body, "captf_")

	captfmetrics.Register()
	code, body = f.do(http.MethodGet, tokenReader)
	require.Equal(t, http.StatusOK, code, body)
	assert.True(t, strings.Contains(body, "captf_mirror_staleness_seconds"), "/metrics lacks captf_mirror_staleness_seconds")

	f.reviews.mu.Lock()
	spec := f.reviews.lastAccess.Spec
	f.reviews.mu.Unlock()
	assert.Equal(t, userReader, spec.User)
	assert.Equal(t, "uid-1", spec.UID)
	assert.Equal(t, []string{"system:serviceaccounts", "system:authenticated"}, spec.Groups)
	assert.Equal(t, map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prometheus-0"}}, spec.Extra)
	assert.Equal(t, &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}, spec.NonResourceAttributes)
	assert.Nil(t, spec.ResourceAttributes)

	// HEAD is a read too.
	code, _ = f.do(http.MethodHead, tokenReader)
	assert.Equal(t, http.StatusOK, code)
}

// TestMetricsNeverReset: no method resets or writes metrics, whoever asks
// (SPEC B4): HandlerWithReset zeroed every counter on DELETE.
func TestMetricsNeverReset(t *testing.T) {
	captfmetrics.Register()
	captfmetrics.MirrorWrites.WithLabelValues(captfmetrics.WriteRefused).Add(3)
	want := sampleLine(t, scrape(t, newScrapeFixture(t)), `captf_mirror_writes_total{result="refused"}`)

	for name, handler := range map[string]func(*testing.T) *scrapeFixture{
		"secure": newScrapeFixture,
		"plain": func(t *testing.T) *scrapeFixture {
			return &scrapeFixture{t: t, reviews: newReviews(), handler: metricsHandler(nil, false)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := handler(t)
			for _, method := range []string{http.MethodDelete, http.MethodPost, http.MethodPut, http.MethodPatch} {
				code, body := f.do(method, tokenReader)
				assert.Equal(t, http.StatusMethodNotAllowed, code, "%s /metrics: %s", method, body)
			}
			tokens, access := f.reviews.counts()
			assert.Zero(t, tokens+access, "a refused method costs no review")
			assert.Equal(t, want, sampleLine(t, scrape(t, newScrapeFixture(t)), `captf_mirror_writes_total{result="refused"}`),
				"the counter changed after DELETE")
		})
	}
}

// TestMetricsReviewErrorsNeverAllow: an API server that cannot answer a
// review gets the scrape refused with 503, and nothing is remembered as
// allowed (SPEC B4).
func TestMetricsReviewErrorsNeverAllow(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tokenErr   error
		accessErr  error
		wantTokens int
		wantAccess int
	}{
		{name: "TokenReview fails", tokenErr: errors.New("connection refused"), wantTokens: 2, wantAccess: 1},
		{name: "SubjectAccessReview fails", accessErr: errors.New(`subjectaccessreviews.authorization.k8s.io is forbidden`), wantTokens: 2, wantAccess: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newScrapeFixture(t)
			f.reviews.tokenErr, f.reviews.accessErr = tc.tokenErr, tc.accessErr
			code, body := f.do(http.MethodGet, tokenReader)
			assert.Equal(t, http.StatusServiceUnavailable, code, body)
			assert.NotContains(t, body, "captf_")
			assert.NotContains(t, body, tokenReader)

			// Once the API server answers, the request is reviewed afresh.
			f.reviews.mu.Lock()
			f.reviews.tokenErr, f.reviews.accessErr = nil, nil
			f.reviews.mu.Unlock()
			code, body = f.do(http.MethodGet, tokenReader)
			assert.Equal(t, http.StatusOK, code, body)
			tokens, access := f.reviews.counts()
			assert.Equal(t, tc.wantTokens, tokens, "TokenReviews")
			assert.Equal(t, tc.wantAccess, access, "SubjectAccessReviews")
		})
	}
}

// TestMetricsReviewCache: an allow is remembered briefly, per token, so a
// scrape every 15 s costs few reviews; refusals are not remembered, and the
// entry expires so a revoked permission takes effect (SPEC B4).
func TestMetricsReviewCache(t *testing.T) {
	f := newScrapeFixture(t)
	for range 3 {
		code, body := f.do(http.MethodGet, tokenReader)
		require.Equal(t, http.StatusOK, code, body)
	}
	tokens, access := f.reviews.counts()
	assert.Equal(t, 1, tokens, "TokenReviews for three scrapes within the TTL")
	assert.Equal(t, 1, access, "SubjectAccessReviews for three scrapes within the TTL")

	// A refusal is asked again: a binding made now takes effect at once.
	for range 2 {
		code, _ := f.do(http.MethodGet, tokenStranger)
		assert.Equal(t, http.StatusForbidden, code)
	}
	f.reviews.mu.Lock()
	f.reviews.allowedUsers[userStranger] = true
	f.reviews.mu.Unlock()
	code, _ := f.do(http.MethodGet, tokenStranger)
	assert.Equal(t, http.StatusOK, code)
	tokens, access = f.reviews.counts()
	assert.Equal(t, 4, tokens)
	assert.Equal(t, 4, access)

	// Revoked: still allowed within the TTL, refused after it.
	f.reviews.mu.Lock()
	delete(f.reviews.allowedUsers, userReader)
	f.reviews.mu.Unlock()
	code, _ = f.do(http.MethodGet, tokenReader)
	assert.Equal(t, http.StatusOK, code, "within the TTL")
	f.clock.Step(scrapeCacheTTL)
	code, _ = f.do(http.MethodGet, tokenReader)
	assert.Equal(t, http.StatusForbidden, code, "after the TTL")
}

func TestAllowCacheBounded(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	c := newAllowCache(clk, time.Minute, 4)
	key := func(i int) [32]byte { return [32]byte{byte(i)} }
	for i := range 10 {
		c.add(key(i))
		assert.True(t, c.get(key(i)), "the entry just added")
		assert.LessOrEqual(t, len(c.expires), 4)
	}
	clk.Step(time.Minute)
	assert.False(t, c.get(key(9)), "expired")
}

// TestMetricsServerTLS runs the server with its self-signed certificate:
// TLS 1.2+ only (SPEC B4, like X3), and the auth filter in front.
func TestMetricsServerTLS(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	o := NewOptions()
	o.MetricsBindAddress = addr
	s, err := newMetricsServer(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, o)
	require.NoError(t, err)
	require.NotNil(t, s.tlsConfig)
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()

	get := func(maxVersion uint16) (*http.Response, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MaxVersion: maxVersion}, //nolint:gosec // self-signed, the subject of the test
		}}
		var resp *http.Response
		var err error
		for range 100 { // the server binds in its goroutine
			if resp, err = c.Get("https://" + addr + "/metrics"); err == nil || !strings.Contains(err.Error(), "connection refused") {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		return resp, err
	}
	resp, err := get(tls.VersionTLS13)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "no token")
	assert.Equal(t, uint16(tls.VersionTLS13), resp.TLS.Version)
	require.NotEmpty(t, resp.TLS.PeerCertificates)
	assert.Contains(t, resp.TLS.PeerCertificates[0].IPAddresses[0].String(), "127.0.0.1")

	_, err = get(tls.VersionTLS11)
	assert.Error(t, err, "TLS 1.1 must be refused")

	// Plain HTTP on the TLS port gets no metrics.
	c := &http.Client{Timeout: 10 * time.Second}
	if resp, err := c.Get("http://" + addr + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.NotEqual(t, http.StatusOK, resp.StatusCode)
		assert.NotContains(t, string(b), "captf_")
	}
}

func TestMetricsOptions(t *testing.T) {
	o := NewOptions()
	assert.True(t, o.MetricsSecure, "secure by default (SPEC B4)")
	o.MetricsSecure = false
	o.MetricsCertDir = "/tmp/x"
	assert.ErrorContains(t, o.Validate(), "--metrics-cert-dir needs --metrics-secure=true")

	_, ctx := ktesting.NewTestContext(t)
	o = NewOptions()
	o.MetricsCertDir = t.TempDir() // empty: no pair
	_, err := newMetricsServer(ctx, &rest.Config{Host: "https://127.0.0.1:1"}, o)
	assert.ErrorContains(t, err, "--metrics-cert-dir")
}

func scrape(t *testing.T, f *scrapeFixture) string {
	t.Helper()
	code, body := f.do(http.MethodGet, tokenReader)
	require.Equal(t, http.StatusOK, code, body)
	return body
}

// sampleLine returns the value of the sample whose series is prefix.
func sampleLine(t *testing.T, body, series string) float64 {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			require.NoError(t, err)
			return v
		}
	}
	t.Fatalf("no sample %s in /metrics", series)
	return 0
}

// TestProfilingBehindMetricsAuth: --profiling serves /debug/pprof/ on the
// metrics server only, and only to a caller whose SubjectAccessReview for
// the profile's own path is allowed: being allowed /metrics is not enough
// (SPEC B4's convention, applied to the profiles).
func TestProfilingBehindMetricsAuth(t *testing.T) {
	get := func(h http.Handler, method, path, token string) int {
		r := httptest.NewRequest(method, "https://manager:8443"+path, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	logger, _ := ktesting.NewTestContext(t)
	newHandler := func(rv *reviews, profiling bool) http.Handler {
		return metricsHandler(newScrapeAuth(logger, rv.client(), clocktesting.NewFakeClock(time.Now())), profiling)
	}

	t.Run("off by default", func(t *testing.T) {
		rv := newReviews()
		rv.allowedPaths = []string{"/metrics", "/debug/pprof/*"}
		h := newHandler(rv, NewOptions().Profiling)
		assert.Equal(t, http.StatusNotFound, get(h, http.MethodGet, "/debug/pprof/heap", tokenReader))
		assert.Equal(t, http.StatusOK, get(h, http.MethodGet, "/metrics", tokenReader))
	})

	t.Run("allowed /metrics only", func(t *testing.T) {
		rv := newReviews()
		h := newHandler(rv, true)
		assert.Equal(t, http.StatusOK, get(h, http.MethodGet, "/metrics", tokenReader))
		assert.Equal(t, http.StatusForbidden, get(h, http.MethodGet, "/debug/pprof/heap", tokenReader))
		rv.mu.Lock()
		last := rv.lastAccess.Spec.NonResourceAttributes
		rv.mu.Unlock()
		require.NotNil(t, last)
		assert.Equal(t, "/debug/pprof/heap", last.Path, "the review asks for the profile's own path")
	})

	t.Run("allowed the profiles", func(t *testing.T) {
		rv := newReviews()
		rv.allowedPaths = []string{"/debug/pprof/*"}
		h := newHandler(rv, true)
		assert.Equal(t, http.StatusUnauthorized, get(h, http.MethodGet, "/debug/pprof/heap", ""))
		assert.Equal(t, http.StatusForbidden, get(h, http.MethodGet, "/debug/pprof/heap", tokenStranger))
		assert.Equal(t, http.StatusOK, get(h, http.MethodGet, "/debug/pprof/heap", tokenReader))
		assert.Equal(t, http.StatusOK, get(h, http.MethodGet, "/debug/pprof/goroutine?debug=1", tokenReader))
		assert.Equal(t, http.StatusMethodNotAllowed, get(h, http.MethodPost, "/debug/pprof/symbol", tokenReader))
		assert.Equal(t, http.StatusForbidden, get(h, http.MethodGet, "/metrics", tokenReader))
	})
}

// TestProfilingNeedsTheMetricsServer: --profiling with the metrics server
// off is refused at start, not silently ignored.
func TestProfilingNeedsTheMetricsServer(t *testing.T) {
	o := NewOptions()
	o.Profiling = true
	o.MetricsBindAddress = "0"
	err := o.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--profiling needs the metrics server")
}
