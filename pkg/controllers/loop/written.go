package loop

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Written remembers the status this process last wrote for each object, so
// "write only when it changed" is judged against what is stored, not only
// against the informer's copy. That copy can lag the manager's own last
// write (a watch interrupted by an API server restart, say): a pass that
// computes the status the cache still shows would otherwise skip the write
// and leave the newer, wrong, stored status in place.
//
// Records are kept by key and hold the object's UID: a record of an earlier
// object of the same name does not count, and the reconcile that finds its
// object gone forgets the key (SPEC B15). That reconcile comes after any
// pass of the object that was still writing (a queue hands a key to one
// worker at a time), so no record outlives its object.
//
// A record is needed only until the cache shows the write: it also holds
// the write's resourceVersion, and Observe drops it when the informer
// delivers that version. The cache then holds the same status, and every
// later copy is newer, so judging against the cache alone is as good.
// Without that, a manager that wrote every object's status kept a second
// copy of each (issue 25, SPEC P3: 25 MiB over 15,000 objects).
type Written[T any] struct {
	mu   sync.Mutex
	last map[cache.ObjectName]record[T]
}

type record[T any] struct {
	uid types.UID
	// version is the resourceVersion the write stored.
	version string
	status  T
}

// NewWritten returns an empty record.
func NewWritten[T any]() *Written[T] { return &Written[T]{last: map[cache.ObjectName]record[T]{}} }

// NeedsWrite reports whether status must be written for the object key
// with uid, whose cached status is cached: when it differs from the cache,
// or from what this process last wrote.
func (w *Written[T]) NeedsWrite(key cache.ObjectName, uid types.UID, cached, status T) bool {
	if !equality.Semantic.DeepEqual(cached, status) {
		return true
	}
	last, ok := w.Last(key, uid)
	return ok && !equality.Semantic.DeepEqual(last, status)
}

// Record notes that status was written for the object key with uid and
// stored at resourceVersion version. shown is the cache's copy of the
// object read after the write (nil when it has none): when it already
// shows the write, nothing needs recording. Reading it after recording
// leaves no gap: an informer event of the version delivered before that
// read is in the cache's copy, one delivered after it meets the record in
// Observe.
func (w *Written[T]) Record(key cache.ObjectName, uid types.UID, version string, status T, shown func() metav1.Object) {
	w.mu.Lock()
	w.last[key] = record[T]{uid: uid, version: version, status: status}
	w.mu.Unlock()
	if o := shown(); o != nil {
		w.Observe(o)
	}
}

// Observe drops the record of obj's key when obj, the informer's copy, is
// the version the record's write stored: the cache has caught up. Call it
// from the informer's add and update handlers.
func (w *Written[T]) Observe(obj interface{}) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}
	w.mu.Lock()
	defer w.mu.Unlock()
	// An empty version (a fake client's) tells nothing.
	if r, ok := w.last[key]; ok && r.version != "" && r.uid == o.GetUID() && r.version == o.GetResourceVersion() {
		delete(w.last, key)
	}
}

// Shown returns a function reading key from store, for Record.
func Shown(store cache.Store, key cache.ObjectName) func() metav1.Object {
	return func() metav1.Object {
		obj, ok, err := store.GetByKey(key.String())
		if err != nil || !ok {
			return nil
		}
		o, _ := obj.(metav1.Object)
		return o
	}
}

// Last returns the status this process last wrote for the object key with
// uid, if any.
func (w *Written[T]) Last(key cache.ObjectName, uid types.UID) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.last[key]
	if !ok || r.uid != uid {
		var zero T
		return zero, false
	}
	return r.status, true
}

// Forget drops the record of key (its object is gone).
func (w *Written[T]) Forget(key cache.ObjectName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}

// Len is the number of records, for tests and diagnostics.
func (w *Written[T]) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last)
}
