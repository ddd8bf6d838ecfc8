package workload

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/loop"
)

// addContractHandlers maps Cluster API events to the objects they affect:
// a Cluster to the TerraformCluster it names and the members of the
// cluster (K2, K3, K6); a Machine or MachinePool to the object it names
// (K2, K5); and a member's deletion to its cluster (K4).
func (c *Controller) addContractHandlers(inf Informers) error {
	// The cache keeps only the fields the manager reads (pkg/capi): a
	// change of anything else, status included, is no change.
	changed := func(oldObj, newObj interface{}) bool {
		return !equality.Semantic.DeepEqual(withoutVersion(oldObj), withoutVersion(newObj))
	}
	handler := func(fn func(obj interface{})) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: fn,
			UpdateFunc: func(oldObj, newObj interface{}) {
				if changed(oldObj, newObj) {
					fn(oldObj)
					fn(newObj)
				}
			},
			DeleteFunc: fn,
		}
	}
	if i := c.capi.Clusters; i != nil {
		if err := c.handle(i, handler(c.enqueueForCluster)); err != nil {
			return err
		}
	}
	if i := c.capi.Machines; i != nil {
		if err := c.handle(i, handler(func(obj interface{}) {
			if m, ok := loop.Unwrap(obj).(*capiv1.Machine); ok {
				c.enqueueNamed(m.Namespace, m.Spec.InfrastructureRef, v1alpha1.KindTerraformMachine)
			}
		})); err != nil {
			return err
		}
	}
	if i := c.capi.MachinePools; i != nil {
		if err := c.handle(i, handler(func(obj interface{}) {
			if p, ok := loop.Unwrap(obj).(*capiv1.MachinePool); ok {
				c.enqueueNamed(p.Namespace, p.Spec.Template.Spec.InfrastructureRef, v1alpha1.KindTerraformMachinePool)
			}
		})); err != nil {
			return err
		}
	}
	return c.addMemberHandlers(inf)
}

// addMemberHandlers maps the events that concern a cluster's members: a
// bootstrap data Secret to the machines and pools using it (K5), a
// member's deletion to its cluster (K4), and a cluster's provisioning or
// exports to its members (K4, K6).
func (c *Controller) addMemberHandlers(inf Informers) error {
	// K5: a machine waiting for its bootstrap data starts once the
	// Secret exists, and a pool re-applies when its bootstrap data
	// changes (kubeadm rotates a pool's join token in the same Secret,
	// upstream A4-12): the Secret's metadata watch maps a new Secret or
	// version to the machines and pools that use it, whose pass reads it
	// uncached.
	if i := c.capi.BootstrapSecrets; i != nil {
		if err := c.handle(i, cache.ResourceEventHandlerFuncs{
			UpdateFunc: func(oldObj, newObj interface{}) {
				o, ok1 := oldObj.(metav1.Object)
				n, ok2 := newObj.(metav1.Object)
				if ok1 && ok2 && o.GetResourceVersion() != n.GetResourceVersion() {
					c.enqueueBootstrapUsers(n)
				}
			},
			AddFunc: func(obj interface{}) {
				if m, ok := obj.(metav1.Object); ok {
					c.enqueueBootstrapUsers(m)
				}
			},
		}); err != nil {
			return err
		}
	}
	// A member's deletion may unblock its cluster's destroy (K4); a
	// cluster's provisioning or exports reach its members (K4, K6).
	for _, kind := range []string{v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		if err := c.handle(c.kinds[kind].informer, cache.ResourceEventHandlerFuncs{DeleteFunc: c.enqueueClusterOf}); err != nil {
			return err
		}
	}
	return c.handle(inf.Clusters.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := oldObj.(*v1alpha1.TerraformCluster)
			n, ok2 := newObj.(*v1alpha1.TerraformCluster)
			if ok1 && ok2 && (provisioned(&o.Status) != provisioned(&n.Status) || !equality.Semantic.DeepEqual(o.Status.Exports, n.Status.Exports)) {
				c.enqueueAllMembers(n)
			}
		},
	})
}

// withoutVersion is a copy of a cached Cluster API object without its
// resourceVersion, to compare two versions' content.
func withoutVersion(obj interface{}) interface{} {
	switch o := obj.(type) {
	case *capiv1.Cluster:
		o = o.DeepCopy()
		o.ResourceVersion = ""
		return o
	case *capiv1.Machine:
		o = o.DeepCopy()
		o.ResourceVersion = ""
		return o
	case *capiv1.MachinePool:
		o = o.DeepCopy()
		o.ResourceVersion = ""
		return o
	}
	return obj
}

