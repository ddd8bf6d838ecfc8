package admission

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Defaults of Options.
const (
	DefaultAddr               = ":9443"
	DefaultCertReloadInterval = 10 * time.Second
	DefaultShutdownTimeout    = 15 * time.Second
	// DefaultMaxInFlight caps concurrent requests (SPEC B5). A validator
	// answers in milliseconds (one SubjectAccessReview, lister reads), so 32
	// at once is far beyond what the API server replicas send in normal
	// operation, and small enough that a flood costs bounded memory.
	DefaultMaxInFlight = 32
	// retryAfterSeconds is the Retry-After of a request refused over the
	// cap. The API server's webhook client retries on a 429 that carries it.
	retryAfterSeconds = 1
)

// HTTP server limits. The API server's webhook calls last at most 30s and
// carry small headers; its client keeps idle connections for 90s, so the
// server keeps them longer and never closes one the client is about to reuse.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 35 * time.Second
	idleTimeout       = 120 * time.Second
	maxHeaderBytes    = 1 << 20
)

// Options configure a Server.
type Options struct {
	// Addr is the TCP address to listen on, for example ":9443" (the
	// default when empty) or "127.0.0.1:0" for a free port (see Server.Addr).
	Addr string
	// CertDir holds tls.crt and tls.key, typically a mounted
	// kubernetes.io/tls Secret; they are reloaded when they change.
	CertDir string
	// CertReloadInterval is how often the files in CertDir are checked;
	// DefaultCertReloadInterval when zero.
	CertReloadInterval time.Duration
	// ShutdownTimeout bounds how long Run waits for in-flight requests once
	// its context is done; DefaultShutdownTimeout when zero.
	ShutdownTimeout time.Duration
	// MaxInFlight caps the requests served at once (SPEC B5); one more is
	// answered 429 Too Many Requests with Retry-After at once, never queued.
	// DefaultMaxInFlight when zero.
	MaxInFlight int
	// ClientCAFile, when set, is a PEM bundle: every connection must then
	// present a client certificate that chains to it, or the TLS handshake
	// fails before any request is read (SPEC B14). The API server presents
	// one when its AdmissionConfiguration names a kubeconfig for this
	// webhook. Reloaded like the serving certificate.
	ClientCAFile string
}

// Server serves admission webhooks over TLS (SPEC X3, X4).
type Server struct {
	opts     Options
	listener net.Listener
	certs    *certSource
	// clientCAs is nil without Options.ClientCAFile.
	clientCAs *clientCASource
	srv       *http.Server
	started   atomic.Bool
}

// NewServer checks the routes, loads the serving certificate from
// opts.CertDir and listens on opts.Addr. It fails when a route is invalid or
// two share a path, when no valid certificate and key are in CertDir, or when
// the address cannot be bound. Call Run to serve.
func NewServer(opts Options, routes ...Route) (*Server, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(routes) == 0 {
		return nil, errors.New("admission webhook server: no routes given")
	}
	mux, err := newMux(routes)
	if err != nil {
		return nil, fmt.Errorf("admission webhook server: %w", err)
	}
	certs, err := newCertSource(opts.CertDir)
	if err != nil {
		return nil, fmt.Errorf("admission webhook server: %w", err)
	}
	var clientCAs *clientCASource
	if opts.ClientCAFile != "" {
		if clientCAs, err = newClientCASource(opts.ClientCAFile); err != nil {
			return nil, fmt.Errorf("admission webhook server: %w", err)
		}
	}
	listener, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("admission webhook server: listening on %s: %w", opts.Addr, err)
	}
	tlsConfig := serverTLS(certs, clientCAs)
	srv := &http.Server{
		Handler:           newInFlightLimit(opts.MaxInFlight, mux),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		TLSConfig:         tlsConfig,
		// A non-nil, empty map keeps net/http from enabling HTTP/2.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
	}
	return &Server{
		opts:      opts,
		listener:  tls.NewListener(listener, tlsConfig),
		certs:     certs,
		clientCAs: clientCAs,
		srv:       srv,
	}, nil
}

