package workload

import (
	"sync"

	"k8s.io/client-go/tools/cache"
)

// echoes remembers the resourceVersion of each mirror and Job this manager
// just wrote, so the informer event its own write causes does not
// re-enqueue the owners: that pass already knows the result, and a second
// one would cost another source read for nothing. Any other change (someone
// else's edit, a deletion, a Job's status) carries another resourceVersion
// or is a delete, and still reaches the owners (M8).
type echoes struct {
	mu      sync.Mutex
	written map[cache.ObjectName]string
}

func newEchoes() *echoes { return &echoes{written: map[cache.ObjectName]string{}} }

// wrote records that the manager wrote key at resourceVersion rv.
func (e *echoes) wrote(key cache.ObjectName, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.written[key] = rv
}

// isEcho reports whether an add or update event of key at rv is the echo of
// the manager's own last write, forgetting it either way once seen.
func (e *echoes) isEcho(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	want, ok := e.written[key]
	if !ok {
		return false
	}
	if want == rv {
		delete(e.written, key)
		return true
	}
	return false
}

// forget drops key (it was deleted).
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.written, key)
}

// retain drops the keys exists says are gone: the echo of a write whose
// object was deleted before the write returned (its delete event came
// first) would otherwise be kept for ever (SPEC B15).
func (e *echoes) retain(exists func(key cache.ObjectName) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for key := range e.written {
		if !exists(key) {
			delete(e.written, key)
		}
	}
}

func (e *echoes) len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.written)
}
