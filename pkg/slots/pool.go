package slots

import (
	"sync"
	"time"
)

// Config are a Pool's caps and its view of the Job cache.
type Config[K comparable] struct {
	// GlobalLimit is --max-active-jobs; 0 or less is no cap.
	GlobalLimit int
	// ClusterLimit returns cluster's cap (its spec.maxActiveJobs, else
	// --cluster-max-active-jobs); 0 or less is no cap. Never called with "".
	ClusterLimit func(cluster string) int
	// Active returns the keys whose Jobs have not finished, from the Job
	// cache: every one when cluster is "", else those under cluster's cap.
	Active func(cluster string) map[K]bool
	// Wake asks the waiters keys to ask again: a slot they may take freed.
	Wake func(keys []K)
	// TTL ends a reservation whose Job the cache never shows (a Job
	// deleted before the cache saw it): far longer than the cache's lag.
	TTL time.Duration
	// Observer, if not nil, is told of waits.
	Observer Observer
}

// Observer is told of waits (the metrics).
type Observer interface {
	// Waiting is the number of waiters of class held by scope now.
	Waiting(class Class, scope Scope, n int)
	// WaitBegan: a Job of class began to wait, held by scope.
	WaitBegan(class Class, scope Scope)
	// WaitEnded: a Job of class that waited got its slot after waited.
	WaitEnded(class Class, waited time.Duration)
}

// Ask is a Job about to start.
type Ask[K comparable] struct {
	Key   K
	Class Class
	// Cluster is the cluster whose cap the Job is under; "" for none.
	Cluster string
}

// Outcome is a decision with the caps it was made under.
type Outcome struct {
	Decision
	// Limit is the limit of the cap that holds the Job (Decision.Scope).
	Limit int
	// Since is when the Job began to wait (zero when it never waited).
	Since time.Time
}

// Pool decides Job starts under the caps, one at a time: the count, the
// decision and the reservation of a start happen under one lock, so
// workers that decide at once never take more slots than are free.
type Pool[K comparable] struct {
	cfg      Config[K]
	mu       sync.Mutex
	waiters  *Waiters[K]
	reserved *Reservations[K]
}

// NewPool returns a Pool with no waiter and no reservation: after a
// restart the counts come from the Job cache alone.
func NewPool[K comparable](cfg Config[K]) *Pool[K] {
	return &Pool[K]{cfg: cfg, waiters: NewWaiters[K](), reserved: NewReservations[K]()}
}

// gather counts the slots taken under a's caps and the waiters ahead of
// it. Called with mu held.
func (p *Pool[K]) gather(a Ask[K], now time.Time) Request {
	p.expire(now)
	r := Request{Class: a.Class}
	gAhead, cAhead := p.waiters.Ahead(a.Key, a.Class, a.Cluster, now)
	if p.cfg.GlobalLimit > 0 {
		r.Global = Cap{Limit: p.cfg.GlobalLimit, Active: p.reserved.Active(p.cfg.Active(""), ""), Ahead: gAhead}
	}
	if a.Cluster != "" {
		if limit := p.cfg.ClusterLimit(a.Cluster); limit > 0 {
			r.Cluster = Cap{Limit: limit, Active: p.reserved.Active(p.cfg.Active(a.Cluster), a.Cluster), Ahead: cAhead}
		}
	}
	return r
}

func outcome(d Decision, r Request) Outcome {
	o := Outcome{Decision: d}
	switch d.Scope {
	case Global:
		o.Limit = r.Global.Limit
	case Cluster:
		o.Limit = r.Cluster.Limit
	}
	return o
}

// Peek says whether a's Job would start now, and reserves nothing: a
// due object asks it before the reads that a start needs, so waiting
// costs no request. A Job that would not start waits, as with Take.
func (p *Pool[K]) Peek(a Ask[K], now time.Time) Outcome {
	return p.decide(a, now, false)
}

