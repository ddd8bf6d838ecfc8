// Package sourcewatch pushes rotations (SPEC P2): it keeps one
// field-selected watch (metadata.name=<name> in its namespace) per distinct
// source Secret that an identity's spec.secretRef names, and when a source
// changes it calls OnChange for every identity naming it, which enqueues the
// identity's users and the identity itself. The periods (R2, S4) remain the
// bound when a watch is down.
//
// Watches follow the identities: one starts when the first identity names a
// Secret and stops when the last one stops naming it (deleted, or its
// secretRef changed); identities sharing a source share its watch. The
// controller runs in the leader only, like the controllers it feeds.
//
// What a watch caches (SPEC B1): a Secret reduced to its name, namespace, UID,
// resourceVersion and a fingerprint, the SHA-256 of what decides a mirror's
// content or the source's usability: its data (by the hash M4 uses), its type,
// the label captf.io/mirrored (C2) and the consent label and annotation (C1).
// No data, no other metadata. A change is a different fingerprint: an update
// that changes none of these (another label, an annotation, a no-op update)
// and a relist that finds the same Secret enqueue nothing. A Secret created,
// deleted, or deleted and recreated while the watch was down counts as a change.
//
// A new watch's initial list is its baseline and enqueues no user: the
// identity's creation, or its secretRef change, enqueued them already (I4,
// R4). A watch started for an identity that came (or changed secretRef)
// after start-up enqueues the identity alone once its list is in, so the
// identity controller compares that read with the mirrors (S4): a rotation
// between the users' reads and the list is not missed.
//
// Errors: the reflector under each watch retries the list and the watch with
// backoff for as long as the watch is wanted; every failure is logged and
// counted in captf_source_watch_errors_total, and never stops the manager.
package sourcewatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/credentials"
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

// newInformer returns the informer of one source: a field-selected list and
// watch whose cache holds the reduced copy only (B1).
func (c *Controller) newInformer(w *sourceWatch) cache.SharedIndexInformer {
	key := w.key
	logger := klog.FromContext(c.ctx)
	selector := fields.OneTermEqualSelector("metadata.name", key.Name).String()
	secrets := c.client.CoreV1().Secrets(key.Namespace)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return secrets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return secrets.Watch(ctx, o)
		},
	}, c.client)
	inf := cache.NewSharedIndexInformerWithOptions(lw, &corev1.Secret{}, cache.SharedIndexInformerOptions{
		ObjectDescription: "source Secret " + key.String(),
	})
	_ = inf.SetTransform(reduce)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, _ *cache.Reflector, err error) {
		if errors.Is(err, io.EOF) || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || ctx.Err() != nil {
			return // a watch ending normally; the reflector resumes or relists
		}
		metrics.SourceWatchErrors.Inc()
		klog.FromContext(ctx).Info("Watching a source Secret failed; retrying with backoff (the periods remain the bound meanwhile)",
			"secret", klog.KRef(key.Namespace, key.Name), "err", err)
	})
	changed := func(why string) {
		users := c.usersOf(w)
		if len(users) == 0 {
			return
		}
		metrics.SourceChanges.Inc()
		logger.V(2).Info("Source Secret changed; enqueueing its identities' users", "secret", klog.KRef(key.Namespace, key.Name), "change", why, "identities", len(users))
		for _, id := range users {
			c.handlers.OnChange(id)
		}
	}
	done := func(event string) {
		logger.V(5).Info("Source Secret event", "secret", klog.KRef(key.Namespace, key.Name), "event", event)
		if c.handled != nil {
			c.handled(key)
		}
	}
	// ours filters what the field selector should have (a fake clientset
	// ignores it).
	ours := func(obj interface{}) (*corev1.Secret, bool) {
		s, ok := loop.Unwrap(obj).(*corev1.Secret)
		return s, ok && s.Name == key.Name && s.Namespace == key.Namespace
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj interface{}, initial bool) {
			if _, ok := ours(obj); !ok {
				return
			}
			defer done("add")
			if !initial {
				changed("created")
				return
			}
			if w.baseline && c.handlers.OnBaseline != nil {
				for _, id := range c.usersOf(w) {
					c.handlers.OnBaseline(id)
				}
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok1 := ours(oldObj)
			n, ok2 := ours(newObj)
			if !ok1 || !ok2 {
				return
			}
			defer done("update")
			switch {
			case o.UID != n.UID:
				// Deleted and recreated while the watch was down.
				changed("recreated")
			case fingerprintOf(o) != fingerprintOf(n):
				changed("updated")
			}
		},
		DeleteFunc: func(obj interface{}) {
			if _, ok := ours(obj); ok {
				defer done("delete")
				changed("deleted")
			}
		},
	})
	return inf
}

// reduce is the watches' transform (B1): the Secret becomes its identity
// and fingerprint; data and every other field are dropped. Idempotent: a
// reduced copy has no type, which no Secret the API server returns lacks
// (it defaults Opaque), so a tenant cannot make its Secret pass for one.
func reduce(obj interface{}) (interface{}, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok || reduced(s) {
		return obj, nil
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Annotations: map[string]string{fingerprintAnnotation: fingerprint(s)},
	}}, nil
}

func reduced(s *corev1.Secret) bool {
	_, ok := s.Annotations[fingerprintAnnotation]
	return ok && s.Type == "" && s.Data == nil && s.StringData == nil
}

// fingerprintOf returns the fingerprint of a Secret, reduced or not.
func fingerprintOf(s *corev1.Secret) string {
	if reduced(s) {
		return s.Annotations[fingerprintAnnotation]
	}
	return fingerprint(s)
}

// fingerprint hashes what decides a mirror's content (M2, M4) and the
// source's usability (C1, C2): a change to anything else is no rotation.
func fingerprint(s *corev1.Secret) string {
	h := sha256.New()
	for _, part := range []string{
		credentials.SourceHash(s.Data),
		string(s.Type),
		s.Labels[v1alpha1.LabelMirrored],
		s.Labels[v1alpha1.LabelCredential],
		s.Annotations[v1alpha1.AnnotationCredentialIdentities],
	} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	return hex.EncodeToString(h.Sum(nil))
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
