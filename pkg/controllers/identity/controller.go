package identity

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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

const (
	// notReadyResync is how often an identity that is not Ready is re-read
	// (S1), unless --identity-resync is shorter.
	notReadyResync = 30 * time.Second
	// mirrorEventDelay coalesces the burst of mirror events of a fan-out or
	// a rotation into about one status pass per identity per second.
	mirrorEventDelay = time.Second
	// maxNamespaces bounds status.namespaces (SPEC 1.1); the count is in
	// status.mirrors.total.
	maxNamespaces = 1000
	fieldManager  = "captf-manager"
)

// Options tune the controller.
type Options struct {
	// Resync is --identity-resync (S1).
	Resync time.Duration
	// RequireSourceConsent enforces SPEC C1.
	RequireSourceConsent bool
	// WaitFor are more conditions the first reconcile waits for: the
	// workload controller's handlers, so that the users' keys are all in
	// their queues before the first source reads begin and one read per
	// identity serves them (SPEC P1).
	WaitFor []cache.InformerSynced
}

// Informers are the informers the controller reads.
type Informers struct {
	Identities captfinformers.TerraformClusterIdentityInformer
	// Clusters, Machines and Pools tell which mirrors and Jobs belong to a
	// live user of the identity (B2).
	Clusters   captfinformers.TerraformClusterInformer
	Machines   captfinformers.TerraformMachineInformer
	Pools      captfinformers.TerraformMachinePoolInformer
	Namespaces coreinformers.NamespaceInformer
	// Mirrors must be restricted to captf.io/mirrored=true (M9).
	Mirrors coreinformers.SecretInformer
	// Jobs must be restricted to captf.io/managed=true; their
	// captf.io/source-hash says which credentials they run with (C5).
	Jobs batchinformers.JobInformer
}

// Controller reconciles TerraformClusterIdentity status.
type Controller struct {
	kube  kubernetes.Interface
	captf versioned.Interface
	// identities, namespaces and mirrors are read from caches.
	identities    listers.TerraformClusterIdentityLister
	namespaces    corelisters.NamespaceLister
	mirrorIndexer cache.Indexer
	jobIndexer    cache.Indexer
	// resolver tells whether an owner reference names a live user (B2).
	resolver *index.Resolver
	synced   []cache.InformerSynced
	// queue holds identity names.
	queue loop.Queue
	// source reads source Secrets uncached, shared with the workload controller.
	source *source.Reader
	// conflicts are recorded by the workload controller (M7).
	conflicts *conflicts.Tracker
	// enqueueOwners enqueues the users of stale mirrors as one batch
	// stamped at (S4, P1; see apply).
	enqueueOwners func(at freshness.Stamp, mirrors ...metav1.Object)
	// written holds the status last written per identity (S3 against what
	// is stored, not only the cache).
	written  *loop.Written[v1alpha1.TerraformClusterIdentityStatus]
	recorder record.EventRecorder
	clock    clock.WithTickerAndDelayedExecution
	opts     Options

	// staleSince records, per identity and namespace, when a mirror was
	// first seen stale: captf_mirror_staleness_seconds.
	mu         sync.Mutex
	staleSince map[string]map[string]time.Time

	// opened is set once Run has queued every identity of the start-up.
	opened atomic.Bool
}

// NewController builds the controller; call before the informers start.
func NewController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, enqueueOwners func(freshness.Stamp, ...metav1.Object), recorder record.EventRecorder, opts Options) (*Controller, error) {
	return newController(ctx, kube, captf, inf, reader, tracker, enqueueOwners, recorder, clock.RealClock{}, opts)
}

