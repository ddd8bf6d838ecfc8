// Package conflicts remembers where a foreign Secret holds a mirror's name
// (SPEC M7). The informer cannot see those Secrets (it selects
// captf.io/mirrored=true, M9), so the workload reconcile that meets one
// records it here and the identity controller reads it for
// status.mirrors.conflicted and MirrorsCurrent (SPEC section 13).
//
// A record expires unless it is seen again within its TTL. Every user of an
// identity is reconciled at least once per sync period (R2), so a conflict
// that still exists is re-recorded in time, while one whose last user went
// away (deleted, switched identity, namespace revoked) clears itself instead
// of needing every such path to remember it. The record is in memory: a new
// leader rebuilds it within one sync period.
//
// Expired records are dropped when their identity is read and, at most once
// per TTL, from every identity when a record is set: a record of an identity
// nobody reads any more (deleted while a user's reconcile still recorded a
// conflict) is gone within two TTLs (SPEC B15).
package conflicts

import (
	"sort"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Tracker is safe for concurrent use.
type Tracker struct {
	// OnChange, when set, is called (outside the lock) with an identity
	// whose set of conflicted namespaces changed.
	OnChange func(identity string)

	clock clock.PassiveClock
	ttl   time.Duration

	mu sync.Mutex
	// seen maps identity and namespace to when the conflict was last seen.
	seen map[string]map[string]time.Time
	// swept is when expired records were last dropped from every identity.
	swept time.Time
}

// New returns an empty Tracker whose records expire ttl after they were
// last seen; use at least two sync periods.
func New(clk clock.PassiveClock, ttl time.Duration) *Tracker {
	return &Tracker{clock: clk, ttl: ttl, seen: map[string]map[string]time.Time{}, swept: clk.Now()}
}

// Set records (true) or clears (false) a conflict for identity in namespace.
func (t *Tracker) Set(identity, namespace string, conflicted bool) {
	t.mu.Lock()
	now := t.clock.Now()
	if now.Sub(t.swept) > t.ttl {
		t.sweepLocked(now)
	}
	ns := t.seen[identity]
	_, had := ns[namespace]
	if conflicted {
		if ns == nil {
			ns = map[string]time.Time{}
			t.seen[identity] = ns
		}
		ns[namespace] = now
	} else {
		delete(ns, namespace)
		if len(ns) == 0 {
			delete(t.seen, identity)
		}
	}
	t.mu.Unlock()
	if had != conflicted && t.OnChange != nil {
		t.OnChange(identity)
	}
}

// Namespaces returns the namespaces with a live conflict for identity,
// sorted, dropping expired records.
func (t *Tracker) Namespaces(identity string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(identity, t.clock.Now())
	out := make([]string, 0, len(t.seen[identity]))
	for ns := range t.seen[identity] {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// expireLocked drops identity's expired records, and identity when none
// remain; t.mu is held.
func (t *Tracker) expireLocked(identity string, now time.Time) {
	for ns, at := range t.seen[identity] {
		if now.Sub(at) > t.ttl {
			delete(t.seen[identity], ns)
		}
	}
	if len(t.seen[identity]) == 0 {
		delete(t.seen, identity)
	}
}

// sweepLocked drops every expired record; t.mu is held.
func (t *Tracker) sweepLocked(now time.Time) {
	for identity := range t.seen {
		t.expireLocked(identity, now)
	}
	t.swept = now
}

// Len is the number of records kept, for tests and diagnostics.
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, ns := range t.seen {
		n += len(ns)
	}
	return n
}

// Forget drops every record of identity (it was deleted).
func (t *Tracker) Forget(identity string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.seen, identity)
}