// withDefaults fills the unset options with their defaults and refuses
// negative ones and a missing certificate directory.
func (opts Options) withDefaults() (Options, error) {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.CertReloadInterval < 0 || opts.ShutdownTimeout < 0 || opts.MaxInFlight < 0 {
		return opts, errors.New("admission webhook server: negative CertReloadInterval, ShutdownTimeout or MaxInFlight")
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.CertReloadInterval == 0 {
		opts.CertReloadInterval = DefaultCertReloadInterval
	}
	if opts.ShutdownTimeout == 0 {
		opts.ShutdownTimeout = DefaultShutdownTimeout
	}
	if opts.CertDir == "" {
		return opts, errors.New("admission webhook server: no certificate directory given")
	}
	return opts, nil
}

// newMux serves each route at its path, refusing an invalid route and a
// path used twice.
func newMux(routes []Route) (*http.ServeMux, error) {
	mux := http.NewServeMux()
	seen := make(map[string]bool, len(routes))
	var errs []error
	for _, route := range routes {
		if err := route.validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[route.Path] {
			errs = append(errs, fmt.Errorf("route %s: path used twice", route.Path))
			continue
		}
		seen[route.Path] = true
		if err := handle(mux, route); err != nil {
			errs = append(errs, err)
		}
	}
	return mux, errors.Join(errs...)
}

// serverTLS is the server's TLS configuration: the reloaded serving
// certificate, HTTP/1.1 only (the API server's webhook client needs
// nothing more, and it keeps HTTP/2's stream-level attack surface, rapid
// reset, off a port every API server replica connects to), and with
// clientCAs a client certificate from the bundle in service at each
// handshake (SPEC B14: none, no request; the bundle may be reloaded).
func serverTLS(certs *certSource, clientCAs *clientCASource) *tls.Config {
	tlsConfig := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: certs.GetCertificate,
		NextProtos:     []string{"http/1.1"},
	}
	if clientCAs != nil {
		tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
		base := tlsConfig.Clone()
		tlsConfig.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.ClientCAs = clientCAs.pool()
			return c, nil
		}
	}
	return tlsConfig
}

// inFlightLimit serves at most cap(slots) requests at once and answers any
// other at once with 429 and Retry-After (SPEC B5): a burst, or a client
// that holds requests open, costs a bounded number of goroutines doing
// work and no queue, and the API server's webhook client retries after
// the delay it is given.
type inFlightLimit struct {
	slots chan struct{}
	next  http.Handler
}

func newInFlightLimit(n int, next http.Handler) *inFlightLimit {
	return &inFlightLimit{slots: make(chan struct{}, n), next: next}
}

func (l *inFlightLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
		l.next.ServeHTTP(w, r)
	default:
		// The body is not read: the connection is closed after the answer
		// rather than drained, so the refusal costs no more than this.
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = fmt.Fprintf(w, "too many concurrent admission requests (more than %d): retry after %d s\n", cap(l.slots), retryAfterSeconds)
		requestsTotal.WithLabelValues(operationUnknown, resultThrottled).Inc()
		klog.FromContext(r.Context()).V(2).Info("Refused admission request over the in-flight cap", "path", clip(r.URL.Path), "remoteAddr", r.RemoteAddr, "maxInFlight", cap(l.slots))
	}
}

// handle registers route on mux, turning ServeMux's panic on a pattern it
// rejects into an error.
func handle(mux *http.ServeMux, route Route) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("route %s: %v", route.Path, p)
		}
	}()
	mux.Handle(route.Path, &routeHandler{route: route})
	return nil
}

// Addr is the address the server listens on, with the port chosen when
// Options.Addr asked for port 0.
func (s *Server) Addr() net.Addr {
	return s.listener.Addr()
}

// Healthz returns an error while the certificate files in CertDir, or the
// client CA file, cannot be loaded (the server keeps serving the last good
// certificate, and requiring the last good CA, meanwhile), and nil once they
// load or are restored. Plug it into the manager's /healthz.
// A restart does not cure it (NewServer refuses the same files), so a
// liveness probe that restarts on it would turn a bad rotation into an
// outage; alert on it, or use it for readiness.
func (s *Server) Healthz() error {
	err := s.certs.healthz()
	if s.clientCAs != nil {
		err = errors.Join(err, s.clientCAs.healthz())
	}
	return err
}

