// Package index adds the informer indexes captf looks dependents up with, and
// resolves, from those indexes alone, which workload objects use an identity
// (SPEC I2, I4) and which cluster a machine or pool belongs to (SPEC 1.2).
// The workload controller uses it to re-enqueue exactly the affected objects
// when an identity or a cluster changes; the admission webhook uses it to
// refuse deleting an identity in use (A4). Nothing here lists everything.
package index

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	informers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	listers "github.com/captf/captf/pkg/generated/listers/infrastructure/v1alpha1"
)

// Index names.
const (
	// Identity indexes workload objects by the identities they name: a
	// cluster by spec.identityRef and spec.defaults.identityRef, a machine or
	// pool by its own spec.identityRef.
	Identity = "captf.io/identity"
	// Cluster indexes machines and pools WITHOUT their own identityRef by
	// "<namespace>/<cluster-name label>", so a cluster's change reaches the
	// members that inherit from it (I3).
	Cluster = "captf.io/cluster"
	// MirrorIdentity indexes mirrors by their captf.io/identity annotation.
	MirrorIdentity = "captf.io/mirror-identity"
	// Owner indexes mirrors and Jobs by the UIDs of their owner references.
	Owner = "captf.io/owner"
	// JobIdentity indexes Jobs by their captf.io/identity annotation (C5).
	JobIdentity = "captf.io/job-identity"
)

// ClusterKey is the Cluster index value of a member in namespace with the
// given cluster-name label value.
func ClusterKey(namespace, clusterName string) string { return namespace + "/" + clusterName }

