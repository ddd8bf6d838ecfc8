// Package index adds the informer indexes captf looks dependents up with, and
// resolves, from those indexes alone, which workload objects use an identity
// (SPEC I2, I4) and which cluster a machine or pool belongs to (SPEC 1.2).
// The workload controller uses it to re-enqueue exactly the affected objects
// when an identity or a cluster changes; the admission webhook uses it to
// refuse deleting an identity in use (A4).
//
// Nothing here lists everything, and no lookup costs more than the objects
// it touches (SPEC B13): every question is answered from index buckets keyed
// by what is asked (an identity, a namespace and cluster-name, an owner's
// UID), each bucket read at most once per question. Tenants choose the
// cluster-name labels, so a label shared by many clusters and many machines
// must cost their number, never their product.
package index

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	informers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
)

// Index names.
const (
	// Identity indexes workload objects by the identities they name: a
	// cluster by spec.identityRef and spec.defaults.identityRef, a machine or
	// pool by its own spec.identityRef.
	Identity = "captf.io/identity"
	// NamespacedIdentity is Identity keyed "<namespace>/<identity>", so the
	// users of one identity in one namespace (one mirror's owners, M5) cost
	// that namespace's share only.
	NamespacedIdentity = "captf.io/namespace-identity"
	// Cluster indexes machines and pools WITHOUT their own identityRef by
	// "<namespace>/<cluster-name label>", so a cluster's change reaches the
	// members that inherit from it (I3).
	Cluster = "captf.io/cluster"
	// ClusterName indexes TerraformClusters by "<namespace>/<cluster-name
	// label>": with the store's own "<namespace>/<name>" key, the candidates
	// a member's cluster is chosen from (SPEC 1.2).
	ClusterName = "captf.io/cluster-name"
	// MirrorIdentity indexes mirrors by their captf.io/identity annotation.
	MirrorIdentity = "captf.io/mirror-identity"
	// Owner indexes mirrors and Jobs by the UIDs of their owner references.
	Owner = "captf.io/owner"
	// Controller indexes Jobs by the UID of their controller reference: an
	// object's Jobs (J*), however many other owner references tenants add.
	Controller = "captf.io/controller"
	// JobIdentity indexes Jobs by their captf.io/identity annotation (C5).
	JobIdentity = "captf.io/job-identity"
)

// ClusterKey is the Cluster and ClusterName index value of an object in
// namespace with the given cluster-name label value.
func ClusterKey(namespace, clusterName string) string { return namespace + "/" + clusterName }

// namespaced prefixes each identity with namespace (the NamespacedIdentity keys).
func namespaced(namespace string, ids []string) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = namespace + "/" + id
	}
	return out
}

// namedByCluster returns the identities a cluster names, its own first.
func namedByCluster(c *v1alpha1.TerraformCluster) []string {
	var out []string
	if n := credentials.ClusterIdentity(c); n != "" {
		out = append(out, n)
	}
	if c.Spec.Defaults != nil && c.Spec.Defaults.IdentityRef != nil && c.Spec.Defaults.IdentityRef.Name != "" {
		if len(out) == 0 || out[0] != c.Spec.Defaults.IdentityRef.Name {
			out = append(out, c.Spec.Defaults.IdentityRef.Name)
		}
	}
	return out
}

func clusterIdentities(obj interface{}) ([]string, error) {
	c, ok := obj.(*v1alpha1.TerraformCluster)
	if !ok {
		return nil, nil
	}
	return namedByCluster(c), nil
}

func clusterNamespacedIdentities(obj interface{}) ([]string, error) {
	c, ok := obj.(*v1alpha1.TerraformCluster)
	if !ok {
		return nil, nil
	}
	return namespaced(c.Namespace, namedByCluster(c)), nil
}

func clusterLabel(obj interface{}) ([]string, error) {
	c, ok := obj.(*v1alpha1.TerraformCluster)
	if !ok {
		return nil, nil
	}
	if l := c.Labels[v1alpha1.LabelClusterName]; l != "" {
		return []string{ClusterKey(c.Namespace, l)}, nil
	}
	return nil, nil
}

