package watchbound

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/util/watchlist"

	"github.com/captf/captf/pkg/generated/clientset/versioned"
	infrav1alpha1 "github.com/captf/captf/pkg/generated/clientset/versioned/typed/infrastructure/v1alpha1"
)

// The clients below are the ones the manager's informers are built on:
// each Watch of the kinds the informers watch returns Release's watch, so
// no stream's decoding buffers outlive it (SPEC B12). Every other call
// goes to the client as it is. A client that does not support watch-list
// semantics (client-go's fakes) is returned unwrapped, so that the
// informers built on it still see that it does not.

// Kube wraps the Secrets, Namespaces and Jobs of c.
func Kube(c kubernetes.Interface) kubernetes.Interface {
	if watchlist.DoesClientNotSupportWatchListSemantics(c) {
		return c
	}
	return kube{c}
}

type kube struct{ kubernetes.Interface }

func (k kube) CoreV1() corev1client.CoreV1Interface { return coreV1{k.Interface.CoreV1()} }
func (k kube) BatchV1() batchv1client.BatchV1Interface {
	return batchV1{k.Interface.BatchV1()}
}

type coreV1 struct{ corev1client.CoreV1Interface }

func (c coreV1) Secrets(ns string) corev1client.SecretInterface {
	return secrets{c.CoreV1Interface.Secrets(ns)}
}
func (c coreV1) Namespaces() corev1client.NamespaceInterface {
	return namespaces{c.CoreV1Interface.Namespaces()}
}

type secrets struct{ corev1client.SecretInterface }

func (s secrets) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(s.SecretInterface.Watch(ctx, o))
}

type namespaces struct {
	corev1client.NamespaceInterface
}

func (n namespaces) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(n.NamespaceInterface.Watch(ctx, o))
}

type batchV1 struct{ batchv1client.BatchV1Interface }

func (b batchV1) Jobs(ns string) batchv1client.JobInterface { return jobs{b.BatchV1Interface.Jobs(ns)} }

type jobs struct{ batchv1client.JobInterface }

func (j jobs) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(j.JobInterface.Watch(ctx, o))
}

// Captf wraps every kind of c's infrastructure group.
func Captf(c versioned.Interface) versioned.Interface {
	if watchlist.DoesClientNotSupportWatchListSemantics(c) {
		return c
	}
	return captf{c}
}

type captf struct{ versioned.Interface }

func (c captf) InfrastructureV1alpha1() infrav1alpha1.InfrastructureV1alpha1Interface {
	return infra{c.Interface.InfrastructureV1alpha1()}
}

type infra struct {
	infrav1alpha1.InfrastructureV1alpha1Interface
}

func (i infra) TerraformClusters(ns string) infrav1alpha1.TerraformClusterInterface {
	return clusters{i.InfrastructureV1alpha1Interface.TerraformClusters(ns)}
}
func (i infra) TerraformMachines(ns string) infrav1alpha1.TerraformMachineInterface {
	return machines{i.InfrastructureV1alpha1Interface.TerraformMachines(ns)}
}
func (i infra) TerraformMachinePools(ns string) infrav1alpha1.TerraformMachinePoolInterface {
	return pools{i.InfrastructureV1alpha1Interface.TerraformMachinePools(ns)}
}
func (i infra) TerraformClusterIdentities() infrav1alpha1.TerraformClusterIdentityInterface {
	return identities{i.InfrastructureV1alpha1Interface.TerraformClusterIdentities()}
}
func (i infra) TerraformPlans(ns string) infrav1alpha1.TerraformPlanInterface {
	return plans{i.InfrastructureV1alpha1Interface.TerraformPlans(ns)}
}
func (i infra) TerraformClusterTemplates(ns string) infrav1alpha1.TerraformClusterTemplateInterface {
	return clusterTemplates{i.InfrastructureV1alpha1Interface.TerraformClusterTemplates(ns)}
}
func (i infra) TerraformMachineTemplates(ns string) infrav1alpha1.TerraformMachineTemplateInterface {
	return machineTemplates{i.InfrastructureV1alpha1Interface.TerraformMachineTemplates(ns)}
}
func (i infra) TerraformMachinePoolTemplates(ns string) infrav1alpha1.TerraformMachinePoolTemplateInterface {
	return poolTemplates{i.InfrastructureV1alpha1Interface.TerraformMachinePoolTemplates(ns)}
}

type clusters struct {
	infrav1alpha1.TerraformClusterInterface
}

func (c clusters) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformClusterInterface.Watch(ctx, o))
}

type machines struct {
	infrav1alpha1.TerraformMachineInterface
}

func (c machines) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformMachineInterface.Watch(ctx, o))
}

type pools struct {
	infrav1alpha1.TerraformMachinePoolInterface
}

func (c pools) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformMachinePoolInterface.Watch(ctx, o))
}

type identities struct {
	infrav1alpha1.TerraformClusterIdentityInterface
}

func (c identities) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformClusterIdentityInterface.Watch(ctx, o))
}

type plans struct {
	infrav1alpha1.TerraformPlanInterface
}

func (c plans) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformPlanInterface.Watch(ctx, o))
}

type clusterTemplates struct {
	infrav1alpha1.TerraformClusterTemplateInterface
}

func (c clusterTemplates) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformClusterTemplateInterface.Watch(ctx, o))
}

type machineTemplates struct {
	infrav1alpha1.TerraformMachineTemplateInterface
}

func (c machineTemplates) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformMachineTemplateInterface.Watch(ctx, o))
}

type poolTemplates struct {
	infrav1alpha1.TerraformMachinePoolTemplateInterface
}

func (c poolTemplates) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(c.TerraformMachinePoolTemplateInterface.Watch(ctx, o))
}

// Dynamic wraps every resource of c.
func Dynamic(c dynamic.Interface) dynamic.Interface {
	if watchlist.DoesClientNotSupportWatchListSemantics(c) {
		return c
	}
	return dynamicClient{c}
}

type dynamicClient struct{ dynamic.Interface }

func (d dynamicClient) Resource(r schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return dynamicResource{d.Interface.Resource(r)}
}

type dynamicResource struct {
	dynamic.NamespaceableResourceInterface
}

func (d dynamicResource) Namespace(ns string) dynamic.ResourceInterface {
	return dynamicNamespaced{d.NamespaceableResourceInterface.Namespace(ns)}
}

func (d dynamicResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(d.NamespaceableResourceInterface.Watch(ctx, o))
}

type dynamicNamespaced struct{ dynamic.ResourceInterface }

func (d dynamicNamespaced) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(d.ResourceInterface.Watch(ctx, o))
}

// Metadata wraps every resource of c.
func Metadata(c metadata.Interface) metadata.Interface {
	if watchlist.DoesClientNotSupportWatchListSemantics(c) {
		return c
	}
	return metadataClient{c}
}

type metadataClient struct{ metadata.Interface }

func (m metadataClient) Resource(r schema.GroupVersionResource) metadata.Getter {
	return metadataResource{m.Interface.Resource(r)}
}

type metadataResource struct{ metadata.Getter }

func (m metadataResource) Namespace(ns string) metadata.ResourceInterface {
	return metadataNamespaced{m.Getter.Namespace(ns)}
}

func (m metadataResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(m.Getter.Watch(ctx, o))
}

type metadataNamespaced struct{ metadata.ResourceInterface }

func (m metadataNamespaced) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return Release(m.ResourceInterface.Watch(ctx, o))
}