// Run serves until ctx is done, then stops accepting connections and waits up
// to Options.ShutdownTimeout for in-flight requests. It returns nil after a
// clean shutdown and an error if serving fails or the shutdown times out.
// Requests are logged with the logger in ctx. Run may be called once.
func (s *Server) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("admission webhook server: Run called twice")
	}
	logger := klog.FromContext(ctx).WithName("admission")
	ctx = klog.NewContext(ctx, logger)

	// In-flight requests must not be cancelled by ctx: shutdown lets them
	// finish. Each request still gets its own deadline (handler.go).
	baseCtx := context.WithoutCancel(ctx)
	s.srv.BaseContext = func(net.Listener) context.Context { return baseCtx }
	s.srv.ErrorLog = log.New(newErrorLogWriter(logger), "", 0)

	reloadCtx, stopReload := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { s.certs.run(reloadCtx, s.opts.CertReloadInterval) })
	if s.clientCAs != nil {
		wg.Go(func() { s.clientCAs.run(reloadCtx, s.opts.CertReloadInterval) })
	}
	defer func() {
		stopReload()
		wg.Wait()
	}()

	serveErr := make(chan error, 1)
	go func() { serveErr <- s.srv.Serve(s.listener) }()
	logger.Info("Serving admission webhooks", "addr", s.Addr().String(), "clientCertificateRequired", s.clientCAs != nil)

	select {
	case err := <-serveErr:
		if errors.Is(err, http.ErrServerClosed) {
			return nil // Close was called
		}
		return fmt.Errorf("admission webhook server: serving on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}

	logger.Info("Shutting down the admission webhook server", "timeout", s.opts.ShutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(baseCtx, s.opts.ShutdownTimeout)
	defer cancel()
	err := s.srv.Shutdown(shutdownCtx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-serveErr
	if err != nil {
		return fmt.Errorf("admission webhook server: shutdown: %w", err)
	}
	return nil
}

// Close stops the server at once, without waiting for in-flight requests, and
// releases its listener. Use it when Run will not be called; to stop a running
// server, cancel Run's context.
func (s *Server) Close() error {
	err := s.srv.Close()
	if lerr := s.listener.Close(); lerr != nil && !errors.Is(lerr, net.ErrClosed) && err == nil {
		err = lerr
	}
	return err
}

// errorLogWriter sends net/http's own messages (TLS handshake failures such
// as a TLS 1.1 client or a client without a certificate from the client
// CA, connections closed mid-request) to the structured logger. They carry
// addresses and TLS alerts, never request bodies. Anyone who reaches the
// port can cause them, so at most errorLogBurst are logged per
// errorLogWindow and the rest are counted in one line (SPEC B14: the
// webhook cannot be used to flood the logs).
type errorLogWriter struct {
	logger klog.Logger
	now    func() time.Time

	mu          sync.Mutex
	windowStart time.Time
	logged      int
	suppressed  int
}

const (
	errorLogWindow = 10 * time.Second
	errorLogBurst  = 20
	// maxErrorLogLen bounds one message; net/http's carry an address and
	// an error, far shorter.
	maxErrorLogLen = 512
)

func newErrorLogWriter(logger klog.Logger) *errorLogWriter {
	return &errorLogWriter{logger: logger, now: time.Now}
}

func (w *errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	if len(msg) > maxErrorLogLen {
		msg = strings.ToValidUTF8(msg[:maxErrorLogLen], "") + "...(truncated)"
	}
	now := w.now()
	w.mu.Lock()
	var suppressed int
	if now.Sub(w.windowStart) >= errorLogWindow {
		suppressed = w.suppressed
		w.windowStart, w.logged, w.suppressed = now, 0, 0
	}
	log := w.logged < errorLogBurst
	if log {
		w.logged++
	} else {
		w.suppressed++
	}
	w.mu.Unlock()
	if suppressed > 0 {
		w.logger.Info("HTTP server errors suppressed", "count", suppressed, "window", errorLogWindow)
	}
	if log {
		w.logger.Info("HTTP server error", "msg", msg)
	}
	return len(p), nil
}
