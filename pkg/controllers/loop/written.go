package loop

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
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
type Written[T any] struct {
	mu   sync.Mutex
	last map[cache.ObjectName]record[T]
}

type record[T any] struct {
	uid    types.UID
	status T
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

// Record notes that status was written for the object key with uid.
func (w *Written[T]) Record(key cache.ObjectName, uid types.UID, status T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[key] = record[T]{uid: uid, status: status}
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
