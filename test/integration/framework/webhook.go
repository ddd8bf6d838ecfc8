package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/admission/certs"
	"github.com/captf/captf/test/controlplane"
)

// WebhookCert writes a self-signed serving certificate for 127.0.0.1 into
// a temporary directory, for ManagerOptions.WebhookCertDir; it returns the
// directory and the CA bundle for InstallWebhook.
func WebhookCert(t testing.TB) (dir string, caPEM []byte) {
	t.Helper()
	dir = t.TempDir()
	caPEM, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return dir, caPEM
}

// InstallWebhook installs the deployed webhook configurations
// (manifests/webhook: validating and mutating) pointed at m's webhook port, and removes it when the
// test ends (register it after starting m, so it goes before m stops and
// no later test finds a failurePolicy: Fail webhook with nobody serving it).
func (e *Env) InstallWebhook(t testing.TB, m *Manager, caPEM []byte) {
	t.Helper()
	cfg, err := controlplane.LoadWebhookConfiguration(filepath.Join(e.Root, "manifests/webhook/validating_webhook_configuration.yaml"),
		fmt.Sprintf("https://127.0.0.1:%d", m.WebhookPort), caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.InstallWebhookConfiguration(Context(t), e.Kube, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	// The plans' mutating webhook (O8) too.
	mcfg, err := controlplane.LoadMutatingWebhookConfiguration(filepath.Join(e.Root, "manifests/webhook/mutating_webhook_configuration.yaml"),
		fmt.Sprintf("https://127.0.0.1:%d", m.WebhookPort), caPEM)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.InstallMutatingWebhookConfiguration(Context(t), e.Kube, mcfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(context.Background(), mcfg.Name, metav1.DeleteOptions{})
	})
}
