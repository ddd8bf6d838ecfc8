package certs

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGenerateVerifiesForEveryHost(t *testing.T) {
	caPEM, certPEM, keyPEM, err := Generate([]string{"127.0.0.1", "captf-webhook.captf-system.svc"}, time.Hour)
	require.NoError(t, err)

	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err, "certificate and key must match")
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1", leaf.Subject.CommonName)
	require.False(t, leaf.IsCA)

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(caPEM))
	for _, host := range []string{"127.0.0.1", "captf-webhook.captf-system.svc"} {
		_, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		require.NoError(t, err, "host %s", host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: roots})
	require.Error(t, err, "a host not asked for must not verify")
}

func TestGenerateUsesNewSerials(t *testing.T) {
	_, a, _, err := Generate([]string{"localhost"}, time.Hour)
	require.NoError(t, err)
	_, b, _, err := Generate([]string{"localhost"}, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, a, b)
}

func TestGenerateRejectsBadInput(t *testing.T) {
	_, _, _, err := Generate(nil, time.Hour)
	require.ErrorContains(t, err, "no hosts")
	_, _, _, err = Generate([]string{"localhost", ""}, time.Hour)
	require.ErrorContains(t, err, "empty host")
	_, _, _, err = Generate([]string{"localhost"}, 0)
	require.ErrorContains(t, err, "not positive")
}

func TestWriteSelfSigned(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "certs")
	caPEM, err := WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	require.NotEmpty(t, caPEM)

	_, err = tls.LoadX509KeyPair(filepath.Join(dir, CertFileName), filepath.Join(dir, KeyFileName))
	require.NoError(t, err)
	info, err := os.Stat(filepath.Join(dir, KeyFileName))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the private key must not be world-readable")

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary files left behind")
}

// B14: GenerateClient's certificate is a client certificate its own CA
// verifies for client authentication, and not a serving one.
func TestGenerateClient(t *testing.T) {
	caPEM, certPEM, keyPEM, err := GenerateClient("kube-apiserver", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client authentication: %v", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate must not serve")
	}
	if leaf.Subject.CommonName != "kube-apiserver" {
		t.Errorf("common name %q", leaf.Subject.CommonName)
	}
	if _, _, _, err := GenerateClient("", time.Hour); err == nil {
		t.Error("an empty common name must be refused")
	}
}
