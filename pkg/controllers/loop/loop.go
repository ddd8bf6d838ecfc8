// Package loop is the plumbing every captf controller shares: a named, typed,
// rate-limited queue (its name gives it workqueue metrics), the worker loop,
// the resync ticker that bounds rotation latency (SPEC R2), and event-handler
// helpers that unwrap tombstones.
package loop

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/controllers/freshness"
)

// Queue is a typed rate-limited queue of object keys that knows when each
// key was last added (SPEC P1).
type Queue interface {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	// AddedAt returns the stamp of key's last add on every add path
	// (handlers, the resync ticker, timed and rate-limited requeues, but
	// not Wake); a key never stamped accepts only reads from now on.
	AddedAt(key cache.ObjectName) freshness.Stamp
	// Wake adds key after d without stamping it: a scheduled look (a
	// backoff's end, a drift check, the image-pull check, a lock's expiry)
	// is not a change, so its reconcile may use the source read that the
	// key's last add allows (SPEC P1: a drift schedule of N objects costs
	// no source reads of its own).
	Wake(key cache.ObjectName, d time.Duration)
	// Pending says whether a timed add of key (AddAfter, AddRateLimited,
	// Wake) has not fired yet.
	Pending(key cache.ObjectName) bool
	// Drop forgets everything the queue keeps about key but a pending add:
	// its stamps and its backoff (the object is gone, SPEC B15). A timed
	// add still pending runs, and its reconcile finds the object gone.
	Drop(key cache.ObjectName)
	// Hold makes the queue drop every add until Open. A replica that does
	// not lead runs no workers, so a key added there would stay for ever:
	// its controllers hold their queues until they run, then add every key
	// of their caches at once (SPEC B15).
	Hold()
	// Open takes adds again.
	Open()
	// AddStamped adds keys as one batch stamped at, a stamp taken before
	// the first of them is added (a key that already has a later stamp
	// keeps it). A resync pass or a pushed rotation enqueues many keys;
	// with one stamp a source read that begins after it serves them all
	// (SPEC P1), even when the first reconciles start before the last key
	// is added.
	AddStamped(at freshness.Stamp, keys ...cache.ObjectName)
}

// NewQueue returns a queue named name (the workqueue metrics' label) whose
// timed requeues run on clk (tests pass a fake clock, as the Job controller
// does). Errors back off per key from 5ms to 5 minutes; retries of all keys
// together are bounded at 50/s (burst 300) so a broken API server is not
// hammered.
func NewQueue(name string, clk clock.WithTickerAndDelayedExecution) Queue {
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 5*time.Minute),
		&workqueue.TypedBucketRateLimiter[cache.ObjectName]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	return &trackingQueue{
		TypedRateLimitingInterface: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: name, Clock: clk}),
		limiter: limiter,
		clock:   clk,
		stamps:  map[cache.ObjectName]*stamps{},
	}
}

// trackingQueue records, per key, the stamp of its last add and its one
// pending timed add. Timed adds run on the queue's own timers rather than
// the embedded queue's AddAfter, so a key is stamped before it is added:
// a reconcile never sees the add without its stamp, and a key with a timed
// add pending keeps the stamp of its last add until then.
type trackingQueue struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	limiter workqueue.TypedRateLimiter[cache.ObjectName]
	clock   clock.WithDelayedExecution

	// held drops every add (Hold).
	held atomic.Bool

	mu     sync.Mutex
	stamps map[cache.ObjectName]*stamps
}

func (q *trackingQueue) Hold() { q.held.Store(true) }
func (q *trackingQueue) Open() { q.held.Store(false) }

type stamps struct {
	last freshness.Stamp // zero: never stamped
	// timer is the pending timed add, due at due; stamp says whether it
	// stamps the key when it fires (AddAfter) or not (Wake). A later
	// timed add of the key waits for the earlier one, as the embedded
	// queue's AddAfter would: the reconcile it brings schedules again.
	timer clock.Timer
	due   time.Time
	stamp bool
}

func (q *trackingQueue) entry(key cache.ObjectName) *stamps {
	e := q.stamps[key]
	if e == nil {
		e = &stamps{}
		q.stamps[key] = e
	}
	return e
}

// Add stamps key, then adds it: a reconcile that takes it out sees a stamp
// no later than its own start.
func (q *trackingQueue) Add(key cache.ObjectName) {
	if q.held.Load() {
		return
	}
	q.mu.Lock()
	q.entry(key).last = freshness.Now()
	q.mu.Unlock()
	q.TypedRateLimitingInterface.Add(key)
}

func (q *trackingQueue) AddStamped(at freshness.Stamp, keys ...cache.ObjectName) {
	if q.held.Load() {
		return
	}
	for _, key := range keys {
		q.mu.Lock()
		e := q.entry(key)
		e.last = max(e.last, at)
		q.mu.Unlock()
		q.TypedRateLimitingInterface.Add(key)
	}
}

// AddAfter adds key after d, stamped when d has passed, just before the
// add (a retry after an error reads afresh). Until then the key keeps the
// stamp of its last add.
func (q *trackingQueue) AddAfter(key cache.ObjectName, d time.Duration) {
	q.addAfter(key, d, true)
}

func (q *trackingQueue) Wake(key cache.ObjectName, d time.Duration) {
	q.addAfter(key, d, false)
}

