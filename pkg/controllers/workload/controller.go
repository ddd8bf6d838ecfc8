package workload

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/conflicts"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	listers "github.com/captf/captf/pkg/generated/listers/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/metrics"
)

// Options tune the controller.
type Options struct {
	// SyncPeriod: every object is reconciled at least this often (R2).
	SyncPeriod time.Duration
	// RunnerImage is the image the Jobs' init container copies captf from (J5).
	RunnerImage string
	// RequireSourceConsent enforces SPEC C1.
	RequireSourceConsent bool
	// MaxActiveJobs caps the Jobs running at once (SPEC O4); 0 is no cap.
	MaxActiveJobs int
	// ClusterMaxActiveJobs caps the Jobs of one cluster, its machines and
	// pools, where the TerraformCluster sets no spec.maxActiveJobs; 0 is
	// no cap.
	ClusterMaxActiveJobs int
	// StateBackups is how many backups of each object's Terraform state
	// are kept, one per serial (SPEC O5); 0 takes none.
	StateBackups int
	// DriftDefaultInterval is the drift interval where neither the object
	// nor its cluster sets one; 0 is no drift checks (SPEC O7).
	DriftDefaultInterval time.Duration
}

// Informers are the informers the controller reads.
type Informers struct {
	Clusters   captfinformers.TerraformClusterInformer
	Machines   captfinformers.TerraformMachineInformer
	Pools      captfinformers.TerraformMachinePoolInformer
	Identities captfinformers.TerraformClusterIdentityInformer
	Namespaces coreinformers.NamespaceInformer
	// Mirrors must be restricted to captf.io/mirrored=true (M9).
	Mirrors coreinformers.SecretInformer
	// Jobs must be restricted to captf.io/managed=true.
	Jobs batchinformers.JobInformer
	// CAPI are Cluster API's informers (SPEC K2-K6); nil, or nil
	// informers within, where the API server does not serve them.
	CAPI *capi.Informers
	// CAPIServed says whether Cluster API is served at all: the
	// WaitingForOwner message says so when it is not.
	CAPIServed bool
	// VariablesSources are NewVariablesSourceInformers' (SPEC O9): without
	// them a source's change is seen at the next sync period.
	VariablesSources []cache.SharedIndexInformer
}

// Controller reconciles the three workload kinds.
type Controller struct {
	// kube writes mirrors and Jobs; captf writes workload objects.
	kube  kubernetes.Interface
	captf versioned.Interface
	// uncached reads state Secrets and Jobs with a size budget (B11).
	uncached Uncached
	// kinds by kind name, each with its queue in queues.
	kinds  map[string]*kind
	queues map[string]loop.Queue
	// resolver finds identities and their users from the workload caches.
	resolver *index.Resolver
	// identities, namespaces, mirrors and jobs are the other caches.
	identities    listers.TerraformClusterIdentityLister
	namespaces    corelisters.NamespaceLister
	mirrors       corelisters.SecretLister
	mirrorIndexer cache.Indexer
	jobIndexer    cache.Indexer
	// synced reports whether every cache above has synced.
	synced []cache.InformerSynced
	// source reads source Secrets uncached, shared between reconciles (M6).
	source *source.Reader
	// conflicts records foreign Secrets in the way of a mirror (M7).
	conflicts *conflicts.Tracker
	// echoes suppresses the events of the manager's own mirror and Job writes.
	echoes *echoes
	// capi reads Cluster API's caches (never nil); capiServed says
	// whether the API server serves Cluster API.
	capi       *capi.Informers
	capiServed bool
	// written holds the status last written per object.
	written *loop.Written[v1alpha1.WorkloadStatus]
	// opened is set once Run has opened the queues and added every key.
	opened atomic.Bool
	// slots caps the running Jobs (SPEC O4, slots.go).
	slots    *slotState
	recorder record.EventRecorder
	clock    clock.WithTickerAndDelayedExecution
	opts     Options
}

// NewController builds the controller and registers its event handlers and
// indexes; call before the informer factories start.
func NewController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, uncached Uncached, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, recorder record.EventRecorder, opts Options) (*Controller, error) {
	return newController(ctx, kube, captf, uncached, inf, reader, tracker, recorder, clock.RealClock{}, opts)
}

