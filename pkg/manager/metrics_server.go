package manager

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/admission"
	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/pkg/version"
)

// Scrape reviews (SPEC B4). Prometheus scrapes every 15-30 s with the same
// token, so an allow kept for scrapeCacheTTL spares nearly every review, and
// taking a permission away takes effect within it.
const (
	scrapeCacheTTL  = 30 * time.Second
	scrapeCacheSize = 256
	// scrapeReviewTimeout bounds the TokenReview and SubjectAccessReview of
	// one request together.
	scrapeReviewTimeout = 10 * time.Second
	// The reviews run on a client with its own budget, so anyone who can
	// reach the port and sends made-up tokens spends this, never the
	// controllers' --kube-api-qps.
	scrapeReviewQPS   = 5
	scrapeReviewBurst = 10
)

// metricsServer serves /metrics: over HTTPS to authenticated and authorized
// callers (SPEC B4), or, with --metrics-secure=false, over plain HTTP to
// anyone. No handler resets metrics, whichever the mode.
type metricsServer struct {
	addr    string
	handler http.Handler
	// tlsConfig is nil for plain HTTP.
	tlsConfig *tls.Config
	// certs reloads --metrics-cert-dir; nil with a self-signed certificate
	// or plain HTTP.
	certs           *admission.CertReloader
	shutdownTimeout time.Duration
}

// newMetricsServer builds the /metrics server, or returns nil when
// --metrics-bind-address disables it. It fails when --metrics-cert-dir holds
// no valid pair.
func newMetricsServer(ctx context.Context, cfg *rest.Config, o *Options) (*metricsServer, error) {
	if o.MetricsBindAddress == "" || o.MetricsBindAddress == "0" {
		return nil, nil
	}
	logger := klog.FromContext(ctx)
	s := &metricsServer{addr: o.MetricsBindAddress, shutdownTimeout: o.ShutdownTimeout}
	if !o.MetricsSecure {
		logger.Info("WARNING: serving /metrics over plain HTTP without authentication (--metrics-secure=false); anyone who reaches the port reads every metric. For local debugging only (SPEC B4)",
			"address", o.MetricsBindAddress)
		if o.Profiling {
			logger.Info("WARNING: --profiling with --metrics-secure=false: anyone who reaches the port can profile the manager and read its goroutines' stacks")
		}
		s.handler = metricsHandler(nil, o.Profiling)
		return s, nil
	}

	reviewCfg := rest.CopyConfig(cfg)
	reviewCfg.QPS, reviewCfg.Burst = scrapeReviewQPS, scrapeReviewBurst
	reviewCfg.RateLimiter = nil
	// Told apart from the controllers' and the webhook's in audit logs.
	reviewCfg.UserAgent = version.UserAgent() + " metrics"
	reviewClient, err := kubernetes.NewForConfig(reviewCfg)
	if err != nil {
		return nil, err
	}
	s.handler = metricsHandler(newScrapeAuth(logger.WithName("metrics"), reviewClient, clock.RealClock{}), o.Profiling)

	s.tlsConfig = &tls.Config{
		MinVersion: tls.VersionTLS12,
		// HTTP/1.1 only, like the webhook: a scrape needs nothing more.
		NextProtos: []string{"http/1.1"},
	}
	if o.MetricsCertDir != "" {
		if s.certs, err = admission.NewCertReloader(o.MetricsCertDir, "metrics serving certificate"); err != nil {
			return nil, fmt.Errorf("metrics server (--metrics-cert-dir=%s): %w", o.MetricsCertDir, err)
		}
		s.tlsConfig.GetCertificate = s.certs.GetCertificate
		return s, nil
	}
	cert, err := selfSignedCertificate()
	if err != nil {
		return nil, fmt.Errorf("metrics server: %w", err)
	}
	s.tlsConfig.Certificates = []tls.Certificate{cert}
	logger.Info("Serving /metrics with a self-signed certificate generated at start; give --metrics-cert-dir for one scrapers can verify")
	return s, nil
}

// selfSignedCertificate is a serving certificate made in memory for this
// process: the scraper authenticates to the manager with its token, and a
// scraper that must verify the manager is given --metrics-cert-dir.
func selfSignedCertificate() (tls.Certificate, error) {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && h != "" && h != "localhost" {
		hosts = append([]string{h}, hosts...)
	}
	_, certPEM, keyPEM, err := certs.Generate(hosts, certs.DefaultValidity)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

// healthz reports a --metrics-cert-dir pair that can no longer be loaded (the
// last good one keeps serving).
func (s *metricsServer) healthz() error {
	if s.certs == nil {
		return nil
	}
	return s.certs.Healthz()
}

// run serves until ctx is done, then shuts down gracefully.
func (s *metricsServer) run(ctx context.Context) error {
	l, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("metrics server: %w", err)
	}
	if s.tlsConfig == nil {
		return serve(ctx, "metrics", l, s.handler, s.shutdownTimeout)
	}
	if s.certs != nil {
		reloadCtx, stopReload := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() { s.certs.Run(reloadCtx, 0) })
		defer func() {
			stopReload()
			wg.Wait()
		}()
	}
	return serve(ctx, "metrics (https)", tls.NewListener(l, s.tlsConfig), s.handler, s.shutdownTimeout)
}

