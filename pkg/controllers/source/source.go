// Package source reads identities' source Secrets: always with an uncached
// GET, never from an informer (SPEC M6, M9, S1), and shared between
// concurrent reconciles (SPEC section 13): a reconcile joins a read of the
// same Secret that is in flight and started after the reconcile began, so it
// never gets data older than its own start, and a fan-out of N objects that
// share an identity costs far fewer than N reads.
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

	mu       sync.Mutex
	seq      uint64 // incremented at every read's start
	inflight map[types.NamespacedName]*call
}

type call struct {
	seq    uint64
	done   chan struct{}
	secret *corev1.Secret
	err    error
}

// NewReader returns a Reader using client for GETs.
func NewReader(client kubernetes.Interface) *Reader {
	metrics.Register()
	return &Reader{client: client, inflight: map[types.NamespacedName]*call{}}
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
	if c, ok := r.inflight[key]; ok && c.seq > uint64(t) {
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.secret, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.seq++
	c := &call{seq: r.seq, done: make(chan struct{})}
	r.inflight[key] = c
	r.mu.Unlock()

	// The read runs on its own context so one caller's cancellation does not
	// fail the others sharing it.
	c.secret, c.err = r.client.CoreV1().Secrets(namespace).Get(context.WithoutCancel(ctx), name, metav1.GetOptions{})
	switch {
	case c.err == nil:
		metrics.SourceReads.WithLabelValues(metrics.ReadFound).Inc()
	case apierrors.IsNotFound(c.err):
		metrics.SourceReads.WithLabelValues(metrics.ReadNotFound).Inc()
	default:
		metrics.SourceReads.WithLabelValues(metrics.ReadError).Inc()
	}
	r.mu.Lock()
	if r.inflight[key] == c {
		delete(r.inflight, key)
	}
	r.mu.Unlock()
	close(c.done)
	return c.secret, c.err
}
