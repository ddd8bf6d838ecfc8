package slots

import (
	"slices"
	"sort"
	"time"
)

// Waiter is a Job that waits for a slot.
type Waiter[K comparable] struct {
	// Key names the object whose Job waits.
	Key K
	// Class is the Job's priority.
	Class Class
	// Since is when the object began to wait: within a class, the oldest
	// wait goes first.
	Since time.Time
	// Cluster is the cluster whose cap the Job is under; "" for none.
	Cluster string
	// Scope is the cap that held it when it last asked.
	Scope Scope
	// seq breaks ties between waits that began at the same instant.
	seq uint64
}

// before orders waiters: class, then the start of the wait, then arrival.
func (a *Waiter[K]) before(b *Waiter[K]) bool {
	if a.Class != b.Class {
		return a.Class < b.Class
	}
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return a.seq < b.seq
}

// Waiters are the Jobs that wait for a slot, in the order they get one.
// It is not safe for concurrent use: the controller holds one lock over
// its waiters, its reservations and each decision.
//
// A waiter held by the cluster-wide cap is in the global order; every
// waiter of a cluster is in that cluster's order. So a waiter whose own
// cluster is full never takes a cluster-wide slot from another cluster's
// Job, and a finishing Job wakes only the waiters that can use its slot
// (Next): the cost of a Job's event is the slots it frees, not the
// number of waiters.
type Waiters[K comparable] struct {
	byKey    map[K]*Waiter[K]
	global   []*Waiter[K]
	clusters map[string][]*Waiter[K]
	counts   map[[2]int]int
	seq      uint64
}

// NewWaiters returns an empty set.
func NewWaiters[K comparable]() *Waiters[K] {
	return &Waiters[K]{byKey: map[K]*Waiter[K]{}, clusters: map[string][]*Waiter[K]{}, counts: map[[2]int]int{}}
}

// Len is the number of waiters.
func (s *Waiters[K]) Len() int { return len(s.byKey) }

// Count is the number of waiters of class held by scope.
func (s *Waiters[K]) Count(class Class, scope Scope) int {
	return s.counts[[2]int{int(class), int(scope)}]
}

// Get returns key's waiter.
func (s *Waiters[K]) Get(key K) (Waiter[K], bool) {
	w, ok := s.byKey[key]
	if !ok {
		return Waiter[K]{}, false
	}
	return *w, true
}

// probe is where key's request of class would stand: its own place when
// it waits (with class, which may have changed), else after every waiter
// of its class so far.
func (s *Waiters[K]) probe(key K, class Class, cluster string, now time.Time) *Waiter[K] {
	if w, ok := s.byKey[key]; ok {
		return &Waiter[K]{Key: key, Class: class, Cluster: cluster, Since: w.Since, seq: w.seq}
	}
	return &Waiter[K]{Key: key, Class: class, Cluster: cluster, Since: now, seq: s.seq + 1}
}

// Ahead counts the waiters that go before key's request of class under
// the cluster-wide cap and under cluster's: the waiters held by the
// cluster-wide cap, and the waiters of cluster, that come first in order.
// key itself is never counted.
func (s *Waiters[K]) Ahead(key K, class Class, cluster string, now time.Time) (global, inCluster int) {
	p := s.probe(key, class, cluster, now)
	global = s.countBefore(s.global, p)
	if cluster != "" {
		inCluster = s.countBefore(s.clusters[cluster], p)
	}
	return global, inCluster
}

func (s *Waiters[K]) countBefore(list []*Waiter[K], p *Waiter[K]) int {
	n := sort.Search(len(list), func(i int) bool { return !list[i].before(p) })
	if own, ok := s.byKey[p.Key]; ok && n > 0 {
		// key's own entry, under its old class, may be in the prefix.
		if i := index(list, own); i >= 0 && i < n {
			n--
		}
	}
	return n
}

// Wait records that key's Job of class waits, held by scope. A key that
// already waits keeps the start of its wait; added is true when it did
// not wait before.
func (s *Waiters[K]) Wait(key K, class Class, cluster string, scope Scope, now time.Time) (added bool) {
	w, ok := s.byKey[key]
	if ok {
		s.unlink(w)
	} else {
		s.seq++
		w = &Waiter[K]{Key: key, Since: now, seq: s.seq}
		s.byKey[key] = w
	}
	w.Class, w.Cluster, w.Scope = class, cluster, scope
	s.link(w)
	return !ok
}

// Remove forgets key's wait and returns it.
func (s *Waiters[K]) Remove(key K) (Waiter[K], bool) {
	w, ok := s.byKey[key]
	if !ok {
		return Waiter[K]{}, false
	}
	s.unlink(w)
	delete(s.byKey, key)
	return *w, true
}

// Next returns the waiters a free slot should wake, first first: up to
// globalN of those held by the cluster-wide cap and up to clusterN of
// cluster's, each key once.
func (s *Waiters[K]) Next(globalN int, cluster string, clusterN int) []K {
	var out []K
	seen := map[K]bool{}
	take := func(list []*Waiter[K], n int) {
		for _, w := range list[:min(max(n, 0), len(list))] {
			if !seen[w.Key] {
				seen[w.Key] = true
				out = append(out, w.Key)
			}
		}
	}
	take(s.global, globalN)
	if cluster != "" {
		take(s.clusters[cluster], clusterN)
	}
	return out
}

func (s *Waiters[K]) link(w *Waiter[K]) {
	if w.Scope == Global {
		s.global = insert(s.global, w)
	}
	if w.Cluster != "" {
		s.clusters[w.Cluster] = insert(s.clusters[w.Cluster], w)
	}
	s.counts[[2]int{int(w.Class), int(w.Scope)}]++
}

func (s *Waiters[K]) unlink(w *Waiter[K]) {
	if w.Scope == Global {
		s.global = remove(s.global, w)
	}
	if w.Cluster != "" {
		l := remove(s.clusters[w.Cluster], w)
		if len(l) == 0 {
			delete(s.clusters, w.Cluster)
		} else {
			s.clusters[w.Cluster] = l
		}
	}
	k := [2]int{int(w.Class), int(w.Scope)}
	if s.counts[k]--; s.counts[k] == 0 {
		delete(s.counts, k)
	}
}

func insert[K comparable](list []*Waiter[K], w *Waiter[K]) []*Waiter[K] {
	i := sort.Search(len(list), func(i int) bool { return !list[i].before(w) })
	return slices.Insert(list, i, w)
}

func remove[K comparable](list []*Waiter[K], w *Waiter[K]) []*Waiter[K] {
	if i := index(list, w); i >= 0 {
		return slices.Delete(list, i, i+1)
	}
	return list
}

// index finds w in list, which is in order, by binary search.
func index[K comparable](list []*Waiter[K], w *Waiter[K]) int {
	i := sort.Search(len(list), func(i int) bool { return !list[i].before(w) })
	if i < len(list) && list[i] == w {
		return i
	}
	return -1
}
