// Package conflicts remembers where a foreign Secret holds a mirror's name
// (SPEC M7). The informer cannot see those Secrets (it selects
// captf.io/mirrored=true, M9), so the workload reconcile that meets one
// records it here and the identity controller reads the count for
// status.mirrors.conflicted and MirrorsCurrent (SPEC section 13). The record
// is in memory: a new leader rebuilds it within one sync period.
package conflicts

import (
	"sort"
	"sync"
)

// Tracker is safe for concurrent use.
type Tracker struct {
	// OnChange, when set, is called (outside the lock) with an identity
	// whose set of conflicted namespaces changed.
	OnChange func(identity string)

	mu sync.Mutex
	// byIdentity maps identity name to the namespaces with a conflict.
	byIdentity map[string]map[string]bool
}

// New returns an empty Tracker.
func New() *Tracker { return &Tracker{byIdentity: map[string]map[string]bool{}} }

// Set records (true) or clears (false) a conflict for identity in namespace.
func (t *Tracker) Set(identity, namespace string, conflicted bool) {
	t.mu.Lock()
	ns := t.byIdentity[identity]
	changed := ns[namespace] != conflicted
	if conflicted {
		if ns == nil {
			ns = map[string]bool{}
			t.byIdentity[identity] = ns
		}
		ns[namespace] = true
	} else {
		delete(ns, namespace)
		if len(ns) == 0 {
			delete(t.byIdentity, identity)
		}
	}
	t.mu.Unlock()
	if changed && t.OnChange != nil {
		t.OnChange(identity)
	}
}

// Namespaces returns the namespaces with a conflict for identity, sorted.
func (t *Tracker) Namespaces(identity string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.byIdentity[identity]))
	for ns := range t.byIdentity[identity] {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// Forget drops every record of identity (it was deleted).
func (t *Tracker) Forget(identity string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byIdentity, identity)
}
