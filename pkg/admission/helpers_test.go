package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

var (
	identityGVR = v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")
	identityGVK = v1alpha1.SchemeGroupVersion.WithKind("TerraformClusterIdentity")
	clusterGVR  = v1alpha1.SchemeGroupVersion.WithResource("terraformclusters")
	clusterGVK  = v1alpha1.SchemeGroupVersion.WithKind("TerraformCluster")
)

// secretValue stands for a credential: it must never reach a response or a
// log line (SPEC X1).
const secretValue = "AKIA-X1-CANARY-9f8e7d6c5b4a"

const identityPath = "/validate-terraformclusteridentity"

func identityRoute(validate ValidateFunc) Route {
	return Route{Path: identityPath, Resource: identityGVR, Kind: identityGVK, Validate: validate}
}

// testServer is a running Server on 127.0.0.1 with a client that trusts it.
type testServer struct {
	srv    *Server
	dir    string
	caPEM  []byte
	client *http.Client
	base   string
	logs   ktesting.Buffer
}

// startServer writes a certificate to a new directory and serves routes.
func startServer(t *testing.T, routes ...Route) *testServer {
	t.Helper()
	dir := t.TempDir()
	caPEM, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	return startServerIn(t, dir, caPEM, routes...)
}

// startServerIn serves routes with the certificate already in dir.
func startServerIn(t *testing.T, dir string, caPEM []byte, routes ...Route) *testServer {
	t.Helper()
	return startServerOpts(t, Options{Addr: "127.0.0.1:0", CertDir: dir, CertReloadInterval: 10 * time.Millisecond}, caPEM, routes...)
}

// startServerOpts serves routes with opts, whose CertDir holds a
// certificate signed by caPEM.
func startServerOpts(t *testing.T, opts Options, caPEM []byte, routes ...Route) *testServer {
	t.Helper()
	dir := opts.CertDir
	srv, err := NewServer(opts, routes...)
	require.NoError(t, err)

	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
	logs := logger.GetSink().(ktesting.Underlier).GetBuffer()
	// Registered before the shutdown below, so it runs after it and sees
	// every line the server wrote (SPEC X1).
	t.Cleanup(func() {
		require.NotContains(t, logs.String(), secretValue, "a credential value reached a log line")
	})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done, "Run must return nil after a clean shutdown")
	})

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	t.Cleanup(transport.CloseIdleConnections)
	return &testServer{
		srv:    srv,
		dir:    dir,
		caPEM:  caPEM,
		client: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		base:   "https://" + srv.Addr().String(),
		logs:   logs,
	}
}

// do sends a request and returns the response with its body read.
func (ts *testServer) do(t *testing.T, method, path, contentType string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, ts.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := ts.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NotContains(t, string(data), secretValue, "a credential value reached a response (SPEC X1)")
	return resp, data
}

// review posts a v1 AdmissionReview of req, requires HTTP 200 and the uid
// echoed (SPEC X3), and returns the response.
func (ts *testServer) review(t *testing.T, path string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, body := ts.do(t, http.MethodPost, path, "application/json", reviewJSON(t, req))
	require.Equal(t, http.StatusOK, resp.StatusCode, "body: %s", body)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	out := decodeResponseV1(t, body)
	require.Equal(t, req.UID, out.UID, "the request uid must be echoed")
	return out
}

func decodeResponseV1(t *testing.T, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	var out admissionv1.AdmissionReview
	require.NoError(t, json.Unmarshal(body, &out), "body: %s", body)
	require.Equal(t, "admission.k8s.io/v1", out.APIVersion)
	require.Equal(t, "AdmissionReview", out.Kind)
	require.NotNil(t, out.Response, "body: %s", body)
	return out.Response
}

func reviewJSON(t testing.TB, req *admissionv1.AdmissionRequest) []byte {
	t.Helper()
	data, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  req,
	})
	require.NoError(t, err)
	return data
}

var uidCounter atomic.Int64

// identityRequest is what the API server sends for an identity, with the
// canary credential value in an annotation so that X1 checks can look for it.
func identityRequest(t testing.TB, op admissionv1.Operation, name string) *admissionv1.AdmissionRequest {
	t.Helper()
	obj := &v1alpha1.TerraformClusterIdentity{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "TerraformClusterIdentity"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{"example.com/leaked": secretValue},
		},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef: v1alpha1.SecretReference{Name: "aws-credentials", Namespace: "captf-system"},
		},
	}
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprintf("uid-%s-%d", name, uidCounter.Add(1))),
		Kind:      metav1.GroupVersionKind(identityGVK),
		Resource:  metav1.GroupVersionResource(identityGVR),
		Name:      name,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"system:authenticated"}},
	}
	switch op {
	case admissionv1.Delete:
		req.OldObject = runtime.RawExtension{Raw: raw}
	case admissionv1.Update:
		req.OldObject = runtime.RawExtension{Raw: raw}
		req.Object = runtime.RawExtension{Raw: raw}
	default:
		req.Object = runtime.RawExtension{Raw: raw}
	}
	return req
}

// servedCert connects with TLS and returns the certificate the server sent,
// verified against any of the CAs.
func servedCert(t *testing.T, addr string, caPEMs ...[]byte) (*x509.Certificate, error) {
	t.Helper()
	roots := x509.NewCertPool()
	for _, pem := range caPEMs {
		require.True(t, roots.AppendCertsFromPEM(pem))
	}
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// leafOf parses the serving certificate of a PEM pair.
func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return cert
}

// eventually polls cond until it returns nil or the deadline passes, then
// fails with the last error seen (STYLE section 3: no sleeps, no absolute
// durations asserted).
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = cond(); last == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: still failing at the deadline: %v", what, last)
}
