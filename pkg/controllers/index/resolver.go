package index

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	informers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
)

// Ref names a workload object.
type Ref struct {
	Kind      string
	Namespace string
	Name      string
	// Deleting is true when the object has a deletion timestamp.
	Deleting bool
}

func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// User is a workload object that resolves to an identity, as the caches
// hold it (never modify it).
type User struct {
	Kind   string
	Object metav1.Object
}

// Ref names u.
func (u User) Ref() Ref {
	return Ref{Kind: u.Kind, Namespace: u.Object.GetNamespace(), Name: u.Object.GetName(), Deleting: u.Object.GetDeletionTimestamp() != nil}
}

// Resolver resolves identities from the workload informers' indexes
// (AddWorkloadIndexers). Every method reads only the index buckets of what
// it is asked about (SPEC B13).
type Resolver struct {
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
		ClusterIndexer: clusters.Informer().GetIndexer(),
		MachineIndexer: machines.Informer().GetIndexer(),
		PoolIndexer:    pools.Informer().GetIndexer(),
	}, nil
}

// ClusterOf returns the TerraformCluster a machine or pool in namespace
// whose cluster-name label is clusterName belongs to (SPEC 1.2,
// credentials.SelectCluster), nil when none. It reads the clusters of
// namespace carrying that label and the one of that name, nothing else.
func (r *Resolver) ClusterOf(namespace, clusterName string) (*v1alpha1.TerraformCluster, error) {
	return r.clusterFor(namespace, clusterName, nil)
}

// clusterFor is ClusterOf judged as if self, when not nil, were what the
// cache holds under self's namespace and name (its old version, or its
// last state before deletion).
func (r *Resolver) clusterFor(namespace, clusterName string, self *v1alpha1.TerraformCluster) (*v1alpha1.TerraformCluster, error) {
	if clusterName == "" {
		return nil, nil
	}
	key := ClusterKey(namespace, clusterName)
	objs, err := r.ClusterIndexer.ByIndex(ClusterName, key)
	if err != nil {
		return nil, err
	}
	byName, found, err := r.ClusterIndexer.GetByKey(key)
	if err != nil {
		return nil, err
	}
	candidates := make([]*v1alpha1.TerraformCluster, 0, len(objs)+2)
	add := func(o interface{}) {
		c, ok := o.(*v1alpha1.TerraformCluster)
		if ok && (self == nil || c.Namespace != self.Namespace || c.Name != self.Name) {
			candidates = append(candidates, c)
		}
	}
	for _, o := range objs {
		add(o)
	}
	if found {
		add(byName)
	}
	if self != nil {
		candidates = append(candidates, self)
	}
	return credentials.SelectCluster(clusterName, namespace, candidates), nil
}

// IdentityOf returns the identity a workload object resolves to (SPEC I1,
// I2), "" when none.
func (r *Resolver) IdentityOf(obj metav1.Object) (string, error) {
	if c, ok := obj.(*v1alpha1.TerraformCluster); ok {
		return credentials.ClusterIdentity(c), nil
	}
	own, m, ok := memberRef(obj)
	if !ok {
		return "", fmt.Errorf("not a workload object: %T", obj)
	}
	if own != nil && own.Name != "" {
		return own.Name, nil
	}
	cluster, err := r.ClusterOf(m.GetNamespace(), m.GetLabels()[v1alpha1.LabelClusterName])
	if err != nil {
		return "", err
	}
	id, _ := credentials.MemberIdentity(own, cluster)
	return id, nil
}

// clusterKeys are the cluster-name values under which members may belong
// to c: its name and its own cluster-name label (SPEC 1.2).
func clusterKeys(c *v1alpha1.TerraformCluster) []string {
	keys := []string{c.Name}
	if l := c.Labels[v1alpha1.LabelClusterName]; l != "" && l != c.Name {
		keys = append(keys, l)
	}
	return keys
}

