// Package certs generates and writes the serving certificate of the captf
// admission webhook for tests, the integration harness and the local-up
// script: a throw-away ECDSA P-256 certificate authority and a serving
// certificate it signs, written as tls.crt and tls.key, the file names of a
// kubernetes.io/tls Secret mounted as a volume.
//
// Production clusters get their serving certificate from cert-manager or an
// equivalent; nothing here runs in the manager. The package exists so that the
// certificate-related parts of SPEC X3 (TLS only, reload when the files change)
// can be exercised against real certificates.
package certs