func newController(ctx context.Context, kube kubernetes.Interface, captf versioned.Interface, inf Informers,
	reader *source.Reader, tracker *conflicts.Tracker, enqueueOwners func(freshness.Stamp, ...metav1.Object), recorder record.EventRecorder, clk clock.WithTickerAndDelayedExecution, opts Options) (*Controller, error) {
	metrics.Register()
	resolver, err := index.NewControllerIndexes(inf.Clusters, inf.Machines, inf.Pools, inf.Mirrors.Informer(), inf.Jobs.Informer())
	if err != nil {
		return nil, err
	}
	c := &Controller{
		kube:          kube,
		captf:         captf,
		identities:    inf.Identities.Lister(),
		namespaces:    inf.Namespaces.Lister(),
		mirrorIndexer: inf.Mirrors.Informer().GetIndexer(),
		jobIndexer:    inf.Jobs.Informer().GetIndexer(),
		resolver:      resolver,
		synced: []cache.InformerSynced{inf.Identities.Informer().HasSynced, inf.Namespaces.Informer().HasSynced,
			inf.Mirrors.Informer().HasSynced, inf.Jobs.Informer().HasSynced,
			inf.Clusters.Informer().HasSynced, inf.Machines.Informer().HasSynced, inf.Pools.Informer().HasSynced},
		queue:         loop.NewQueue("terraformclusteridentity", clk),
		source:        reader,
		conflicts:     tracker,
		enqueueOwners: enqueueOwners,
		written:       loop.NewWritten[v1alpha1.TerraformClusterIdentityStatus](),
		recorder:      recorder,
		clock:         clk,
		opts:          opts,
		staleSince:    map[string]map[string]time.Time{},
	}
	// Until Run, events enqueue nothing (B15: a replica that does not
	// lead would keep every key for ever, names from tenants' Jobs
	// included); Run adds every identity.
	c.queue.Hold()
	if err := c.addHandlers(inf); err != nil {
		return nil, err
	}
	return c, nil
}

// addHandlers maps informer events to identity keys; handlers only
// enqueue, every decision is in sync.
func (c *Controller) addHandlers(inf Informers) error {
	if err := c.addIdentityHandler(inf.Identities.Informer()); err != nil {
		return err
	}
	// A mirror that changes, or a Job that starts or ends, changes its
	// identity's status (S2, section 13, C5).
	for _, informer := range []cache.SharedIndexInformer{inf.Mirrors.Informer(), inf.Jobs.Informer()} {
		if err := c.addAnnotationHandler(informer); err != nil {
			return err
		}
	}
	return c.addNamespaceHandler(inf.Namespaces.Informer(), inf.Mirrors.Informer().GetIndexer())
}

func (c *Controller) enqueueObject(obj interface{}) {
	if key, ok := loop.KeyOf(obj); ok {
		c.queue.Add(key)
	}
}

// addIdentityHandler enqueues an identity on a spec or deletion change, not
// on its own status writes (S3).
func (c *Controller) addIdentityHandler(informer cache.SharedIndexInformer) error {
	return c.handle(informer, c.identityHandler())
}

// identityHandler is addIdentityHandler's handler.
func (c *Controller) identityHandler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			c.written.Observe(obj)
			c.enqueueObject(obj)
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			// The cache shows the status write: its record can go.
			c.written.Observe(newObj)
			o, n := oldObj.(*v1alpha1.TerraformClusterIdentity), newObj.(*v1alpha1.TerraformClusterIdentity)
			if o.Spec.SecretRef != n.Spec.SecretRef {
				c.forgetSource(o)
			}
			if o.Generation != n.Generation || !equality.Semantic.DeepEqual(o.DeletionTimestamp, n.DeletionTimestamp) {
				c.enqueueObject(newObj)
			}
		},
		// The pass of a deleted identity removes its mirrors and forgets
		// what was kept about it (sync, B15).
		DeleteFunc: func(obj interface{}) {
			if id, ok := loop.Unwrap(obj).(*v1alpha1.TerraformClusterIdentity); ok {
				c.forgetSource(id)
			}
			c.enqueueObject(obj)
		},
	}
}

// forgetSource drops the reader's latest read of the source id named
// (SPEC B15): id is gone or names another Secret now. Another identity
// naming the same Secret only reads it afresh once more.
func (c *Controller) forgetSource(id *v1alpha1.TerraformClusterIdentity) {
	c.source.Forget(id.Spec.SecretRef.Namespace, id.Spec.SecretRef.Name)
}

// addAnnotationHandler enqueues the identity an object's captf.io/identity
// annotation names, after mirrorEventDelay so that the burst of a fan-out
// or a rotation costs about one pass.
func (c *Controller) addAnnotationHandler(informer cache.SharedIndexInformer) error {
	return c.handle(informer, c.annotationHandler())
}

