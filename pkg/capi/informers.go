package capi

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
)

// Served says which of the Cluster API resources the API server serves.
type Served struct {
	Clusters, Machines, MachinePools bool
}

// Any reports whether any of them is served.
func (s Served) Any() bool { return s.Clusters || s.Machines || s.MachinePools }

// Discover asks the API server which Cluster API resources it serves at
// cluster.x-k8s.io/v1beta2. A group version that is not served is not an
// error: Cluster API is optional (objects marked captf.io/standalone run
// without it).
func Discover(d discovery.DiscoveryInterface) (Served, error) {
	list, err := d.ServerResourcesForGroupVersion(capiv1.GroupVersion.String())
	if apierrors.IsNotFound(err) {
		return Served{}, nil
	}
	if err != nil {
		return Served{}, fmt.Errorf("discovering %s: %w", capiv1.GroupVersion, err)
	}
	var s Served
	for _, r := range list.APIResources {
		switch r.Name {
		case capiv1.ClustersResource.Resource:
			s.Clusters = true
		case capiv1.MachinesResource.Resource:
			s.Machines = true
		case capiv1.MachinePoolsResource.Resource:
			s.MachinePools = true
		}
	}
	return s, nil
}

// IndexClusterByInfrastructure indexes Clusters by the namespace, kind and
// name of the infrastructure object their spec.infrastructureRef names
// (SPEC K2: a TerraformCluster finds the Cluster that names it).
const IndexClusterByInfrastructure = "capi.cluster.byInfrastructure"

// InfrastructureKey is the key of IndexClusterByInfrastructure.
func InfrastructureKey(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

// Informers are the Cluster API informers; each is nil when the API
// server does not serve its resource. Their stores hold the typed subset
// of pkg/apis/capi/v1beta2.
type Informers struct {
	Clusters, Machines, MachinePools cache.SharedIndexInformer
	// BootstrapSecrets watches, by metadata only, the Secrets labelled
	// cluster.x-k8s.io/cluster-name (Cluster API's bootstrap providers
	// label their bootstrap data Secrets so), so that a machine waiting
	// for its bootstrap data starts once the Secret exists and a pool
	// re-applies when its bootstrap data changes (SPEC K5), without
	// caching any Secret's data (B1) or polling. nil without Machines and
	// MachinePools.
	BootstrapSecrets cache.SharedIndexInformer
}

// IndexPoolByBootstrapSecret indexes MachinePools by the namespace and
// name of the bootstrap data Secret their template names.
const IndexPoolByBootstrapSecret = "capi.machinepool.byBootstrapSecret"

// IndexMachineByBootstrapSecret indexes Machines by the namespace and
// name of the bootstrap data Secret they name.
const IndexMachineByBootstrapSecret = "capi.machine.byBootstrapSecret"

// NewInformers builds an informer for each served resource. meta, when
// not nil, serves the bootstrap Secrets' metadata watch. Start them with
// Start (or each one's Run).
func NewInformers(client dynamic.Interface, meta metadata.Interface, served Served, resync time.Duration) (*Informers, error) {
	inf := &Informers{}
	if served.Clusters {
		inf.Clusters = newInformer(client, capiv1.ClustersResource, resync, toCluster, cache.Indexers{
			IndexClusterByInfrastructure: indexClusterByInfrastructure,
		})
	}
	if served.Machines {
		inf.Machines = newInformer(client, capiv1.MachinesResource, resync, toMachine, cache.Indexers{
			IndexMachineByBootstrapSecret: indexMachineByBootstrapSecret,
		})
	}
	if served.MachinePools {
		inf.MachinePools = newInformer(client, capiv1.MachinePoolsResource, resync, toMachinePool, cache.Indexers{
			IndexPoolByBootstrapSecret: indexPoolByBootstrapSecret,
		})
	}
	if (served.Machines || served.MachinePools) && meta != nil {
		i := metadatainformer.NewFilteredMetadataInformer(meta, corev1.SchemeGroupVersion.WithResource("secrets"), metav1.NamespaceAll, resync,
			cache.Indexers{}, func(o *metav1.ListOptions) { o.LabelSelector = capiv1.LabelClusterName }).Informer()
		// Set before the informer starts, so it cannot fail.
		_ = i.SetTransform(TrimToName)
		inf.BootstrapSecrets = i
	}
	return inf, nil
}

func indexMachineByBootstrapSecret(obj interface{}) ([]string, error) {
	m, ok := obj.(*capiv1.Machine)
	if !ok {
		return nil, nil
	}
	if n := m.Spec.Bootstrap.DataSecretName; n != nil && *n != "" {
		return []string{m.Namespace + "/" + *n}, nil
	}
	return nil, nil
}

// MachinesUsingBootstrapSecret returns the Machines that name the
// bootstrap data Secret ns/name.
func (i *Informers) MachinesUsingBootstrapSecret(ns, name string) []*capiv1.Machine {
	if i == nil || i.Machines == nil {
		return nil
	}
	objs, err := i.Machines.GetIndexer().ByIndex(IndexMachineByBootstrapSecret, ns+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*capiv1.Machine, 0, len(objs))
	for _, o := range objs {
		if m, ok := o.(*capiv1.Machine); ok {
			out = append(out, m)
		}
	}
	return out
}

func indexPoolByBootstrapSecret(obj interface{}) ([]string, error) {
	p, ok := obj.(*capiv1.MachinePool)
	if !ok {
		return nil, nil
	}
	if n := p.Spec.Template.Spec.Bootstrap.DataSecretName; n != nil && *n != "" {
		return []string{p.Namespace + "/" + *n}, nil
	}
	return nil, nil
}

// PoolsUsingBootstrapSecret returns the MachinePools whose template names
// the bootstrap data Secret ns/name.
func (i *Informers) PoolsUsingBootstrapSecret(ns, name string) []*capiv1.MachinePool {
	if i == nil || i.MachinePools == nil {
		return nil
	}
	objs, err := i.MachinePools.GetIndexer().ByIndex(IndexPoolByBootstrapSecret, ns+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*capiv1.MachinePool, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*capiv1.MachinePool); ok {
			out = append(out, p)
		}
	}
	return out
}

