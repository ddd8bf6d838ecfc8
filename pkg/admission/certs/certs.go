package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

const (
	// CertFileName is the serving certificate (PEM) in a certificate
	// directory; the key name of a kubernetes.io/tls Secret.
	CertFileName = "tls.crt"
	// KeyFileName is the private key (PEM) in a certificate directory; the
	// key name of a kubernetes.io/tls Secret.
	KeyFileName = "tls.key"

	// DefaultValidity is how long WriteSelfSigned's certificates are valid.
	DefaultValidity = 365 * 24 * time.Hour

	// clockSkew backdates NotBefore so that a peer whose clock runs a little
	// behind does not reject a certificate generated a moment ago.
	clockSkew = time.Hour
)

// Generate creates a new certificate authority and a serving certificate it
// signs for hosts (DNS names and IP addresses; the first one is also the
// subject common name), valid from now for validFor. It returns the PEM of
// the CA certificate (the caBundle of a webhook configuration), of the serving
// certificate and of its PKCS#8 private key. Every call uses new keys and
// random serial numbers.
func Generate(hosts []string, validFor time.Duration) (caPEM, certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, nil, errors.New("generating serving certificate: no hosts given")
	}
	if validFor <= 0 {
		return nil, nil, nil, fmt.Errorf("generating serving certificate: validity %s is not positive", validFor)
	}
	notBefore := time.Now().Add(-clockSkew)
	notAfter := notBefore.Add(clockSkew + validFor)
	ca, err := newCA("captf-webhook-ca", notBefore, notAfter)
	if err != nil {
		return nil, nil, nil, err
	}
	template := &x509.Certificate{
		Subject:     pkix.Name{CommonName: hosts[0], Organization: []string{"captf"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if h == "" {
			return nil, nil, nil, errors.New("generating serving certificate: empty host name")
		}
		if ip := net.ParseIP(h); ip != nil {
			template.IPAddresses = append(template.IPAddresses, ip)
		} else {
			template.DNSNames = append(template.DNSNames, h)
		}
	}
	certPEM, keyPEM, err = ca.sign(template, "serving")
	if err != nil {
		return nil, nil, nil, err
	}
	return ca.pem, certPEM, keyPEM, nil
}

// GenerateClient creates a new certificate authority and a client
// certificate it signs for commonName, valid from now for validFor: what
// the API server presents to the webhook when its AdmissionConfiguration
// names a kubeconfig with it, and what the webhook's --webhook-client-ca
// checks (SPEC B14). It returns the PEM of the CA certificate, of the
// client certificate and of its PKCS#8 private key.
func GenerateClient(commonName string, validFor time.Duration) (caPEM, certPEM, keyPEM []byte, err error) {
	if commonName == "" {
		return nil, nil, nil, errors.New("generating client certificate: no common name given")
	}
	if validFor <= 0 {
		return nil, nil, nil, fmt.Errorf("generating client certificate: validity %s is not positive", validFor)
	}
	notBefore := time.Now().Add(-clockSkew)
	notAfter := notBefore.Add(clockSkew + validFor)
	ca, err := newCA("captf-webhook-client-ca", notBefore, notAfter)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = ca.sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"captf"}},
		NotBefore:   notBefore,
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, "client")
	if err != nil {
		return nil, nil, nil, err
	}
	return ca.pem, certPEM, keyPEM, nil
}

// authority is a CA that signs leaf certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// newCA creates a self-signed CA named commonName.
func newCA(commonName string, notBefore, notAfter time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"captf"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// sign issues template (its serial number is set here) for a new key and
// returns the certificate's and the key's PEM; what names it in errors.
func (a *authority) sign(template *x509.Certificate, what string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating %s key: %w", what, err)
	}
	if template.SerialNumber, err = randomSerial(); err != nil {
		return nil, nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, template, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s certificate: %w", what, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding %s key: %w", what, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
}

// WriteFiles writes certPEM and keyPEM as tls.crt (mode 0644) and tls.key
// (mode 0600) in dir, creating dir if needed. Each file is written to a
// temporary name and renamed, so a server polling dir never reads half a
// file (it may still, for one poll, see a new certificate with the old key).
func WriteFiles(dir string, certPEM, keyPEM []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	if err := writeAtomic(filepath.Join(dir, CertFileName), certPEM, 0o644); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, KeyFileName), keyPEM, 0o600)
}

// WriteSelfSigned generates a CA and a serving certificate for hosts valid
// for DefaultValidity, writes them to dir with WriteFiles, and returns the CA
// PEM for the webhook configuration's caBundle or a client's root pool.
func WriteSelfSigned(dir string, hosts []string) (caPEM []byte, err error) {
	caPEM, certPEM, keyPEM, err := Generate(hosts, DefaultValidity)
	if err != nil {
		return nil, err
	}
	if err := WriteFiles(dir, certPEM, keyPEM); err != nil {
		return nil, err
	}
	return caPEM, nil
}

func randomSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generating serial number: %w", err)
	}
	return serial, nil
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