// Take decides a's Job. When it starts, a slot is reserved for it until
// its Job shows in the cache (Seen) or the start fails (Release); else
// it waits, in order, until a slot frees and Wake names it.
func (p *Pool[K]) Take(a Ask[K], now time.Time) Outcome {
	return p.decide(a, now, true)
}

func (p *Pool[K]) decide(a Ask[K], now time.Time, reserve bool) Outcome {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.gather(a, now)
	d := Decide(r)
	o := outcome(d, r)
	switch {
	case d.Start && !reserve:
		if w, ok := p.waiters.Get(a.Key); ok {
			o.Since = w.Since
		}
		return o
	case d.Start:
		p.reserved.Reserve(a.Key, a.Cluster, now)
		if w, ok := p.waiters.Remove(a.Key); ok {
			o.Since = w.Since
			if p.cfg.Observer != nil {
				p.cfg.Observer.WaitEnded(w.Class, now.Sub(w.Since))
			}
			p.observe()
		}
		return o
	}
	if p.waiters.Wait(a.Key, a.Class, a.Cluster, d.Scope, now) && p.cfg.Observer != nil {
		p.cfg.Observer.WaitBegan(a.Class, d.Scope)
	}
	w, _ := p.waiters.Get(a.Key)
	o.Since = w.Since
	p.observe()
	return o
}

// Seen ends key's reservation: its Job is in the cache, which counts it.
func (p *Pool[K]) Seen(key K) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reserved.Release(key)
}

// Release ends key's reservation when its start created no Job, and
// wakes the waiter the slot goes to.
func (p *Pool[K]) Release(key K, cluster string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reserved.Release(key) {
		p.wake(cluster, now)
	}
}

// Freed wakes the waiters that can use the slots free under the
// cluster-wide cap and cluster's: a Job under cluster ("" for none)
// finished or went.
func (p *Pool[K]) Freed(cluster string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wake(cluster, now)
}

// Forget drops key's wait: its object asked for no slot on its last pass
// (the Job is no longer due) or is gone. The waiters behind it move up.
func (p *Pool[K]) Forget(key K, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.waiters.Remove(key); ok {
		p.observe()
		p.wake(w.Cluster, now)
	}
}

// Waiting reports whether key waits.
func (p *Pool[K]) Waiting(key K) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.waiters.Get(key)
	return ok
}

// Reserved is the number of reservations (for tests).
func (p *Pool[K]) Reserved() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reserved.Len()
}

// wake names to Wake the first waiters of the cluster-wide order and of
// cluster's, as many as each has free slots. Called with mu held.
func (p *Pool[K]) wake(cluster string, now time.Time) {
	if p.waiters.Len() == 0 {
		return
	}
	p.expire(now)
	gFree := 0
	if p.cfg.GlobalLimit > 0 {
		gFree = Cap{Limit: p.cfg.GlobalLimit, Active: p.reserved.Active(p.cfg.Active(""), "")}.Free()
	}
	cFree := 0
	if cluster != "" {
		// A cluster without a cap of its own has no waiters held by it.
		if limit := p.cfg.ClusterLimit(cluster); limit > 0 {
			cFree = Cap{Limit: limit, Active: p.reserved.Active(p.cfg.Active(cluster), cluster)}.Free()
		}
	}
	if keys := p.waiters.Next(gFree, cluster, cFree); len(keys) > 0 {
		p.cfg.Wake(keys)
	}
}

// expire ends the reservations past their TTL and wakes for their slots.
// Called with mu held.
func (p *Pool[K]) expire(now time.Time) {
	if p.cfg.TTL <= 0 || p.reserved.Len() == 0 {
		return
	}
	for _, cluster := range p.reserved.Expire(now, p.cfg.TTL) {
		p.wake(cluster, now)
	}
}

// observe reports the waiters' counts. Called with mu held.
func (p *Pool[K]) observe() {
	if p.cfg.Observer == nil {
		return
	}
	for _, c := range Classes {
		for _, s := range Scopes {
			p.cfg.Observer.Waiting(c, s, p.waiters.Count(c, s))
		}
	}
}