// enqueueBootstrapUsers enqueues the machines and pools whose owner
// names the bootstrap data Secret s (K5).
func (c *Controller) enqueueBootstrapUsers(s metav1.Object) {
	c.enqueuePoolsOf(s)
	c.enqueueMachinesOf(s)
}

// enqueueMachinesOf enqueues the TerraformMachines whose Machine names
// the bootstrap data Secret s and that are not provisioned: a provisioned
// machine pins the data it was provisioned with and never reads it again
// (K5), so a change of the Secret costs it no pass.
func (c *Controller) enqueueMachinesOf(s metav1.Object) {
	for _, m := range c.capi.MachinesUsingBootstrapSecret(s.GetNamespace(), s.GetName()) {
		ref := m.Spec.InfrastructureRef
		if ref.APIGroup != v1alpha1.SchemeGroupVersion.Group || ref.Kind != v1alpha1.KindTerraformMachine || ref.Name == "" {
			continue
		}
		key := cache.ObjectName{Namespace: m.Namespace, Name: ref.Name}
		if o, ok, err := c.kinds[v1alpha1.KindTerraformMachine].informer.GetIndexer().GetByKey(key.String()); err == nil && ok {
			if tm, ok := o.(*v1alpha1.TerraformMachine); ok && provisioned(&tm.Status) {
				continue
			}
		}
		c.Enqueue(v1alpha1.KindTerraformMachine, key)
	}
}

// enqueuePoolsOf enqueues the TerraformMachinePools whose MachinePool's
// template names the bootstrap data Secret s (K5).
func (c *Controller) enqueuePoolsOf(s metav1.Object) {
	for _, p := range c.capi.PoolsUsingBootstrapSecret(s.GetNamespace(), s.GetName()) {
		c.enqueueNamed(p.Namespace, p.Spec.Template.Spec.InfrastructureRef, v1alpha1.KindTerraformMachinePool)
	}
}

// enqueueForCluster enqueues the TerraformCluster a Cluster names and the
// machines and pools of the cluster.
func (c *Controller) enqueueForCluster(obj interface{}) {
	cl, ok := loop.Unwrap(obj).(*capiv1.Cluster)
	if !ok {
		return
	}
	c.enqueueNamed(cl.Namespace, cl.Spec.InfrastructureRef, v1alpha1.KindTerraformCluster)
	c.enqueueMembersKey(cl.Namespace + "/" + cl.Name)
}

// enqueueNamed enqueues the object of kind ref names in ns, if it is one.
func (c *Controller) enqueueNamed(ns string, ref capiv1.ObjectReference, kind string) {
	if ref.APIGroup == v1alpha1.SchemeGroupVersion.Group && ref.Kind == kind && ref.Name != "" {
		c.Enqueue(kind, cache.ObjectName{Namespace: ns, Name: ref.Name})
	}
}

// enqueueAllMembers enqueues every machine and pool of a TerraformCluster's
// cluster: those labelled with its cluster name, whichever Cluster names it.
func (c *Controller) enqueueAllMembers(tc *v1alpha1.TerraformCluster) {
	names := []string{tc.Name}
	if l := tc.Labels[v1alpha1.LabelClusterName]; l != "" {
		names = append(names, l)
	}
	for _, cl := range c.capi.ClustersNaming(tc.Namespace, v1alpha1.KindTerraformCluster, tc.Name) {
		names = append(names, cl.Name)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		c.enqueueMembersKey(tc.Namespace + "/" + n)
	}
}

// enqueueMembersKey enqueues the machines and pools indexed under key.
func (c *Controller) enqueueMembersKey(key string) {
	for _, kind := range []string{v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		c.enqueueIndexed(kind, indexMembers, key)
	}
}

// enqueueClusterOf enqueues the TerraformClusters a deleted member may
// hold back (K4): the one its Cluster names and the one SPEC 1.2 selects.
func (c *Controller) enqueueClusterOf(obj interface{}) {
	m, ok := loop.Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	ns, label := m.GetNamespace(), m.GetLabels()[v1alpha1.LabelClusterName]
	if label == "" {
		return
	}
	if cl, ok := c.capi.Cluster(ns, label); ok {
		c.enqueueNamed(ns, cl.Spec.InfrastructureRef, v1alpha1.KindTerraformCluster)
	}
	if tc, err := c.resolver.ClusterOf(ns, label); err == nil && tc != nil {
		c.Enqueue(v1alpha1.KindTerraformCluster, cache.ObjectName{Namespace: ns, Name: tc.Name})
	}
}
