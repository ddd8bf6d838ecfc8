package workload

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/loop"
)

// Handlers map events to keys and enqueue them; nothing else.

// Enqueue adds an object of kind to its queue.
func (c *Controller) Enqueue(kind string, key cache.ObjectName) {
	if q, ok := c.queues[kind]; ok {
		q.Add(key)
	}
}

// EnqueueOwners enqueues the workload objects a mirror or Job names as
// owners (M8), each stamped as it is added: the mirror and Job event
// handlers use it for a change, whose reconcile reads afresh (SPEC P1).
func (c *Controller) EnqueueOwners(obj metav1.Object) {
	c.eachCachedOwner(obj, c.Enqueue)
}

// EnqueueOwnersStamped enqueues the owners of objs as one batch stamped at
// (SPEC P1): a source read that began after at serves them all. The
// identity controller uses it for S4 with the ticket of the source read
// that found the mirrors stale, so its owners reuse that read.
func (c *Controller) EnqueueOwnersStamped(at freshness.Stamp, objs ...metav1.Object) {
	batches := map[string][]cache.ObjectName{}
	for _, obj := range objs {
		c.eachCachedOwner(obj, func(kind string, key cache.ObjectName) {
			batches[kind] = append(batches[kind], key)
		})
	}
	for kind, keys := range batches {
		if q, ok := c.queues[kind]; ok {
			q.AddStamped(at, keys...)
		}
	}
}

// eachCachedOwner calls fn with the kind and key of each owner of obj in
// our API group (M8) that the kind's cache holds by name. An owner the
// cache does not hold is gone, or not seen yet (its own add enqueues it):
// a reference the garbage collector has not removed yet (M5 leaves them
// to it) must not enqueue it. While objects churn through a shared mirror
// faster than the collector removes their references, every change of the
// mirror enqueued thousands of gone objects, and the queues' maps (ours
// and client-go's, which never shrink) kept that peak (SPEC B15). The name
// is enough: an object of the same name with a new UID must reconcile to
// replace the old reference (M5).
func (c *Controller) eachCachedOwner(obj metav1.Object, fn func(kind string, key cache.ObjectName)) {
	for _, ref := range obj.GetOwnerReferences() {
		if gv := ref.APIVersion; gv != v1alpha1.SchemeGroupVersion.String() {
			continue
		}
		k, ok := c.kinds[ref.Kind]
		if !ok {
			continue
		}
		key := cache.ObjectName{Namespace: obj.GetNamespace(), Name: ref.Name}
		if _, cached, err := k.informer.GetIndexer().GetByKey(key.String()); err == nil && cached {
			fn(ref.Kind, key)
		}
	}
}

func (c *Controller) enqueueObject(obj interface{}) {
	m, ok := loop.Unwrap(obj).(metav1.Object)
	if !ok {
		return
	}
	c.Enqueue(index.KindOf(m), cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()})
}

// enqueueMembers enqueues the machines and pools that inherit from cluster (I3).
func (c *Controller) enqueueMembers(obj interface{}) {
	cl, ok := loop.Unwrap(obj).(*v1alpha1.TerraformCluster)
	if !ok {
		return
	}
	members, err := c.resolver.MembersOf(cl)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, m := range members {
		c.enqueueObject(m)
	}
}

// EnqueueUsers enqueues every object that resolves to identity (I4; a
// source change, P2), as one batch: one source read after it serves them
// all (SPEC P1).
func (c *Controller) EnqueueUsers(identity string) {
	users, err := c.resolver.Users(identity)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	at := freshness.Now()
	for _, u := range users {
		if q, ok := c.queues[u.Kind]; ok {
			q.AddStamped(at, cache.ObjectName{Namespace: u.Namespace, Name: u.Name})
		}
	}
}

// enqueueNamespace enqueues every workload object in namespace (N5).
func (c *Controller) enqueueNamespace(namespace string) {
	for name := range c.kinds {
		c.enqueueIndexed(name, cache.NamespaceIndex, namespace)
	}
}

// enqueueIndexed enqueues the objects of kind that the informer's index
// files under value.
func (c *Controller) enqueueIndexed(kind, index, value string) {
	objs, err := c.kinds[kind].informer.GetIndexer().ByIndex(index, value)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	for _, o := range objs {
		if key, ok := loop.KeyOf(o); ok {
			c.Enqueue(kind, key)
		}
	}
}

// workloadChanged reports whether an update of a workload object needs a
// reconcile: not when only its status changed (the manager's own writes).
// Owner references count (K2): a MachineSet creates a TerraformMachine
// owned by itself, and the Machine controller makes the Machine its
// controller owner only afterwards, in an update that changes nothing else.
func workloadChanged(oldObj, newObj interface{}) bool {
	o, ok1 := oldObj.(metav1.Object)
	n, ok2 := newObj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	return o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetLabels(), n.GetLabels()) ||
		!equality.Semantic.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) ||
		!equality.Semantic.DeepEqual(o.GetFinalizers(), n.GetFinalizers()) ||
		!equality.Semantic.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
		o.GetUID() != n.GetUID()
}

// handle registers h on informer; Run waits until h has seen the
// informer's initial list (loop.Handle).
func (c *Controller) handle(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	return loop.Handle(&c.synced, informer, h)
}

