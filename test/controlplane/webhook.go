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
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := readStrict(path, cfg); err != nil {
		return nil, err
	}
	delete(cfg.Annotations, "cert-manager.io/inject-ca-from")
	for i := range cfg.Webhooks {
		if err := pointAt(path, cfg.Webhooks[i].Name, &cfg.Webhooks[i].ClientConfig, url, caPEM); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// LoadMutatingWebhookConfiguration is LoadWebhookConfiguration for the
// MutatingWebhookConfiguration of manifests/webhook (TerraformPlans, O8).
func LoadMutatingWebhookConfiguration(path, url string, caPEM []byte) (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := readStrict(path, cfg); err != nil {
		return nil, err
	}
	delete(cfg.Annotations, "cert-manager.io/inject-ca-from")
	for i := range cfg.Webhooks {
		if err := pointAt(path, cfg.Webhooks[i].Name, &cfg.Webhooks[i].ClientConfig, url, caPEM); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func readStrict(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// pointAt replaces a webhook's Service with url plus the Service's path.
func pointAt(path, name string, cc *admissionregistrationv1.WebhookClientConfig, url string, caPEM []byte) error {
	if cc.Service == nil || cc.Service.Path == nil {
		return fmt.Errorf("%s: webhook %s has no service path", path, name)
	}
	u := url + *cc.Service.Path
	*cc = admissionregistrationv1.WebhookClientConfig{URL: &u, CABundle: caPEM}
	return nil
}

// InstallWebhookConfiguration creates or replaces cfg.
func InstallWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, cfg *admissionregistrationv1.ValidatingWebhookConfiguration) error {
	return createOrReplace(ctx, kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(), cfg)
}

// InstallMutatingWebhookConfiguration creates or replaces cfg.
func InstallMutatingWebhookConfiguration(ctx context.Context, kube kubernetes.Interface, cfg *admissionregistrationv1.MutatingWebhookConfiguration) error {
	return createOrReplace(ctx, kube.AdmissionregistrationV1().MutatingWebhookConfigurations(), cfg)
}

// objectClient is the part of a typed cluster-scoped client that
// createOrReplace uses.
type objectClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrReplace creates obj, or replaces the object of its name.
func createOrReplace[T metav1.Object](ctx context.Context, api objectClient[T], obj T) error {
	existing, err := api.Get(ctx, obj.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = api.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(existing.GetResourceVersion())
		_, err = api.Update(ctx, obj, metav1.UpdateOptions{})
	}
	return err
}