// annotationHandler is addAnnotationHandler's handler. An object of the
// informer's initial list enqueues nothing: every identity is enqueued by
// its own initial add, and reconciled once the mirror and Job caches have
// synced, so it sees them. Enqueued again a second later, each identity
// would read its source a second time at start-up (SPEC P1: a key added
// after a read began cannot use it).
func (c *Controller) annotationHandler() cache.ResourceEventHandler {
	byAnnotation := func(obj interface{}) {
		if m, ok := loop.Unwrap(obj).(metav1.Object); ok {
			c.EnqueueAfter(m.GetAnnotations()[v1alpha1.AnnotationIdentity], mirrorEventDelay)
		}
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, isInInitialList bool) {
			if !isInInitialList {
				byAnnotation(obj)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			if oldObj.(metav1.Object).GetResourceVersion() != newObj.(metav1.Object).GetResourceVersion() {
				byAnnotation(newObj)
			}
		},
		DeleteFunc: byAnnotation,
	}
}

// Opened reports whether Run has queued every identity of the start-up:
// the workload controller's workers wait for it, so that no source read
// begins before both start-up batches are stamped and one read per
// identity serves them all (SPEC P1).
func (c *Controller) Opened() bool { return c.opened.Load() }

// openQueue lets the queue take adds, then adds every cached identity as
// one batch stamped after that (SPEC P1). An event from now on enqueues its
// identity itself; one before is in what the caches hold.
func (c *Controller) openQueue() {
	c.queue.Open()
	at := freshness.Now()
	ids, err := c.identities.List(labels.Everything())
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	keys := make([]cache.ObjectName, 0, len(ids))
	for _, id := range ids {
		keys = append(keys, cache.ObjectName{Name: id.Name})
	}
	c.queue.AddStamped(at, keys...)
}

// enqueueGone enqueues, once the caches have synced, every identity that
// a mirror or Job names but that does not exist: one deleted while the
// manager was down, or whose removal failed before a restart. Its pass
// removes the mirrors (V5; it reads no source). The initial list's mirrors
// and Jobs enqueue nothing themselves (annotationHandler), and a gone
// identity has no initial add of its own.
func (c *Controller) enqueueGone() {
	named := map[string]bool{}
	for _, idx := range []struct {
		indexer cache.Indexer
		name    string
	}{{c.mirrorIndexer, index.MirrorIdentity}, {c.jobIndexer, index.JobIdentity}} {
		for _, name := range idx.indexer.ListIndexFuncValues(idx.name) {
			named[name] = true
		}
	}
	for name := range named {
		if _, err := c.identities.Get(name); apierrors.IsNotFound(err) {
			c.Enqueue(name)
		}
	}
}

// handle registers h on informer; Run waits until h has seen the
// informer's initial list (loop.Handle).
func (c *Controller) handle(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	return loop.Handle(&c.synced, informer, h)
}

// addNamespaceHandler enqueues, on a relabel, the identities with mirrors
// in the namespace: they may no longer allow it (V5).
func (c *Controller) addNamespaceHandler(informer cache.SharedIndexInformer, mirrorIndexer cache.Indexer) error {
	return c.handle(informer, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*corev1.Namespace), newObj.(*corev1.Namespace)
			if equality.Semantic.DeepEqual(o.Labels, n.Labels) {
				return
			}
			objs, err := mirrorIndexer.ByIndex(cache.NamespaceIndex, n.Name)
			if err != nil {
				utilruntime.HandleError(err)
				return
			}
			for _, m := range objs {
				c.Enqueue(m.(*corev1.Secret).Annotations[v1alpha1.AnnotationIdentity])
			}
		},
	})
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "identity" }

// Enqueue adds an identity to the queue.
func (c *Controller) Enqueue(identity string) {
	if identity != "" {
		c.queue.Add(cache.ObjectName{Name: identity})
	}
}

// EnqueueAfter adds an identity to the queue after delay.
func (c *Controller) EnqueueAfter(identity string, delay time.Duration) {
	if identity != "" {
		c.queue.AddAfter(cache.ObjectName{Name: identity}, delay)
	}
}

// Run processes the queue until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("identity")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller", "workers", workers, "resync", c.opts.Resync)
	if !cache.WaitForNamedCacheSyncWithContext(ctx, append(c.synced, c.opts.WaitFor...)...) {
		return
	}
	c.openQueue()
	c.enqueueGone()
	c.opened.Store(true)
	loop.Run(ctx, c.queue, workers, c.sync)
	logger.Info("Stopped controller")
}