// namespaceHandler enqueues a namespace's objects when its labels or phase
// change (N5), and when it arrives after the informer's initial list: an
// object reconciled before the cache held its new namespace found no
// labels to match a selector (the initial list adds every object anyway).
func (c *Controller) namespaceHandler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, isInInitialList bool) {
			if n, ok := obj.(*corev1.Namespace); ok && !isInInitialList {
				c.enqueueNamespace(n.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
			if !equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.Status.Phase != n.Status.Phase {
				c.enqueueNamespace(n.Name)
			}
		},
	}
}

// addHandlers registers the event handlers: each only maps an event to
// keys and enqueues them.
func (c *Controller) addHandlers(ctx context.Context, inf Informers) error {
	for _, k := range c.kinds {
		if err := c.handle(k.informer, c.workloadHandler()); err != nil {
			return err
		}
	}
	return c.addDependentHandlers(ctx, inf)
}

// workloadHandler is the handler of each workload kind's informer.
func (c *Controller) workloadHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			c.written.Observe(obj)
			c.enqueueObject(obj)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			// The cache shows a status write: its record can go (issue 25).
			c.written.Observe(newObj)
			if workloadChanged(oldObj, newObj) {
				c.enqueueObject(newObj)
			}
		},
		// A deletion enqueues the key: its reconcile finds the object
		// gone and forgets everything kept about it (sync, B15).
		DeleteFunc: c.enqueueObject,
	}
}

// addDependentHandlers maps events of the other kinds to the workload
// objects they affect.
func (c *Controller) addDependentHandlers(ctx context.Context, inf Informers) error {
	logger := klog.FromContext(ctx)
	// A cluster's identityRef, defaults or labels decide its members'
	// identity (I2, I3).
	if err := c.handle(inf.Clusters.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueMembers,
		UpdateFunc: func(oldObj, newObj interface{}) {
			if workloadChanged(oldObj, newObj) {
				c.enqueueMembers(oldObj)
				c.enqueueMembers(newObj)
			}
		},
		DeleteFunc: c.enqueueMembers,
	}); err != nil {
		return err
	}
	identityName := func(obj interface{}) string {
		if id, ok := loop.Unwrap(obj).(*v1alpha1.TerraformClusterIdentity); ok {
			return id.Name
		}
		return ""
	}
	if err := c.handle(inf.Identities.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.EnqueueUsers(identityName(obj)) },
		UpdateFunc: func(oldObj, newObj interface{}) {
			// Spec or deletion (I4); the identity's own status writes are not
			// a change its users care about.
			o, n := oldObj.(*v1alpha1.TerraformClusterIdentity), newObj.(*v1alpha1.TerraformClusterIdentity)
			if o.Generation != n.Generation || !equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) {
				logger.V(4).Info("Identity changed; enqueueing its users", "identity", n.Name)
				c.EnqueueUsers(n.Name)
			}
		},
		DeleteFunc: func(obj interface{}) { c.EnqueueUsers(identityName(obj)) },
	}); err != nil {
		return err
	}
	if err := c.handle(inf.Namespaces.Informer(), c.namespaceHandler()); err != nil {
		return err
	}
	if err := c.addContractHandlers(inf); err != nil {
		return err
	}
	if err := c.addVariablesHandlers(inf.VariablesSources); err != nil {
		return err
	}
	return c.addOwnedHandlers(inf)
}

// addOwnedHandlers makes mirror and Job events reach their owners (M8),
// except the echo of the manager's own write.
func (c *Controller) addOwnedHandlers(inf Informers) error {
	ownersOf := func(obj interface{}) {
		if m, ok := loop.Unwrap(obj).(metav1.Object); ok {
			c.EnqueueOwners(m)
		}
	}
	ownersOnAdd := func(obj interface{}) {
		m := obj.(metav1.Object)
		if !c.echoes.isEcho(cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetName()}, m.GetResourceVersion()) {
			c.EnqueueOwners(m)
		}
	}
	ownersOnChange := func(oldObj, newObj interface{}) {
		o, n := oldObj.(metav1.Object), newObj.(metav1.Object)
		if o.GetResourceVersion() == n.GetResourceVersion() ||
			c.echoes.isEcho(cache.ObjectName{Namespace: n.GetNamespace(), Name: n.GetName()}, n.GetResourceVersion()) {
			return
		}
		ownersOf(oldObj)
		ownersOf(newObj)
	}
	ownersOnDelete := func(obj interface{}) {
		if key, ok := loop.KeyOf(obj); ok {
			c.echoes.forget(key)
		}
		ownersOf(obj)
	}
	owned := []cache.SharedIndexInformer{inf.Mirrors.Informer(), inf.Jobs.Informer()}
	if inf.Plans != nil {
		owned = append(owned, inf.Plans.Informer()) // O8: an approval starts the apply
	}
	for _, informer := range owned {
		if err := c.handle(informer, cache.ResourceEventHandlerFuncs{
			AddFunc:    ownersOnAdd,
			UpdateFunc: ownersOnChange,
			DeleteFunc: ownersOnDelete,
		}); err != nil {
			return err
		}
	}
	return nil
}