// MembersOf returns the machines and pools without their own identityRef
// whose cluster is c (SPEC 1.2), judged as if c were what the cache holds
// under its name: given a cluster's old version or its last state before
// deletion, it returns the members that belonged to it then (the rest
// unchanged). A cluster's event handler so enqueues exactly the members
// whose cluster, or whose cluster's values, may have changed (I3), and a
// cluster that shares a cluster-name label with many others costs only
// the members it wins.
func (r *Resolver) MembersOf(c *v1alpha1.TerraformCluster) ([]metav1.Object, error) {
	var out []metav1.Object
	for _, v := range clusterKeys(c) {
		winner, err := r.clusterFor(c.Namespace, v, c)
		if err != nil {
			return nil, err
		}
		if winner != c {
			continue
		}
		if err := r.eachMember(ClusterKey(c.Namespace, v), func(_ string, m metav1.Object) { out = append(out, m) }); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// eachMember calls fn with every machine and pool without its own
// identityRef whose cluster-name label gives key (a Cluster index value).
func (r *Resolver) eachMember(key string, fn func(kind string, m metav1.Object)) error {
	for _, k := range []struct {
		kind string
		idx  cache.Indexer
	}{{v1alpha1.KindTerraformMachine, r.MachineIndexer}, {v1alpha1.KindTerraformMachinePool, r.PoolIndexer}} {
		objs, err := k.idx.ByIndex(Cluster, key)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				fn(k.kind, m)
			}
		}
	}
	return nil
}

// Users returns every workload object that resolves to identity, directly
// or through a cluster's defaults or identityRef (SPEC I2), sorted. Objects
// being deleted count (their destroy needs the credentials, A4).
func (r *Resolver) Users(identity string) ([]Ref, error) {
	var out []Ref
	if err := r.eachUser(Identity, identity, identity, func(u User) { out = append(out, u.Ref()) }); err != nil {
		return nil, err
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

// UsersIn returns the workload objects of namespace that resolve to
// identity (objects being deleted included), in no particular order: the
// owners of one mirror (M5), at the cost of that namespace's users.
func (r *Resolver) UsersIn(namespace, identity string) ([]User, error) {
	var out []User
	if err := r.eachUser(NamespacedIdentity, namespace+"/"+identity, identity, func(u User) { out = append(out, u) }); err != nil {
		return nil, err
	}
	return out, nil
}

// eachUser calls fn once with every workload object that resolves to
// identity, found in the bucket key of the index indexName (Identity or
// NamespacedIdentity):
//
//   - the clusters naming identity, those whose own identityRef it is;
//   - the machines and pools naming identity themselves;
//   - the members without their own identityRef of every cluster-name
//     value those clusters can be chosen under (their names and labels),
//     when the cluster chosen for that value passes identity on.
//
// Each value's cluster is chosen once, and each member sits under one
// value, so the cost is the number of clusters naming identity, plus the
// clusters sharing their labels, plus the users: never a product (B13).
func (r *Resolver) eachUser(indexName, key, identity string, fn func(User)) error {
	type nsValue struct{ namespace, value string }
	var values []nsValue
	seen := map[nsValue]bool{}
	clusters, err := r.ClusterIndexer.ByIndex(indexName, key)
	if err != nil {
		return err
	}
	for _, o := range clusters {
		c, ok := o.(*v1alpha1.TerraformCluster)
		if !ok {
			continue
		}
		if credentials.ClusterIdentity(c) == identity {
			fn(User{Kind: v1alpha1.KindTerraformCluster, Object: c})
		}
		for _, v := range clusterKeys(c) {
			if k := (nsValue{c.Namespace, v}); !seen[k] {
				seen[k] = true
				values = append(values, k)
			}
		}
	}
	for _, k := range values {
		chosen, err := r.ClusterOf(k.namespace, k.value)
		if err != nil {
			return err
		}
		if inherited, _ := credentials.MemberIdentity(nil, chosen); inherited == "" || inherited != identity {
			continue
		}
		if err := r.eachMember(ClusterKey(k.namespace, k.value), func(kind string, m metav1.Object) { fn(User{Kind: kind, Object: m}) }); err != nil {
			return err
		}
	}
	for _, k := range []struct {
		kind string
		idx  cache.Indexer
	}{{v1alpha1.KindTerraformMachine, r.MachineIndexer}, {v1alpha1.KindTerraformMachinePool, r.PoolIndexer}} {
		objs, err := k.idx.ByIndex(indexName, key)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				fn(User{Kind: k.kind, Object: m})
			}
		}
	}
	return nil
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
