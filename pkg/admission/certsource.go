package admission

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/admission/certs"
)

// certSource serves a certificate to the TLS stack and reloads it from disk
// when tls.crt or tls.key change: the webhook's (SPEC X3) and, through
// CertReloader, the metrics server's (B4).
//
// It polls file contents rather than watching for events: os.ReadFile
// resolves the symlinks of a Secret volume (tls.crt -> ..data/tls.crt,
// ..data -> ..<timestamp>), so an atomic swap of ..data, an in-place rewrite
// and a rename over the file are all seen the same way, with no inotify
// dependency and no watch to re-arm after a symlink swap. Two small files every
// few seconds cost nothing.
type certSource struct {
	certFile, keyFile string
	// what names the certificate in logs and errors.
	what string

	// current is what GetCertificate serves: the last pair that loaded.
	current atomic.Pointer[tls.Certificate]

	mu sync.Mutex
	// certPEM and keyPEM are the contents current was built from.
	certPEM, keyPEM []byte
	// lastErr is why the files on disk are not what is served; nil when
	// they are. Healthz reports it.
	lastErr error
}

func newCertSource(dir string) (*certSource, error) {
	return newNamedCertSource(dir, "webhook serving certificate")
}

func newNamedCertSource(dir, what string) (*certSource, error) {
	s := &certSource{
		certFile: filepath.Join(dir, certs.CertFileName),
		keyFile:  filepath.Join(dir, certs.KeyFileName),
		what:     what,
	}
	certPEM, keyPEM, cert, err := s.load()
	if err != nil {
		return nil, fmt.Errorf("loading the %s from %s: %w", what, dir, err)
	}
	s.current.Store(cert)
	s.certPEM, s.keyPEM = certPEM, keyPEM
	return s, nil
}

// load reads and parses the pair on disk.
func (s *certSource) load() (certPEM, keyPEM []byte, cert *tls.Certificate, err error) {
	if certPEM, err = os.ReadFile(s.certFile); err != nil {
		return nil, nil, nil, fmt.Errorf("reading certificate: %w", err)
	}
	if keyPEM, err = os.ReadFile(s.keyFile); err != nil {
		return nil, nil, nil, fmt.Errorf("reading key: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// The error names the problem (no PEM data, mismatched key); it
		// never quotes the key.
		return nil, nil, nil, fmt.Errorf("parsing %s and %s: %w", certs.CertFileName, certs.KeyFileName, err)
	}
	if pair.Leaf == nil {
		if pair.Leaf, err = x509.ParseCertificate(pair.Certificate[0]); err != nil {
			return nil, nil, nil, fmt.Errorf("parsing %s: %w", certs.CertFileName, err)
		}
	}
	return certPEM, keyPEM, &pair, nil
}

// GetCertificate is the tls.Config hook; it never fails once the source exists.
func (s *certSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.current.Load(), nil
}

// reload loads the files when their contents differ from what is served. On
// failure the last good certificate stays in service and the error is kept for
// Healthz until the files load again or are restored.
func (s *certSource) reload(ctx context.Context) {
	logger := klog.FromContext(ctx)
	certPEM, err := os.ReadFile(s.certFile)
	var keyPEM []byte
	if err == nil {
		keyPEM, err = os.ReadFile(s.keyFile)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && bytes.Equal(certPEM, s.certPEM) && bytes.Equal(keyPEM, s.keyPEM) {
		if s.lastErr != nil {
			logger.Info("Serving certificate files are back to the certificate in service", "certificate", s.what, "certFile", s.certFile)
			s.lastErr = nil
		}
		return
	}
	var cert *tls.Certificate
	if err == nil {
		certPEM, keyPEM, cert, err = s.load()
	}
	if err != nil {
		// The two reads may straddle an atomic swap of ..data (old
		// certificate, new key); one more read sees a consistent pair.
		certPEM, keyPEM, cert, err = s.load()
	}
	if err != nil {
		if s.lastErr == nil || s.lastErr.Error() != err.Error() {
			logger.Error(err, "Reloading a serving certificate failed; still serving the previous one",
				"certificate", s.what, "certFile", s.certFile, "serial", s.current.Load().Leaf.SerialNumber.String())
		}
		s.lastErr = err
		return
	}
	s.current.Store(cert)
	s.certPEM, s.keyPEM = certPEM, keyPEM
	s.lastErr = nil
	logger.Info("Reloaded a serving certificate", "certificate", s.what, "certFile", s.certFile,
		"serial", cert.Leaf.SerialNumber.String(), "notAfter", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// run polls every interval until ctx is done.
func (s *certSource) run(ctx context.Context, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			s.reload(ctx)
		}
	}
}

// healthz returns why the certificate files cannot be served, nil when the
// certificate in service is the one on disk.
func (s *certSource) healthz() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == nil {
		return nil
	}
	return fmt.Errorf("%s in %s cannot be loaded (still serving serial %s): %w",
		s.what, filepath.Dir(s.certFile), s.current.Load().Leaf.SerialNumber.String(), s.lastErr)
}
