package admission

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/admission/certs"
)

// clientCert is a client certificate and the CA that signed it.
type clientCert struct {
	caPEM []byte
	pair  tls.Certificate
}

func newClientCert(t *testing.T) clientCert {
	t.Helper()
	caPEM, certPEM, keyPEM, err := certs.GenerateClient("kube-apiserver", time.Hour)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return clientCert{caPEM: caPEM, pair: pair}
}

// startServerWithClientCA serves an allowing route that counts its calls
// and requires client certificates signed by the CA in the returned file.
func startServerWithClientCA(t *testing.T, client clientCert) (*testServer, string, *atomic.Int32) {
	t.Helper()
	dir := t.TempDir()
	caPEM, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	require.NoError(t, os.WriteFile(caFile, client.caPEM, 0o600))
	var calls atomic.Int32
	ts := startServerOpts(t, Options{Addr: "127.0.0.1:0", CertDir: dir, CertReloadInterval: 10 * time.Millisecond, ClientCAFile: caFile}, caPEM,
		identityRoute(countingValidator(&calls, func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })))
	return ts, caFile, &calls
}

// withClientCert returns a client of ts presenting cert (none when nil).
func (ts *testServer) withClientCert(t *testing.T, cert *tls.Certificate) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ts.caPEM))
	cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	transport := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	t.Cleanup(transport.CloseIdleConnections)
	return &http.Client{Transport: transport, Timeout: 30 * time.Second}
}

func postReview(t *testing.T, c *http.Client, ts *testServer) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, ts.base+identityPath, strings.NewReader(string(reviewJSON(t, identityRequest(t, admissionv1.Create, "id")))))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

// B14: with a client CA, a request without a client certificate, or with
// one another CA signed, is refused at TLS and never reaches a validator;
// one the CA signed is served.
func TestB14ClientCertificateRequired(t *testing.T) {
	t.Parallel()
	good := newClientCert(t)
	ts, _, calls := startServerWithClientCA(t, good)

	_, err := postReview(t, ts.withClientCert(t, nil), ts)
	require.Error(t, err, "no client certificate: refused at TLS")
	other := newClientCert(t)
	_, err = postReview(t, ts.withClientCert(t, &other.pair), ts)
	require.Error(t, err, "a certificate from another CA: refused at TLS")
	require.Zero(t, calls.Load(), "nothing reached the validator")

	resp, err := postReview(t, ts.withClientCert(t, &good.pair), ts)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.EqualValues(t, 1, calls.Load())
	require.NoError(t, ts.srv.Healthz())
}

// B14: the client CA is reloaded when its file changes (a rotation needs no
// restart); a file that no longer loads keeps the last good CA and is
// reported by Healthz until it is fixed.
func TestB14ClientCAReload(t *testing.T) {
	t.Parallel()
	first := newClientCert(t)
	ts, caFile, _ := startServerWithClientCA(t, first)
	second := newClientCert(t)
	require.NoError(t, os.WriteFile(caFile, second.caPEM, 0o600))
	eventually(t, "the new client CA in service", func() error {
		_, err := postReview(t, ts.withClientCert(t, &second.pair), ts)
		return err
	})
	_, err := postReview(t, ts.withClientCert(t, &first.pair), ts)
	require.Error(t, err, "the old CA no longer accepted")

	require.NoError(t, os.WriteFile(caFile, []byte("not a certificate"), 0o600))
	eventually(t, "Healthz reports the broken client CA", func() error {
		if ts.srv.Healthz() == nil {
			return os.ErrNotExist
		}
		return nil
	})
	_, err = postReview(t, ts.withClientCert(t, &second.pair), ts)
	require.NoError(t, err, "the last good CA stays in service")
	require.NoError(t, os.WriteFile(caFile, second.caPEM, 0o600))
	eventually(t, "Healthz recovers", func() error { return ts.srv.Healthz() })
}

func TestB14NewServerRefusesABadClientCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	route := identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() })
	for name, file := range map[string]string{
		"missing":      filepath.Join(dir, "nope.crt"),
		"no PEM in it": filepath.Join(dir, certs.KeyFileName),
	} {
		_, err := NewServer(Options{Addr: "127.0.0.1:0", CertDir: dir, ClientCAFile: file}, route)
		require.ErrorContains(t, err, "client CA", name)
	}
}

// B14: net/http's own error lines (a handshake without a client
// certificate, say) are bounded: a flood of bad connections logs at most
// errorLogBurst lines per window, then one line counting the rest.
func TestB14ServerErrorLogIsBounded(t *testing.T) {
	buf := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	now := time.Unix(1000, 0)
	w := newErrorLogWriter(buf)
	w.now = func() time.Time { return now }
	for range 1000 {
		_, err := w.Write([]byte("http: TLS handshake error from 10.0.0.1:1234: tls: client didn't provide a certificate\n"))
		require.NoError(t, err)
	}
	out := buf.GetSink().(ktesting.Underlier).GetBuffer().String()
	require.Equal(t, errorLogBurst, strings.Count(out, "HTTP server error msg="), out)
	now = now.Add(errorLogWindow)
	_, _ = w.Write([]byte(strings.Repeat("x", 10000)))
	out = buf.GetSink().(ktesting.Underlier).GetBuffer().String()
	require.Contains(t, out, "HTTP server errors suppressed")
	require.Contains(t, out, "count=980")
	require.NotContains(t, out, strings.Repeat("x", maxErrorLogLen+1), "one message is bounded too")
}

// B14: names in log lines are clipped, at a rune boundary, with a marker.
func TestClipName(t *testing.T) {
	require.Equal(t, "alice", ClipName("alice"))
	exact := strings.Repeat("a", MaxLoggedNameLen)
	require.Equal(t, exact, ClipName(exact))
	require.Equal(t, exact+"...(1 more bytes)", ClipName(exact+"b"))
	multi := strings.Repeat("a", MaxLoggedNameLen-1) + "é" // é is 2 bytes: the cut falls inside it
	got := ClipName(multi)
	require.Equal(t, strings.Repeat("a", MaxLoggedNameLen-1)+"...(2 more bytes)", got)
}

// B14: the request log line clips the username and the object's name.
func TestB14RequestLogClipsNames(t *testing.T) {
	t.Parallel()
	ts := startServer(t, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	req := identityRequest(t, admissionv1.Create, strings.Repeat("n", 253))
	req.UserInfo.Username = strings.Repeat("u", 5000)
	require.True(t, ts.review(t, identityPath, req).Allowed)
	out := ts.logs.String()
	require.Contains(t, out, strings.Repeat("u", MaxLoggedNameLen)+"...(4936 more bytes)")
	require.NotContains(t, out, strings.Repeat("u", MaxLoggedNameLen+1))
	require.Contains(t, out, strings.Repeat("n", MaxLoggedNameLen)+"...(189 more bytes)")
	require.NotContains(t, out, strings.Repeat("n", MaxLoggedNameLen+1))
}
