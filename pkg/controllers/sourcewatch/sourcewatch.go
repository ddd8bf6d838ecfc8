package sourcewatch

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/loop"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	listers "github.com/captf/captf/pkg/generated/listers/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/metrics"
)

// fingerprintAnnotation holds, on the reduced copy a watch caches, the
// fingerprint of the Secret. It exists only in the manager's memory.
const fingerprintAnnotation = "sourcewatch.captf.io/fingerprint"

// Handlers are what the controller calls; both only enqueue.
type Handlers struct {
	// OnChange is called for every identity naming a source whose
	// fingerprint changed: enqueue its users and the identity (P2).
	OnChange func(identity string)
	// OnBaseline is called for every identity naming a source whose watch,
	// started after start-up, has listed it: enqueue the identity alone (S4).
	OnBaseline func(identity string)
}

// Controller keeps the watches.
type Controller struct {
	client     kubernetes.Interface
	identities listers.TerraformClusterIdentityLister
	synced     cache.InformerSynced
	// queue holds identity names whose secretRef may have changed.
	queue    workqueue.TypedRateLimitingInterface[string]
	handlers Handlers

	mu sync.Mutex
	// refs is the source each identity names, as the watches know it.
	refs map[string]types.NamespacedName
	// watches by source.
	watches map[types.NamespacedName]*sourceWatch
	// ctx is the Run context (nil before Run): watches run on it.
	ctx context.Context
	// startedUp is set once the identities present at start have their
	// watches; later watches report their baseline (OnBaseline).
	startedUp bool
	wg        sync.WaitGroup

	// handled, when set (tests), is called after a watch handled an event
	// of its Secret.
	handled func(src types.NamespacedName)
}

// sourceWatch is one source Secret's watch.
type sourceWatch struct {
	key types.NamespacedName
	// users are the identities naming the source.
	users  map[string]struct{}
	cancel context.CancelFunc
	// baseline: call OnBaseline once the initial list is in.
	baseline bool
	// synced reports whether the initial list is in.
	synced cache.InformerSynced
}

// New builds the controller and registers its identity handler; call before
// the informers start.
func New(client kubernetes.Interface, identities captfinformers.TerraformClusterIdentityInformer, h Handlers) (*Controller, error) {
	metrics.Register()
	c := &Controller{
		client:     client,
		identities: identities.Lister(),
		synced:     identities.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "sourcewatch"}),
		handlers: h,
		refs:     map[string]types.NamespacedName{},
		watches:  map[types.NamespacedName]*sourceWatch{},
	}
	enqueue := func(obj interface{}) {
		if id, ok := loop.Unwrap(obj).(*v1alpha1.TerraformClusterIdentity); ok {
			c.queue.Add(id.Name)
		}
	}
	_, err := identities.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, n := oldObj.(*v1alpha1.TerraformClusterIdentity), newObj.(*v1alpha1.TerraformClusterIdentity)
			if o.Spec.SecretRef != n.Spec.SecretRef {
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Name is the controller's name in logs.
func (c *Controller) Name() string { return "sourcewatch" }

// Run keeps the watches until ctx is done, then stops them all. One worker
// suffices (and keeps the reference counts simple): a sync takes no I/O.
func (c *Controller) Run(ctx context.Context, _ int) {
	defer utilruntime.HandleCrashWithContext(ctx)
	logger := klog.FromContext(ctx).WithName("sourcewatch")
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Starting controller")
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.synced) {
		return
	}
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	// The identities present now get their watches without a baseline
	// report: the identity controller reconciles every identity at start.
	ids, err := c.identities.List(labels.Everything())
	if err != nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Listing identities")
	}
	for _, id := range ids {
		c.sync(ctx, id.Name)
	}
	c.mu.Lock()
	c.startedUp = true
	c.mu.Unlock()

	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.processNext(ctx) {
		}
	}()
	<-ctx.Done()
	c.queue.ShutDown()
	<-done
	c.mu.Lock()
	for _, w := range c.watches {
		w.cancel()
	}
	c.watches = map[types.NamespacedName]*sourceWatch{}
	c.refs = map[string]types.NamespacedName{}
	metrics.SourceWatches.Set(0)
	c.mu.Unlock()
	c.wg.Wait()
	logger.Info("Stopped controller")
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	c.sync(ctx, name)
	c.queue.Forget(name)
	return true
}

// sync makes the watches follow identity name's current secretRef.
func (c *Controller) sync(ctx context.Context, name string) {
	var want types.NamespacedName
	id, err := c.identities.Get(name)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		utilruntime.HandleErrorWithContext(ctx, err, "Reading identity from the cache", "identity", name)
		return
	default:
		want = types.NamespacedName{Namespace: id.Spec.SecretRef.Namespace, Name: id.Spec.SecretRef.Name}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	have, had := c.refs[name]
	if had && have == want {
		return
	}
	if had {
		c.release(ctx, name, have)
	}
	if want.Name != "" && want.Namespace != "" {
		c.acquire(ctx, name, want)
	}
}

// release drops identity's use of src, stopping its watch when it was the
// last user; c.mu is held.
func (c *Controller) release(ctx context.Context, identity string, src types.NamespacedName) {
	delete(c.refs, identity)
	w := c.watches[src]
	if w == nil {
		return
	}
	delete(w.users, identity)
	if len(w.users) == 0 {
		w.cancel()
		delete(c.watches, src)
		metrics.SourceWatches.Set(float64(len(c.watches)))
		klog.FromContext(ctx).V(2).Info("Stopped watching source Secret", "secret", klog.KRef(src.Namespace, src.Name))
	}
}

// acquire records identity's use of src, starting its watch when it is the
// first user; c.mu is held.
func (c *Controller) acquire(ctx context.Context, identity string, src types.NamespacedName) {
	c.refs[identity] = src
	if w := c.watches[src]; w != nil {
		w.users[identity] = struct{}{}
		return
	}
	wctx, cancel := context.WithCancel(c.ctx)
	w := &sourceWatch{key: src, users: map[string]struct{}{identity: {}}, cancel: cancel, baseline: c.startedUp}
	c.watches[src] = w
	metrics.SourceWatches.Set(float64(len(c.watches)))
	klog.FromContext(ctx).V(2).Info("Watching source Secret", "secret", klog.KRef(src.Namespace, src.Name), "identity", identity)
	informer := c.newInformer(w)
	w.synced = informer.HasSynced
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		informer.RunWithContext(wctx)
	}()
}

// usersOf returns the identities naming w's source, or nothing when w has
// been stopped (an event that raced the stop enqueues nothing).
func (c *Controller) usersOf(w *sourceWatch) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.watches[w.key] != w {
		return nil
	}
	out := make([]string, 0, len(w.users))
	for id := range w.users {
		out = append(out, id)
	}
	return out
}

// Sources returns, for tests and diagnostics, the watched sources and how
// many identities name each.
func (c *Controller) Sources() map[types.NamespacedName]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[types.NamespacedName]int, len(c.watches))
	for k, w := range c.watches {
		out[k] = len(w.users)
	}
	return out
}
