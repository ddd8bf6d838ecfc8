package admission

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// clientCASource holds the CA bundle client certificates must chain to
// (Options.ClientCAFile, SPEC B14) and reloads it when the file changes,
// polled like the serving certificate (certSource), so a rotated CA needs
// no restart. A file that no longer loads leaves the last good bundle in
// service and is reported by Server.Healthz.
type clientCASource struct {
	file string

	current atomic.Pointer[x509.CertPool]

	mu sync.Mutex
	// pem is what current was built from.
	pem     []byte
	lastErr error
}

func newClientCASource(file string) (*clientCASource, error) {
	s := &clientCASource{file: file}
	pemBytes, pool, err := s.load()
	if err != nil {
		return nil, fmt.Errorf("loading the webhook's client CA: %w", err)
	}
	s.current.Store(pool)
	s.pem = pemBytes
	return s, nil
}

// load reads and parses the bundle on disk: at least one certificate, and
// nothing in it that is not one.
func (s *clientCASource) load() ([]byte, *x509.CertPool, error) {
	b, err := os.ReadFile(s.file)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, nil, fmt.Errorf("%s holds no PEM certificate", s.file)
	}
	return b, pool, nil
}

// pool is the bundle in service.
func (s *clientCASource) pool() *x509.CertPool { return s.current.Load() }

// reload loads the file when its contents differ from what is in service.
func (s *clientCASource) reload(ctx context.Context) {
	logger := klog.FromContext(ctx)
	b, err := os.ReadFile(s.file)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && bytes.Equal(b, s.pem) {
		if s.lastErr != nil {
			logger.Info("The client CA file is back to the bundle in service", "file", s.file)
			s.lastErr = nil
		}
		return
	}
	var pool *x509.CertPool
	if err == nil {
		b, pool, err = s.load()
	}
	if err != nil {
		if s.lastErr == nil || s.lastErr.Error() != err.Error() {
			logger.Error(err, "Reloading the webhook's client CA failed; still requiring the previous one", "file", s.file)
		}
		s.lastErr = err
		return
	}
	s.current.Store(pool)
	s.pem = b
	s.lastErr = nil
	logger.Info("Reloaded the webhook's client CA", "file", s.file)
}

// run polls every interval until ctx is done.
func (s *clientCASource) run(ctx context.Context, interval time.Duration) {
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

// healthz returns why the file cannot be used, nil when the bundle in
// service is the one on disk.
func (s *clientCASource) healthz() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lastErr == nil {
		return nil
	}
	return errors.Join(fmt.Errorf("webhook client CA %s cannot be loaded (still requiring the previous one)", s.file), s.lastErr)
}
