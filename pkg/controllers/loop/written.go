package loop

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
)

// Written remembers the status this process last wrote for each object, so
// "write only when it changed" is judged against what is stored, not only
// against the informer's copy. That copy can lag the manager's own last
// write (a watch interrupted by an API server restart, say): a pass that
// computes the status the cache still shows would otherwise skip the write
// and leave the newer, wrong, stored status in place.
type Written[T any] struct {
	mu   sync.Mutex
	last map[types.UID]T
}

// NewWritten returns an empty record.
func NewWritten[T any]() *Written[T] { return &Written[T]{last: map[types.UID]T{}} }

// NeedsWrite reports whether status must be written for the object with
// uid, whose cached status is cached: when it differs from the cache, or
// from what this process last wrote.
func (w *Written[T]) NeedsWrite(uid types.UID, cached, status T) bool {
	if !equality.Semantic.DeepEqual(cached, status) {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[uid]
	return ok && !equality.Semantic.DeepEqual(last, status)
}

// Record notes that status was written for uid.
func (w *Written[T]) Record(uid types.UID, status T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last[uid] = status
}

// Last returns the status this process last wrote for uid, if any.
func (w *Written[T]) Last(uid types.UID) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[uid]
	return last, ok
}

// Forget drops the record of uid (the object is gone).
func (w *Written[T]) Forget(uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, uid)
}