// memberRef returns a machine's or pool's own identityRef and labels.
func memberRef(obj interface{}) (ref *v1alpha1.IdentityReference, m metav1.Object, ok bool) {
	switch o := obj.(type) {
	case *v1alpha1.TerraformMachine:
		return o.Spec.IdentityRef, o, true
	case *v1alpha1.TerraformMachinePool:
		return o.Spec.IdentityRef, o, true
	}
	return nil, nil, false
}

func memberIdentities(obj interface{}) ([]string, error) {
	ref, _, ok := memberRef(obj)
	if !ok || ref == nil || ref.Name == "" {
		return nil, nil
	}
	return []string{ref.Name}, nil
}

func memberNamespacedIdentities(obj interface{}) ([]string, error) {
	ref, m, ok := memberRef(obj)
	if !ok || ref == nil || ref.Name == "" {
		return nil, nil
	}
	return namespaced(m.GetNamespace(), []string{ref.Name}), nil
}

func memberClusters(obj interface{}) ([]string, error) {
	ref, m, ok := memberRef(obj)
	if !ok || (ref != nil && ref.Name != "") {
		return nil, nil
	}
	name := m.GetLabels()[v1alpha1.LabelClusterName]
	if name == "" {
		return nil, nil
	}
	return []string{ClusterKey(m.GetNamespace(), name)}, nil
}

// identityAnnotation indexes an object by its captf.io/identity annotation.
func identityAnnotation(obj interface{}) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if id := m.GetAnnotations()[v1alpha1.AnnotationIdentity]; id != "" {
		return []string{id}, nil
	}
	return nil, nil
}

func owners(obj interface{}) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	refs := m.GetOwnerReferences()
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, string(r.UID))
	}
	return out, nil
}

func controller(obj interface{}) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if c := metav1.GetControllerOfNoCopy(m); c != nil {
		return []string{string(c.UID)}, nil
	}
	return nil, nil
}

// ensure adds the indexers inf lacks; informers shared by several users
// (controllers and the webhook) get each index once.
func ensure(inf cache.SharedIndexInformer, indexers cache.Indexers) error {
	have := inf.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, fn := range indexers {
		if _, ok := have[name]; !ok {
			missing[name] = fn
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return inf.AddIndexers(missing)
}

// AddWorkloadIndexers indexes the three workload informers.
func AddWorkloadIndexers(clusters, machines, pools cache.SharedIndexInformer) error {
	if err := ensure(clusters, cache.Indexers{
		Identity: clusterIdentities, NamespacedIdentity: clusterNamespacedIdentities, ClusterName: clusterLabel,
	}); err != nil {
		return fmt.Errorf("cluster indexers: %w", err)
	}
	for _, inf := range []cache.SharedIndexInformer{machines, pools} {
		if err := ensure(inf, cache.Indexers{
			Identity: memberIdentities, NamespacedIdentity: memberNamespacedIdentities, Cluster: memberClusters,
		}); err != nil {
			return fmt.Errorf("member indexers: %w", err)
		}
	}
	return nil
}

// AddMirrorIndexers indexes the mirror Secret informer.
func AddMirrorIndexers(mirrors cache.SharedIndexInformer) error {
	return ensure(mirrors, cache.Indexers{MirrorIdentity: identityAnnotation, Owner: owners})
}

// AddJobIndexers indexes the Job informer.
func AddJobIndexers(jobs cache.SharedIndexInformer) error {
	return ensure(jobs, cache.Indexers{Owner: owners, Controller: controller, JobIdentity: identityAnnotation})
}

// NewControllerIndexes adds every index a controller reads (workload,
// mirror and Job) to the shared informers, once, and returns the Resolver
// over the workload indexes.
func NewControllerIndexes(clusters informers.TerraformClusterInformer, machines informers.TerraformMachineInformer,
	pools informers.TerraformMachinePoolInformer, mirrors, jobs cache.SharedIndexInformer) (*Resolver, error) {
	resolver, err := NewResolver(clusters, machines, pools)
	if err != nil {
		return nil, err
	}
	if err := AddMirrorIndexers(mirrors); err != nil {
		return nil, err
	}
	if err := AddJobIndexers(jobs); err != nil {
		return nil, err
	}
	return resolver, nil
}