func (q *trackingQueue) addAfter(key cache.ObjectName, d time.Duration, stamp bool) {
	if q.held.Load() {
		return
	}
	if d <= 0 {
		if stamp {
			q.Add(key)
		} else {
			q.TypedRateLimitingInterface.Add(key)
		}
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.entry(key)
	due := q.clock.Now().Add(d)
	if e.timer != nil {
		e.stamp = e.stamp || stamp
		if !due.Before(e.due) || !e.timer.Stop() {
			// The pending add comes first (or is firing now).
			return
		}
	}
	e.due, e.stamp = due, e.stamp || stamp
	e.timer = q.clock.AfterFunc(d, func() { q.fire(key, e) })
}

// fire runs a timed add of key whose entry was e: the key is stamped (when
// the add asks it) before it is added. A key dropped meanwhile (B15) is
// added plainly, its reconcile finding the object gone, or a new object
// whose own adds are stamped; recreating the entry would keep it forever.
func (q *trackingQueue) fire(key cache.ObjectName, e *stamps) {
	q.mu.Lock()
	if q.stamps[key] == e {
		if e.stamp {
			e.last = freshness.Now()
		}
		e.timer, e.stamp = nil, false
	}
	q.mu.Unlock()
	q.TypedRateLimitingInterface.Add(key)
}

// AddRateLimited adds key after its backoff, as the embedded queue would,
// through AddAfter so the add is stamped.
func (q *trackingQueue) AddRateLimited(key cache.ObjectName) {
	q.AddAfter(key, q.limiter.When(key))
}

func (q *trackingQueue) AddedAt(key cache.ObjectName) freshness.Stamp {
	q.mu.Lock()
	defer q.mu.Unlock()
	if e := q.stamps[key]; e != nil && e.last != 0 {
		return e.last
	}
	// Never stamped through this queue (a direct call, a test, a key only
	// woken): any read that begins from now on.
	return freshness.Now()
}

func (q *trackingQueue) Pending(key cache.ObjectName) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	e := q.stamps[key]
	return e != nil && e.timer != nil
}

func (q *trackingQueue) Drop(key cache.ObjectName) {
	q.mu.Lock()
	delete(q.stamps, key)
	q.mu.Unlock()
	q.TypedRateLimitingInterface.Forget(key)
}

// SyncFunc reconciles one key. It returns an error exactly when a retry can
// help; the key is then requeued with backoff.
type SyncFunc func(ctx context.Context, key cache.ObjectName) error

// Run starts workers that process queue with sync until ctx is done, then
// shuts the queue down, letting in-flight items finish (drain), and returns
// once every worker has returned.
func Run(ctx context.Context, queue Queue, workers int, syncFn SyncFunc) {
	logger := klog.FromContext(ctx)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wait.UntilWithContext(ctx, func(ctx context.Context) {
				for processNext(ctx, queue, syncFn) {
				}
			}, time.Second)
		}()
	}
	<-ctx.Done()
	logger.V(2).Info("Draining queue")
	queue.ShutDownWithDrain()
	wg.Wait()
}

// processNext handles one key; false once the queue is shut down.
func processNext(ctx context.Context, queue Queue, sync SyncFunc) bool {
	key, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(key)
	err := func() (err error) {
		// A panic in one reconcile must not take the manager down.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
				utilruntime.HandleErrorWithContext(ctx, err, "Reconcile panicked", "key", key)
			}
		}()
		return sync(ctx, key)
	}()
	if err == nil {
		queue.Forget(key)
		return true
	}
	klog.FromContext(ctx).V(2).Info("Requeuing after error", "key", key, "err", err)
	queue.AddRateLimited(key)
	return true
}

// Resync is one queue a resync pass fills and how to list its keys.
type Resync struct {
	Queue Queue
	List  func() []cache.ObjectName
}

// RunResync re-enqueues every key of every target once per period until
// ctx is done (SPEC R2: every workload object is reconciled at least once
// per --sync-period, which bounds how long a rotation takes to reach every
// mirror). One pass is one batch: every key of every queue gets the stamp
// taken at the tick, so the pass reads each source once (SPEC P1).
func RunResync(ctx context.Context, clk clock.WithTicker, period time.Duration, targets ...Resync) {
	ticker := clk.NewTicker(period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
			at, n := freshness.Now(), 0
			for _, t := range targets {
				keys := t.List()
				t.Queue.AddStamped(at, keys...)
				n += len(keys)
			}
			klog.FromContext(ctx).V(4).Info("Resync", "keys", n)
		}
	}
}

// Handle registers h on informer and appends to synced what reports that
// h has seen every object of the informer's initial list, not only that
// the cache has it: a worker that waits for it starts after the last
// initial add, so no key of the start-up is added after a source read
// began (SPEC P1).
func Handle(synced *[]cache.InformerSynced, informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := informer.AddEventHandler(h)
	if err != nil {
		return err
	}
	*synced = append(*synced, reg.HasSynced)
	return nil
}

// KeyOf returns the key of an informer object, unwrapping a tombstone.
func KeyOf(obj interface{}) (cache.ObjectName, bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	name, err := cache.ObjectToName(obj)
	if err != nil {
		return cache.ObjectName{}, false
	}
	return name, true
}

// Unwrap returns the object inside a tombstone, or obj itself.
func Unwrap(obj interface{}) interface{} {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}
