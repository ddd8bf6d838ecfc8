// Package source reads identities' source Secrets: always with an uncached
// GET, never from an informer (SPEC M6, M9, S1), and shared between
// concurrent reconciles (SPEC section 13).
//
// A reconcile never gets data older than its own start: it joins a read of
// the same Secret that started after it began, or else waits for the next
// read, which starts when the one in flight ends and is shared by everyone
// who arrived meanwhile. So at most one read of a Secret is in flight and
// one queued behind it; a fan-out or a resync of N objects sharing an
// identity costs about (pass duration / GET latency) reads, not N.
package source

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/captf/captf/pkg/metrics"
)

// Reader performs shared uncached reads of Secrets.
type Reader struct {
	client kubernetes.Interface

	mu  sync.Mutex
	seq uint64 // incremented at every read's start
	// reads holds, per Secret, the read in flight and the one queued after it.
	reads map[types.NamespacedName]*pair

	// onShare, when set (tests), is called under mu each time a caller
	// waits on a read it did not start: true when it joined the read in
	// flight, false when it queued for the next one.
	onShare func(joined bool)
}

type pair struct {
	current *call // in flight
	next    *call // starts when current ends; nil when nobody waits
}

type call struct {
	seq    uint64 // set when the read starts
	done   chan struct{}
	secret *corev1.Secret
	err    error
}

// NewReader returns a Reader using client for GETs.
func NewReader(client kubernetes.Interface) *Reader {
	metrics.Register()
	return &Reader{client: client, reads: map[types.NamespacedName]*pair{}}
}

// Ticket marks when a reconcile began; reads started after it may be shared.
type Ticket uint64

// Begin returns a ticket for a reconcile that begins now.
func (r *Reader) Begin() Ticket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Ticket(r.seq)
}

// Get returns the Secret namespace/name as the API server has it at some
// moment after the ticket was taken. The result is shared: callers must not
// modify it (DeepCopy first). A missing Secret is an apierrors NotFound error.
func (r *Reader) Get(ctx context.Context, t Ticket, namespace, name string) (*corev1.Secret, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	r.mu.Lock()
	p := r.reads[key]
	var c *call
	switch {
	case p == nil:
		// Nothing in flight: read now.
		c = r.start(key, &pair{})
	case p.current.seq > uint64(t):
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
	r.seq++
	c.seq = r.seq
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
	if p.next != nil {
		r.start(key, p)
	} else {
		delete(r.reads, key)
	}
	r.mu.Unlock()
	close(c.done)
}
