package faultkit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/captf/captf/pkg/admission/certs"
)

// Faults is the share of requests a FlakyProxy fails, by kind. The shares
// add up to at most 1; the rest are forwarded untouched.
type Faults struct {
	// Error500 answers 500 with a Status body (client-go does not retry it).
	Error500 float64
	// TooMany answers 429 with Retry-After (client-go waits and retries).
	TooMany float64
	// Drop closes the client's TCP connection without an answer: every
	// request multiplexed on it (watches too) fails.
	Drop float64
	// Slow delays the request by SlowMin..SlowMax, then forwards it.
	Slow             float64
	SlowMin, SlowMax time.Duration
	// RetryAfter is the 429's Retry-After in seconds (default 1).
	RetryAfter int
	// Only, when set, limits the faults to the requests it matches; the
	// others are forwarded (for example: every read of one Secret fails).
	Only func(*http.Request) bool
}

// Hook sees what a FlakyProxy forwards, so a test can act at an exact
// point of a client's conversation with the API server (a race made
// deterministic: change an object after the client decided, before its
// write arrives).
type Hook struct {
	// Before runs before each request is forwarded (after any fault), on
	// the request's own goroutine: the request waits until it returns. It
	// may read the body if it puts an equal one back.
	Before func(*http.Request)
	// After runs with each answer the API server gave, before the client
	// gets it.
	After func(*http.Response)
}

// Fault kinds, the keys of FlakyProxy.Counts.
const (
	FaultNone     = "forwarded"
	FaultError500 = "500"
	FaultTooMany  = "429"
	FaultDrop     = "dropped"
	FaultSlow     = "slow"
	FaultCut      = "stream-cut"
)

// FlakyProxy is a TLS reverse proxy in front of kube-apiserver. Healthy, it
// forwards every request unchanged (the client's bearer token included) and
// streams watches through; flaky, it fails a share of them. It serves
// HTTP/2 like the API server, so client-go multiplexes everything over one
// connection, as it does in production.
type FlakyProxy struct {
	// URL is the proxy's https URL; CAData verifies its certificate.
	URL    string
	CAData []byte

	srv    *http.Server
	rp     *httputil.ReverseProxy
	faults atomic.Pointer[Faults]
	hook   atomic.Pointer[Hook]

	mu sync.Mutex
	// streams is cancelled by CutStreams: every request in flight then.
	streams context.Context
	cut     context.CancelFunc
	counts  map[string]int64
	// active counts requests in flight (watches included).
	active atomic.Int64
}

type connKey struct{}

// StartFlakyProxy starts a healthy proxy to the API server at target,
// whose serving certificate caData verifies.
func StartFlakyProxy(target string, caData []byte) (*FlakyProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1", "localhost"}, 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caData) {
		return nil, errors.New("flaky proxy: no certificate in the API server's CA data")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &FlakyProxy{URL: "https://" + l.Addr().String(), CAData: caPEM, counts: map[string]int64{}}
	p.streams, p.cut = context.WithCancel(context.Background())
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			MaxIdleConnsPerHost: 100,
			IdleConnTimeout:     90 * time.Second,
		},
		ModifyResponse: func(resp *http.Response) error {
			if h := p.hook.Load(); h != nil && h.After != nil {
				h.After(resp)
			}
			return nil
		},
		// Watches are long-lived chunked responses: flush every write.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client went away, or CutStreams: reset the stream
				// rather than answer an empty 200.
				panic(http.ErrAbortHandler)
			}
			writeStatus(w, http.StatusBadGateway, "ServiceUnavailable", "flaky proxy: upstream: "+err.Error())
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}},
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = p.srv.ServeTLS(l, "", "") }()
	return p, nil
}

// SetFaults makes the proxy flaky with f; nil makes it healthy.
func (p *FlakyProxy) SetFaults(f *Faults) {
	if f != nil {
		c := *f
		if c.RetryAfter == 0 {
			c.RetryAfter = 1
		}
		f = &c
	}
	p.faults.Store(f)
}

// SetHook makes h see every request forwarded and its answer; nil
// removes it.
func (p *FlakyProxy) SetHook(h *Hook) { p.hook.Store(h) }

// CutStreams ends every request in flight, watches included, as a proxy
// restart would.
func (p *FlakyProxy) CutStreams() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut()
	p.streams, p.cut = context.WithCancel(context.Background())
	p.counts[FaultCut]++
}

// Counts returns how many requests met each fault (FaultNone: forwarded).
func (p *FlakyProxy) Counts() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int64, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// Active is the number of requests in flight.
func (p *FlakyProxy) Active() int64 { return p.active.Load() }

// Close stops the proxy, ending every connection.
func (p *FlakyProxy) Close() {
	p.mu.Lock()
	p.cut()
	p.mu.Unlock()
	_ = p.srv.Close()
}

// WriteKubeconfig writes a kubeconfig that reaches the API server through
// the proxy with token.
func (p *FlakyProxy) WriteKubeconfig(path, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["flaky"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: p.CAData}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["flaky"] = &clientcmdapi.Context{Cluster: "flaky", AuthInfo: user}
	cfg.CurrentContext = "flaky"
	return clientcmd.WriteToFile(*cfg, path)
}

func (p *FlakyProxy) count(kind string) {
	p.mu.Lock()
	p.counts[kind]++
	p.mu.Unlock()
}

// ServeHTTP applies a fault or forwards the request.
func (p *FlakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.active.Add(1)
	defer p.active.Add(-1)
	p.mu.Lock()
	streams := p.streams
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(streams, cancel)
	defer stop()

	if f := p.faults.Load(); f != nil && (f.Only == nil || f.Only(r)) {
		x := rand.Float64()
		switch {
		case x < f.Error500:
			p.count(FaultError500)
			writeStatus(w, http.StatusInternalServerError, "InternalError", "flaky proxy: injected internal error")
			return
		case x < f.Error500+f.TooMany:
			p.count(FaultTooMany)
			w.Header().Set("Retry-After", fmt.Sprint(f.RetryAfter))
			writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "flaky proxy: injected throttling")
			return
		case x < f.Error500+f.TooMany+f.Drop:
			p.count(FaultDrop)
			p.drop(w, r)
			return
		case x < f.Error500+f.TooMany+f.Drop+f.Slow:
			p.count(FaultSlow)
			d := f.SlowMin
			if f.SlowMax > f.SlowMin {
				d += rand.N(f.SlowMax - f.SlowMin)
			}
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		default:
			p.count(FaultNone)
		}
	} else {
		p.count(FaultNone)
	}
	if h := p.hook.Load(); h != nil && h.Before != nil {
		h.Before(r)
	}
	p.rp.ServeHTTP(w, r.WithContext(ctx))
}

// drop closes the client's connection: hijacked over HTTP/1.1; over HTTP/2
// the TCP connection itself is closed, failing every stream on it.
func (p *FlakyProxy) drop(w http.ResponseWriter, r *http.Request) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		_ = c.Close()
	}
	panic(http.ErrAbortHandler)
}

// writeStatus writes a metav1.Status body like the API server's.
func writeStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, message, reason, code)
}

// FormatFaultCounts renders Counts sorted by kind.
func FormatFaultCounts(c map[string]int64) string { return formatSorted(c, "%s=%d") }