func newController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, uncached Uncached, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, recorder record.EventRecorder, clk clock.WithTickerAndDelayedExecution, opts Options) (*Controller, error) {
	metrics.Register()
	resolver, err := index.NewControllerIndexes(inf.Clusters, inf.Machines, inf.Pools, inf.Mirrors.Informer(), inf.Jobs.Informer())
	if err != nil {
		return nil, err
	}
	for _, i := range []cache.SharedIndexInformer{inf.Machines.Informer(), inf.Pools.Informer()} {
		if err := i.AddIndexers(cache.Indexers{indexMembers: memberKeys}); err != nil {
			return nil, err
		}
	}
	for _, i := range []cache.SharedIndexInformer{inf.Clusters.Informer(), inf.Machines.Informer(), inf.Pools.Informer()} {
		if err := i.AddIndexers(cache.Indexers{indexVariablesSources: variablesSourceKeys}); err != nil {
			return nil, err
		}
	}
	capiInf := inf.CAPI
	if capiInf == nil {
		capiInf = &capi.Informers{}
	}
	c := &Controller{
		kube:     kube,
		captf:    captf,
		uncached: uncached,
		kinds: map[string]*kind{
			v1alpha1.KindTerraformCluster:     clusterKind(inf.Clusters, captf),
			v1alpha1.KindTerraformMachine:     machineKind(inf.Machines, captf),
			v1alpha1.KindTerraformMachinePool: poolKind(inf.Pools, captf),
		},
		queues: map[string]loop.Queue{
			v1alpha1.KindTerraformCluster:     loop.NewQueue("terraformcluster", clk),
			v1alpha1.KindTerraformMachine:     loop.NewQueue("terraformmachine", clk),
			v1alpha1.KindTerraformMachinePool: loop.NewQueue("terraformmachinepool", clk),
		},
		resolver:      resolver,
		identities:    inf.Identities.Lister(),
		namespaces:    inf.Namespaces.Lister(),
		mirrors:       inf.Mirrors.Lister(),
		mirrorIndexer: inf.Mirrors.Informer().GetIndexer(),
		jobIndexer:    inf.Jobs.Informer().GetIndexer(),
		synced: []cache.InformerSynced{
			inf.Clusters.Informer().HasSynced, inf.Machines.Informer().HasSynced, inf.Pools.Informer().HasSynced,
			inf.Identities.Informer().HasSynced, inf.Namespaces.Informer().HasSynced,
			inf.Mirrors.Informer().HasSynced, inf.Jobs.Informer().HasSynced,
		},
		source:     reader,
		conflicts:  tracker,
		echoes:     newEchoes(clk),
		written:    loop.NewWritten[v1alpha1.WorkloadStatus](),
		capi:       capiInf,
		capiServed: inf.CAPIServed,
		recorder:   recorder,
		clock:      clk,
		opts:       opts,
	}
	// Until Run, events enqueue nothing (B15: a replica that does not
	// lead would keep every key for ever); Run adds every cached key.
	for _, q := range c.queues {
		q.Hold()
	}
	if err := c.addHandlers(ctx, inf); err != nil {
		return nil, err
	}
	if err := c.newSlots(inf); err != nil {
		return nil, err
	}
	return c, nil
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "workload" }

// Run processes the three queues with workers each until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("workload")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller", "workers", workers, "syncPeriod", c.opts.SyncPeriod)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced...) {
		return
	}
	c.openQueues()
	var wg sync.WaitGroup
	var resync []loop.Resync
	for name, k := range c.kinds {
		q := c.queues[name]
		wg.Go(func() {
			loop.Run(klog.NewContext(ctx, logger.WithValues("kind", name)), q, workers, func(ctx context.Context, key cache.ObjectName) error {
				return c.sync(ctx, k, key)
			})
		})
		resync = append(resync, loop.Resync{Queue: q, List: k.keys})
	}
	// One ticker for the three kinds: a pass is one batch (SPEC P1).
	wg.Go(func() { loop.RunResync(ctx, c.clock, c.opts.SyncPeriod, resync...) })
	wg.Go(func() { c.sweepEvery(ctx, c.opts.SyncPeriod) })
	wg.Wait()
	logger.Info("Stopped controller")
}