// All returns the informers that exist.
func (i *Informers) All() []cache.SharedIndexInformer {
	var out []cache.SharedIndexInformer
	for _, inf := range []cache.SharedIndexInformer{i.Clusters, i.Machines, i.MachinePools, i.BootstrapSecrets} {
		if inf != nil {
			out = append(out, inf)
		}
	}
	return out
}

// Start runs every informer until ctx is done.
func (i *Informers) Start(ctx context.Context) {
	for _, inf := range i.All() {
		go inf.RunWithContext(ctx)
	}
}

// HasSynced reports whether every informer has synced.
func (i *Informers) HasSynced() bool {
	for _, inf := range i.All() {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}

// Cluster returns the cached Cluster ns/name; false when there is none or
// Clusters are not served.
func (i *Informers) Cluster(ns, name string) (*capiv1.Cluster, bool) {
	return get[*capiv1.Cluster](i.Clusters, ns, name)
}

// Machine returns the cached Machine ns/name.
func (i *Informers) Machine(ns, name string) (*capiv1.Machine, bool) {
	return get[*capiv1.Machine](i.Machines, ns, name)
}

// MachinePool returns the cached MachinePool ns/name.
func (i *Informers) MachinePool(ns, name string) (*capiv1.MachinePool, bool) {
	return get[*capiv1.MachinePool](i.MachinePools, ns, name)
}

// ClustersNaming returns the Clusters of ns whose spec.infrastructureRef
// names the infrastructure object kind/name of group
// infrastructure.cluster.x-k8s.io.
func (i *Informers) ClustersNaming(ns, kind, name string) []*capiv1.Cluster {
	if i == nil || i.Clusters == nil {
		return nil
	}
	objs, err := i.Clusters.GetIndexer().ByIndex(IndexClusterByInfrastructure, InfrastructureKey(ns, kind, name))
	if err != nil {
		return nil
	}
	out := make([]*capiv1.Cluster, 0, len(objs))
	for _, o := range objs {
		if c, ok := o.(*capiv1.Cluster); ok {
			out = append(out, c)
		}
	}
	return out
}

func get[T runtime.Object](inf cache.SharedIndexInformer, ns, name string) (T, bool) {
	var zero T
	if inf == nil {
		return zero, false
	}
	o, ok, err := inf.GetIndexer().GetByKey(ns + "/" + name)
	if err != nil || !ok {
		return zero, false
	}
	t, ok := o.(T)
	return t, ok
}

func indexClusterByInfrastructure(obj interface{}) ([]string, error) {
	c, ok := obj.(*capiv1.Cluster)
	if !ok || c.Spec.InfrastructureRef.Name == "" {
		return nil, nil
	}
	return []string{InfrastructureKey(c.Namespace, c.Spec.InfrastructureRef.Kind, c.Spec.InfrastructureRef.Name)}, nil
}

func newInformer(client dynamic.Interface, gvr schema.GroupVersionResource, resync time.Duration,
	transform cache.TransformFunc, indexers cache.Indexers) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.Resource(gvr).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Resource(gvr).Watch(ctx, o)
		},
	}
	// The wrapper says whether the client streams the initial list
	// (watch-list): the real one does, the fake one of unit tests not.
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, client), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{
		ResyncPeriod:      resync,
		Indexers:          indexers,
		ObjectDescription: gvr.String(),
	})
	// Set before the informer starts, so it cannot fail.
	_ = inf.SetTransform(transform)
	return inf
}

// errNotUnstructured is returned by a transform given an object it does
// not know; the informer then keeps nothing of it.
var errNotUnstructured = errors.New("capi: not an unstructured object")
