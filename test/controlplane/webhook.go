package controlplane

import (
	"context"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// LoadWebhookConfiguration reads the ValidatingWebhookConfiguration of
// manifests/webhook and points every webhook at url (a manager running
// out-of-cluster, e.g. https://127.0.0.1:9443) with caPEM as its CA bundle,
// so local runs and tests use exactly the deployed rules.
func LoadWebhookConfiguration(path, url string, caPEM []byte) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(b, cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	delete(cfg.Annotations, "cert-manager.io/inject-ca-from")
	for i := range cfg.Webhooks {
		w := &cfg.Webhooks[i]
		if w.ClientConfig.Service == nil || w.ClientConfig.Service.Path == nil {
			return nil, fmt.Errorf("%s: webhook %s has no service path", path, w.Name)
		}
		u := url + *w.ClientConfig.Service.Path
		w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caPEM}
	}
	return cfg, nil
}

// InstallWebhookConfiguration creates or replaces cfg.
func InstallWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	api := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	existing, err := api.Get(ctx, cfg.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, cfg, metav1.CreateOptions{})
	case err == nil:
		cfg.ResourceVersion = existing.ResourceVersion
		_, err = api.Update(ctx, cfg, metav1.UpdateOptions{})
	}
	return err
}