func clusterIdentities(obj interface{}) ([]string, error) {
	c, ok := obj.(*v1alpha1.TerraformCluster)
	if !ok {
		return nil, nil
	}
	var out []string
	if n := credentials.ClusterIdentity(c); n != "" {
		out = append(out, n)
	}
	if c.Spec.Defaults != nil && c.Spec.Defaults.IdentityRef != nil && c.Spec.Defaults.IdentityRef.Name != "" {
		if len(out) == 0 || out[0] != c.Spec.Defaults.IdentityRef.Name {
			out = append(out, c.Spec.Defaults.IdentityRef.Name)
		}
	}
	return out, nil
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
	if err := ensure(clusters, cache.Indexers{Identity: clusterIdentities}); err != nil {
		return fmt.Errorf("cluster indexers: %w", err)
	}
	for _, inf := range []cache.SharedIndexInformer{machines, pools} {
		if err := ensure(inf, cache.Indexers{Identity: memberIdentities, Cluster: memberClusters}); err != nil {
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
	return ensure(jobs, cache.Indexers{Owner: owners, JobIdentity: identityAnnotation})
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

// Ref names a workload object.
type Ref struct {
	Kind      string
	Namespace string
	Name      string
	// Deleting is true when the object has a deletion timestamp.
	Deleting bool
}

func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Resolver resolves identities from the workload informers' caches.
type Resolver struct {
	Clusters       listers.TerraformClusterLister
	ClusterIndexer cache.Indexer
	MachineIndexer cache.Indexer
	PoolIndexer    cache.Indexer
}

// NewResolver adds the workload indexes to the three informers (once) and
// returns a Resolver reading them.
func NewResolver(clusters informers.TerraformClusterInformer, machines informers.TerraformMachineInformer, pools informers.TerraformMachinePoolInformer) (*Resolver, error) {
	if err := AddWorkloadIndexers(clusters.Informer(), machines.Informer(), pools.Informer()); err != nil {
		return nil, err
	}
	return &Resolver{
		Clusters:       clusters.Lister(),
		ClusterIndexer: clusters.Informer().GetIndexer(),
		MachineIndexer: machines.Informer().GetIndexer(),
		PoolIndexer:    pools.Informer().GetIndexer(),
	}, nil
}

// IdentityOf returns the identity a workload object resolves to (SPEC I1,
// I2), "" when none.
func (r *Resolver) IdentityOf(obj metav1.Object) (string, error) {
	if _, ok := obj.(*v1alpha1.TerraformCluster); ok {
		return IdentityIn(obj, nil), nil
	}
	own, m, ok := memberRef(obj)
	if !ok {
		return "", fmt.Errorf("not a workload object: %T", obj)
	}
	if own != nil && own.Name != "" {
		return own.Name, nil
	}
	clusters, err := r.Clusters.TerraformClusters(m.GetNamespace()).List(labels.Everything())
	if err != nil {
		return "", err
	}
	return IdentityIn(obj, clusters), nil
}

// IdentityIn resolves a workload object's identity (SPEC I1, I2) given the
// TerraformClusters of its namespace, for callers that resolve many objects
// of one namespace with one list.
func IdentityIn(obj metav1.Object, clusters []*v1alpha1.TerraformCluster) string {
	if c, ok := obj.(*v1alpha1.TerraformCluster); ok {
		return credentials.ClusterIdentity(c)
	}
	own, m, ok := memberRef(obj)
	if !ok {
		return ""
	}
	cluster := credentials.SelectCluster(m.GetLabels()[v1alpha1.LabelClusterName], m.GetNamespace(), clusters)
	id, _ := credentials.MemberIdentity(own, cluster)
	return id
}

// MembersOf returns the machines and pools without their own identityRef
// that may inherit from cluster: those whose cluster-name label is the
// cluster's own cluster-name label or its name. Callers confirm with
// IdentityOf; this is the candidate set.
func (r *Resolver) MembersOf(c *v1alpha1.TerraformCluster) ([]metav1.Object, error) {
	keys := []string{ClusterKey(c.Namespace, c.Name)}
	if l := c.Labels[v1alpha1.LabelClusterName]; l != "" && l != c.Name {
		keys = append(keys, ClusterKey(c.Namespace, l))
	}
	var out []metav1.Object
	for _, idx := range []cache.Indexer{r.MachineIndexer, r.PoolIndexer} {
		for _, k := range keys {
			objs, err := idx.ByIndex(Cluster, k)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				out = append(out, o.(metav1.Object))
			}
		}
	}
	return out, nil
}

// Users returns every workload object that resolves to identity, directly
// or through a cluster's defaults or identityRef (SPEC I2), sorted. Objects
// being deleted count (their destroy needs the credentials, A4).
func (r *Resolver) Users(identity string) ([]Ref, error) {
	seen := map[types.UID]bool{}
	var out []Ref
	add := func(kind string, o metav1.Object) {
		if seen[o.GetUID()] {
			return
		}
		seen[o.GetUID()] = true
		out = append(out, Ref{Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), Deleting: o.GetDeletionTimestamp() != nil})
	}
	clusters, err := r.ClusterIndexer.ByIndex(Identity, identity)
	if err != nil {
		return nil, err
	}
	for _, o := range clusters {
		c := o.(*v1alpha1.TerraformCluster)
		if credentials.ClusterIdentity(c) == identity {
			add(v1alpha1.KindTerraformCluster, c)
		}
		members, err := r.MembersOf(c)
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			got, err := r.IdentityOf(m)
			if err != nil {
				return nil, err
			}
			if got == identity {
				add(KindOf(m), m)
			}
		}
	}
	for _, idx := range []cache.Indexer{r.MachineIndexer, r.PoolIndexer} {
		objs, err := idx.ByIndex(Identity, identity)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			m := o.(metav1.Object)
			add(KindOf(m), m)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// LiveUser reports whether ref, an owner reference found on an object in
// namespace, names a workload object the caches hold with ref's UID that
// resolves to identity (SPEC B2: only the manager's own users count, not a
// reference a tenant wrote).
func (r *Resolver) LiveUser(namespace string, ref metav1.OwnerReference, identity string) (bool, error) {
	if group, _, _ := strings.Cut(ref.APIVersion, "/"); group != v1alpha1.GroupName {
		return false, nil
	}
	var idx cache.Indexer
	switch ref.Kind {
	case v1alpha1.KindTerraformCluster:
		idx = r.ClusterIndexer
	case v1alpha1.KindTerraformMachine:
		idx = r.MachineIndexer
	case v1alpha1.KindTerraformMachinePool:
		idx = r.PoolIndexer
	default:
		return false, nil
	}
	o, ok, err := idx.GetByKey(namespace + "/" + ref.Name)
	if err != nil || !ok {
		return false, err
	}
	m := o.(metav1.Object)
	if m.GetUID() != ref.UID {
		return false, nil
	}
	got, err := r.IdentityOf(m)
	return got == identity, err
}

// KindOf returns the kind name of a typed workload object, or its Go type
// for anything else.
func KindOf(o metav1.Object) string {
	switch o.(type) {
	case *v1alpha1.TerraformCluster:
		return v1alpha1.KindTerraformCluster
	case *v1alpha1.TerraformMachine:
		return v1alpha1.KindTerraformMachine
	case *v1alpha1.TerraformMachinePool:
		return v1alpha1.KindTerraformMachinePool
	}
	return fmt.Sprintf("%T", o)
}
