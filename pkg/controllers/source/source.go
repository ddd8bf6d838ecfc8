// Package source reads identities' source Secrets: always with an uncached
// GET, never from an informer (SPEC M6, M9, S1), and shared between
// concurrent reconciles (SPEC section 13).
//
// A caller passes a ticket: the moment its object's key was last added to
// the queue (SPEC P1), or the moment the reconcile began. It never gets a
// read that began before its ticket: it reuses the latest completed read of
// the Secret when that began after the ticket, joins the read in flight
// when that did, or else waits for the next read, which starts when the one
// in flight ends and is shared by everyone who arrived meanwhile. A resync
// pass adds every key first, so the pass's first reconcile of an identity
// reads its Secret and the rest of the pass reuses that read: one GET per
// Secret per pass (P1). A reconcile a change triggered was added later and
// reads afresh. At most one read of a Secret is in flight and one queued
// behind it.
//
// The latest completed read is kept per Secret (found or NotFound, never an
// error): that, and nothing else, is what P1 allows the manager to hold.
// [Reader.Forget] drops it when no identity needs it any more (SPEC B15), a
// read in flight included; nothing else outlives its read.
package source

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/metrics"
)

// Reader performs shared uncached reads of Secrets.
type Reader struct {
	client kubernetes.Interface

	mu sync.Mutex
	// reads holds, per Secret, the read in flight and the one queued after it.
	reads map[types.NamespacedName]*pair
	// last holds, per Secret, the latest completed read (P1).
	last map[types.NamespacedName]*call

	// onShare, when set (tests), is called under mu each time a caller
	// waits on a read it did not start: true when it joined the read in
	// flight, false when it queued for the next one.
	onShare func(joined bool)
	// onStart, when set (tests), is called under mu with each read's start.
	onStart func(began Ticket)
}

type pair struct {
	current *call // in flight
	next    *call // starts when current ends; nil when nobody waits
}

type call struct {
	began freshness.Stamp // set when the read starts
	// forgotten: Forget was called while the read was in flight or
	// queued, so it is not kept as the latest read.
	forgotten bool
	done      chan struct{}
	secret    *corev1.Secret
	err       error
}

// NewReader returns a Reader using client for GETs.
func NewReader(client kubernetes.Interface) *Reader {
	metrics.Register()
	return &Reader{client: client, reads: map[types.NamespacedName]*pair{}, last: map[types.NamespacedName]*call{}}
}

// Ticket is the earliest moment a read may have begun to serve a caller:
// when its key was last added to its queue (P1), or when it began.
type Ticket = freshness.Stamp

// Begin returns a ticket for a reconcile that begins now: it gets a read
// that begins later.
func (r *Reader) Begin() Ticket { return freshness.Now() }

// Get returns the Secret namespace/name as the API server has it at some
// moment after the ticket was taken. The result is shared: callers must not
// modify it (DeepCopy first). A missing Secret is an apierrors NotFound error.
func (r *Reader) Get(ctx context.Context, t Ticket, namespace, name string) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	p := r.reads[key]
	var c *call
	switch last := r.last[key]; {
	case last != nil && last.began > t:
		// P1: a completed read that began after the key was added.
		r.mu.Unlock()
		r.shared(true)
		return last.secret, last.err
	case p == nil:
		// Nothing in flight: read now.
		c = r.start(key, &pair{})
	case p.current.began > t:
		// In flight and started after this reconcile began: fresh enough.
		c = p.current
		r.shared(true)
	default:
		// In flight but older than this reconcile: wait for the next read.
		if p.next == nil {
			p.next = &call{done: make(chan struct{})}
		}
		c = p.next
		r.shared(false)
	}
	r.mu.Unlock()
	select {
	case <-c.done:
		return c.secret, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (r *Reader) shared(joined bool) {
	if r.onShare != nil {
		r.onShare(joined)
	}
}

// start makes c (or a new call) the current read of key and runs it; r.mu
// is held.
func (r *Reader) start(key types.NamespacedName, p *pair) *call {
	c := p.next
	if c == nil {
		c = &call{done: make(chan struct{})}
	}
	c.began = freshness.Now()
	if r.onStart != nil {
		r.onStart(c.began)
	}
	p.current, p.next = c, nil
	r.reads[key] = p
	go r.run(key, p, c)
	return c
}

// run performs one GET, on its own context so one caller's cancellation
// does not fail the others sharing it, then starts the queued read if any.
func (r *Reader) run(key types.NamespacedName, p *pair, c *call) {
	c.secret, c.err = r.client.CoreV1().Secrets(key.Namespace).Get(context.Background(), key.Name, metav1.GetOptions{})
	switch {
	case c.err == nil:
		metrics.SourceReads.WithLabelValues(metrics.ReadFound).Inc()
	case apierrors.IsNotFound(c.err):
		metrics.SourceReads.WithLabelValues(metrics.ReadNotFound).Inc()
	default:
		metrics.SourceReads.WithLabelValues(metrics.ReadError).Inc()
	}
	r.mu.Lock()
	if (c.err == nil || apierrors.IsNotFound(c.err)) && !c.forgotten {
		if l := r.last[key]; l == nil || l.began < c.began {
			r.last[key] = c
		}
	}
	if p.next != nil {
		r.start(key, p)
	} else {
		delete(r.reads, key)
	}
	r.mu.Unlock()
	close(c.done)
}

// Forget drops the latest read of the Secret namespace/name, and keeps none
// of a read already in flight, when no identity names it any more (it was
// deleted or names another Secret, SPEC B15). A caller still waiting gets
// its read; a later Get reads afresh.
func (r *Reader) Forget(namespace, name string) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.last, key)
	if p := r.reads[key]; p != nil {
		for _, c := range []*call{p.current, p.next} {
			if c != nil {
				c.forgotten = true
			}
		}
	}
}

// Len is the number of Secrets whose latest read is kept, for tests and
// diagnostics.
func (r *Reader) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.last)
}
