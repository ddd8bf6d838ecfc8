package admission

import (
	"context"
	"crypto/tls"
	"time"
)

// CertReloader lends the webhook's certificate source to the manager's other
// TLS server, /metrics (SPEC B4), so both load, reload and report a mounted
// certificate the same way (X3).
type CertReloader struct {
	src *certSource
}

// NewCertReloader loads tls.crt and tls.key from dir; what names the
// certificate in logs and errors ("metrics serving certificate"). It fails
// when no valid pair is there.
func NewCertReloader(dir, what string) (*CertReloader, error) {
	src, err := newNamedCertSource(dir, what)
	if err != nil {
		return nil, err
	}
	return &CertReloader{src: src}, nil
}

// GetCertificate is the tls.Config hook: the last pair that loaded.
func (r *CertReloader) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.src.GetCertificate(hello)
}

// Run reloads the files every interval (DefaultCertReloadInterval when zero)
// until ctx is done. A pair that fails to load leaves the last good one in
// service and is reported by Healthz.
func (r *CertReloader) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultCertReloadInterval
	}
	r.src.run(ctx, interval)
}

// Healthz returns why the files cannot be served, nil when the certificate in
// service is the one on disk.
func (r *CertReloader) Healthz() error {
	return r.src.healthz()
}