// openQueues lets the queues take adds, then adds every cached object as
// one batch stamped after that (SPEC P1: a source read that begins after
// the stamp serves them all, and no event dropped while held is newer than
// it), then reports the start-up done (HasSynced). An event from now on
// enqueues its keys itself; one before is in what the caches hold.
func (c *Controller) openQueues() {
	for _, q := range c.queues {
		q.Open()
	}
	at := freshness.Now()
	for name, k := range c.kinds {
		c.queues[name].AddStamped(at, k.keys()...)
	}
	c.opened.Store(true)
}

// sweepEvery runs sweep once per period until ctx is done.
func (c *Controller) sweepEvery(ctx context.Context, period time.Duration) {
	ticker := c.clock.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			c.sweep()
		}
	}
}

// sweep drops what is kept about mirrors and Jobs that are gone and that
// no event will clear (SPEC B15): the echoes of writes whose object was
// deleted before the write returned. Everything else kept per object is
// forgotten by the pass that finds the object gone (sync).
func (c *Controller) sweep() {
	c.echoes.retain(func(key cache.ObjectName) bool {
		for _, idx := range []cache.Indexer{c.mirrorIndexer, c.jobIndexer} {
			if _, ok, _ := idx.GetByKey(key.String()); ok {
				return true
			}
		}
		return false
	})
}

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
	eachOwner(obj, c.Enqueue)
}

// EnqueueOwnersStamped enqueues the owners of objs as one batch stamped at
// (SPEC P1): a source read that began after at serves them all. The
// identity controller uses it for S4 with the ticket of the source read
// that found the mirrors stale, so its owners reuse that read.
func (c *Controller) EnqueueOwnersStamped(at freshness.Stamp, objs ...metav1.Object) {
	batches := map[string][]cache.ObjectName{}
	for _, obj := range objs {
		eachOwner(obj, func(kind string, key cache.ObjectName) {
			batches[kind] = append(batches[kind], key)
		})
	}
	for kind, keys := range batches {
		if q, ok := c.queues[kind]; ok {
			q.AddStamped(at, keys...)
		}
	}
}

// eachOwner calls fn with the kind and key of each owner of obj in our API
// group (M8).
func eachOwner(obj metav1.Object, fn func(kind string, key cache.ObjectName)) {
	for _, ref := range obj.GetOwnerReferences() {
		if gv := ref.APIVersion; gv != v1alpha1.SchemeGroupVersion.String() {
			continue
		}
		fn(ref.Kind, cache.ObjectName{Namespace: obj.GetNamespace(), Name: ref.Name})
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
	for name, k := range c.kinds {
		objs, err := k.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			utilruntime.HandleError(err)
			continue
		}
		for _, o := range objs {
			if key, ok := loop.KeyOf(o); ok {
				c.Enqueue(name, key)
			}
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

// HasSynced reports whether Run has queued every key of the start-up.
func (c *Controller) HasSynced() bool {
	if !c.opened.Load() {
		return false
	}
	for _, synced := range c.synced {
		if !synced() {
			return false
		}
	}
	return true
}

// handle registers h on informer; Run waits until h has seen the
// informer's initial list (loop.Handle).
func (c *Controller) handle(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	return loop.Handle(&c.synced, informer, h)
}

// addHandlers registers the event handlers: each only maps an event to
// keys and enqueues them.
func (c *Controller) addHandlers(ctx context.Context, inf Informers) error {
	for _, k := range c.kinds {
		if err := c.handle(k.informer, cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueueObject,
			UpdateFunc: func(oldObj, newObj interface{}) {
				if workloadChanged(oldObj, newObj) {
					c.enqueueObject(newObj)
				}
			},
			// A deletion enqueues the key: its reconcile finds the object
			// gone and forgets everything kept about it (sync, B15).
			DeleteFunc: c.enqueueObject,
		}); err != nil {
			return err
		}
	}
	return c.addDependentHandlers(ctx, inf)
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
	if err := c.handle(inf.Namespaces.Informer(), cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
			if !equality.Semantic.DeepEqual(o.Labels, n.Labels) || o.Status.Phase != n.Status.Phase {
				c.enqueueNamespace(n.Name)
			}
		},
	}); err != nil {
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
	for _, informer := range []cache.SharedIndexInformer{inf.Mirrors.Informer(), inf.Jobs.Informer()} {
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