// metricsHandler serves the legacy registry's /metrics, read-only, behind
// auth when it is not nil. Never HandlerWithReset: a DELETE from anyone who
// reaches the port would zero the counters alerts watch (B4). With
// profiling, it serves Go's profiles under /debug/pprof/ behind the same
// auth: the SubjectAccessReview asks for get on the profile's own path, so
// RBAC grants them apart from /metrics (nonResourceURLs "/debug/pprof/*").
func metricsHandler(auth *scrapeAuth, profiling bool) http.Handler {
	guard := func(h http.Handler) http.Handler {
		if auth != nil {
			h = auth.wrap(h)
		}
		return readOnly(h)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", guard(legacyregistry.Handler()))
	if profiling {
		mux.Handle("/debug/pprof/", guard(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", guard(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", guard(sampling(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", guard(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", guard(sampling(pprof.Trace)))
	}
	return mux
}

// samplingWriteTimeout is the write deadline of a CPU profile or trace,
// set once the request has passed its reviews: the server's 30 s deadline
// runs from the request's headers, and the reviews may take 10 s of it.
// pprof itself refuses a duration of 30 s or more (the server's
// WriteTimeout), so 29 s always fits.
const samplingWriteTimeout = 45 * time.Second

// sampling serves a profile that samples for the request's seconds.
func sampling(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(samplingWriteTimeout))
		h(w, r)
	})
}

// readOnly refuses every method but GET and HEAD, before any review: a
// refusal that costs the API server nothing.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: "+r.URL.Path+" is read-only", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// scrapeAuth lets a request through only when its bearer token passes a
// TokenReview and its user a SubjectAccessReview for get on the non-resource
// URL of the request (/metrics): the convention of kube-rbac-proxy and
// controller-runtime's WithAuthenticationAndAuthorization, so Prometheus is
// granted access with an ordinary ClusterRole (SPEC B4). A review that fails
// is a 503, never an allow.
type scrapeAuth struct {
	logger klog.Logger
	tokens authenticationv1client.TokenReviewInterface
	access authorizationv1client.SubjectAccessReviewInterface
	// allowed remembers tokens that passed both reviews, briefly.
	allowed *allowCache
	timeout time.Duration
}

func newScrapeAuth(logger klog.Logger, kube kubernetes.Interface, clk clock.PassiveClock) *scrapeAuth {
	return &scrapeAuth{
		logger:  logger,
		tokens:  kube.AuthenticationV1().TokenReviews(),
		access:  kube.AuthorizationV1().SubjectAccessReviews(),
		allowed: newAllowCache(clk, scrapeCacheTTL, scrapeCacheSize),
		timeout: scrapeReviewTimeout,
	}
}

func (a *scrapeAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, msg := a.review(r)
		if code != http.StatusOK {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="captf-metrics"`)
			}
			http.Error(w, msg, code)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// review returns 200 when the request may read its path, else the status and
// message to refuse it with. Neither the token nor a review's error text goes
// into the answer or the log: the token is a credential (X1).
func (a *scrapeAuth) review(r *http.Request) (int, string) {
	token, ok := bearerToken(r)
	if !ok {
		return http.StatusUnauthorized, "unauthorized: a bearer token is required"
	}
	path := r.URL.Path
	key := sha256.Sum256([]byte(path + "\x00" + token))
	if a.allowed.get(key) {
		return http.StatusOK, ""
	}

	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	tr, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		a.logger.Error(err, "TokenReview failed; refusing the scrape", "remoteAddr", r.RemoteAddr)
		return http.StatusServiceUnavailable, "authentication unavailable, retry later"
	}
	if !tr.Status.Authenticated {
		a.logger.V(2).Info("Refused a scrape: token not authenticated", "remoteAddr", r.RemoteAddr)
		return http.StatusUnauthorized, "unauthorized: invalid bearer token"
	}
	user := tr.Status.User

	sar, err := a.access.Create(ctx, metricsAccessReview(user, path), metav1.CreateOptions{})
	if err != nil {
		a.logger.Error(err, "SubjectAccessReview failed; refusing the scrape", "user", admission.ClipName(user.Username), "remoteAddr", r.RemoteAddr)
		return http.StatusServiceUnavailable, "authorization unavailable, retry later"
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		a.logger.V(2).Info("Refused a scrape: not authorized", "user", admission.ClipName(user.Username), "path", path, "remoteAddr", r.RemoteAddr)
		return http.StatusForbidden, fmt.Sprintf("forbidden: user %q may not get %s", user.Username, path)
	}
	a.allowed.add(key)
	return http.StatusOK, ""
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// metricsAccessReview asks whether user may get the non-resource URL path.
func metricsAccessReview(user authenticationv1.UserInfo, path string) *authorizationv1.SubjectAccessReview {
	sar := admission.SubjectAccessReviewFor(user)
	sar.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}
	return sar
}

// allowCache remembers, for ttl, the hashes of tokens (with the path) that
// passed both reviews. Only allows are kept: a refusal or a failed review is
// asked again next time. At most size entries: when full, expired entries go
// first, then arbitrary ones.
type allowCache struct {
	clock clock.PassiveClock
	ttl   time.Duration
	size  int

	mu      sync.Mutex
	expires map[[sha256.Size]byte]time.Time
}

func newAllowCache(clk clock.PassiveClock, ttl time.Duration, size int) *allowCache {
	return &allowCache{clock: clk, ttl: ttl, size: size, expires: map[[sha256.Size]byte]time.Time{}}
}

func (c *allowCache) get(key [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	exp, ok := c.expires[key]
	if !ok {
		return false
	}
	if !c.clock.Now().Before(exp) {
		delete(c.expires, key)
		return false
	}
	return true
}

func (c *allowCache) add(key [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if _, ok := c.expires[key]; !ok && len(c.expires) >= c.size {
		for k, exp := range c.expires {
			if !now.Before(exp) {
				delete(c.expires, k)
			}
		}
		for k := range c.expires {
			if len(c.expires) < c.size {
				break
			}
			delete(c.expires, k)
		}
	}
	c.expires[key] = now.Add(c.ttl)
}
