package controlplane

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/captf/captf/pkg/admission/certs"
)

// WebhookClientCert is the client certificate kube-apiserver presents to
// admission webhooks when the control plane was started with
// Options.WebhookClientCert (SPEC B14): CAFile for a manager's
// --webhook-client-ca, CertFile and KeyFile for a test that calls a webhook
// as the API server does.
type WebhookClientCert struct {
	CAFile, CertFile, KeyFile string
	// Kubeconfig is the file the AdmissionConfiguration names.
	Kubeconfig string
	// AdmissionConfig is the file given to --admission-control-config-file.
	AdmissionConfig string
}

// admissionConfiguration is an apiserver.config.k8s.io/v1
// AdmissionConfiguration whose ValidatingAdmissionWebhook and
// MutatingAdmissionWebhook (TerraformPlans, O8) plugins read kubeconfig
// %[1]s: the credentials kube-apiserver presents to each webhook, chosen by
// the webhook's host:port (docs/deploy.md).
const admissionConfiguration = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
  - name: ValidatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]q
  - name: MutatingAdmissionWebhook
    configuration:
      apiVersion: apiserver.config.k8s.io/v1
      kind: WebhookAdmissionConfiguration
      kubeConfigFile: %[1]q
`

// writeWebhookClientCert generates a client CA and a certificate it signs,
// a kubeconfig presenting that certificate to every webhook (user "*": the
// tests' managers listen on free ports, and a manager without
// --webhook-client-ca does not ask for it), and the AdmissionConfiguration
// naming the kubeconfig, all in dir. It returns them and kube-apiserver's
// flag.
func writeWebhookClientCert(dir string) (*WebhookClientCert, []string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	caPEM, certPEM, keyPEM, err := certs.GenerateClient("kube-apiserver-webhook-client", 365*24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	w := &WebhookClientCert{
		CAFile:          filepath.Join(dir, "ca.crt"),
		CertFile:        filepath.Join(dir, certs.CertFileName),
		KeyFile:         filepath.Join(dir, certs.KeyFileName),
		Kubeconfig:      filepath.Join(dir, "kubeconfig"),
		AdmissionConfig: filepath.Join(dir, "admission-configuration.yaml"),
	}
	if err := os.WriteFile(w.CAFile, caPEM, 0o644); err != nil {
		return nil, nil, err
	}
	if err := certs.WriteFiles(dir, certPEM, keyPEM); err != nil {
		return nil, nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificate: w.CertFile, ClientKey: w.KeyFile}
	if err := clientcmd.WriteToFile(*cfg, w.Kubeconfig); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(w.AdmissionConfig, fmt.Appendf(nil, admissionConfiguration, w.Kubeconfig), 0o600); err != nil {
		return nil, nil, err
	}
	return w, []string{"--admission-control-config-file", w.AdmissionConfig}, nil
}
