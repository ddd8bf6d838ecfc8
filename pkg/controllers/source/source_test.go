package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

const (
	ns   = "captf-credentials"
	name = "cloud"
	// deadline bounds every wait; reaching it is a failure, never an assertion.
	deadline = 10 * time.Second
)

// server is a fake API server whose Secret GETs block until released, each
// returning the Secret's version at the moment the GET started, so a test
// sees which read a caller got.
type server struct {
	client  *fake.Clientset
	mu      sync.Mutex
	version int
	gets    int
	started chan int // the version each GET started at
	release chan struct{}
}

func newServer(t *testing.T) *server {
	s := &server{client: fake.NewClientset(), started: make(chan int, 64), release: make(chan struct{}, 64)}
	s.client.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s.mu.Lock()
		s.gets++
		v := s.version
		s.mu.Unlock()
		s.started <- v
		select {
		case <-s.release:
		case <-time.After(deadline):
			t.Errorf("a GET was never released")
		}
		if v < 0 {
			return true, nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
		}
		return true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: string(rune('0' + v))}}, nil
	})
	return s
}

func (s *server) setVersion(v int) { s.mu.Lock(); s.version = v; s.mu.Unlock() }

func (s *server) getCount() int { s.mu.Lock(); defer s.mu.Unlock(); return s.gets }

// awaitStart waits for the next GET to start and returns its version.
func (s *server) awaitStart(t *testing.T) int {
	t.Helper()
	select {
	case v := <-s.started:
		return v
	case <-time.After(deadline):
		t.Fatal("no GET started")
		return 0
	}
}

// watchSharing returns a channel that receives, for each caller that
// waits on a read it did not start, whether it joined the read in flight.
func watchSharing(r *Reader) <-chan bool {
	ch := make(chan bool, 64)
	r.onShare = func(joined bool) { ch <- joined }
	return ch
}

func awaitShare(t *testing.T, ch <-chan bool, want bool) {
	t.Helper()
	select {
	case got := <-ch:
		require.Equal(t, want, got, "joined the read in flight")
	case <-time.After(deadline):
		t.Fatal("no caller waited on a shared read")
	}
}

type result struct {
	rv  string
	err error
}

func get(r *Reader, ticket Ticket, out chan<- result) {
	go func() {
		s, err := r.Get(context.Background(), ticket, ns, name)
		if err != nil {
			out <- result{err: err}
			return
		}
		out <- result{rv: s.ResourceVersion}
	}()
}

func receive(t *testing.T, out <-chan result) result {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(deadline):
		t.Fatal("Get did not return")
		return result{}
	}
}

// Section 13: reconciles that began before a read started share it.
func TestGetJoinsAReadStartedAfterTheTicket(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	shares := watchSharing(r)
	out := make(chan result, 3)
	ticket := r.Begin()
	get(r, ticket, out)
	s.awaitStart(t)
	get(r, ticket, out)
	get(r, ticket, out)
	awaitShare(t, shares, true)
	awaitShare(t, shares, true)
	s.release <- struct{}{}
	for range 3 {
		require.Equal(t, "0", receive(t, out).rv)
	}
	require.Equal(t, 1, s.getCount(), "one GET for three reconciles")
}

// Section 13: a reconcile that began after the read in flight started does
// not take its (older) result; every such late arrival shares one follow-up
// read that starts when the first ends.
func TestLateArrivalsShareOneFreshFollowUpRead(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	shares := watchSharing(r)
	first := make(chan result, 1)
	get(r, r.Begin(), first)
	s.awaitStart(t) // version 0 is being read

	s.setVersion(1) // the Secret changes; then three reconciles begin
	late := make(chan result, 3)
	for range 3 {
		get(r, r.Begin(), late)
		awaitShare(t, shares, false)
	}
	s.release <- struct{}{}
	require.Equal(t, "0", receive(t, first).rv)
	require.Equal(t, 1, s.awaitStart(t), "the follow-up read starts after the first ended")
	s.release <- struct{}{}
	for range 3 {
		require.Equal(t, "1", receive(t, late).rv, "never data older than the reconcile's start")
	}
	require.Equal(t, 2, s.getCount(), "one follow-up GET for all late arrivals")
}

// M6: a reconcile after the reads ended reads again; NotFound is reported.
func TestGetReadsAgainAndReportsNotFound(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	out := make(chan result, 1)
	get(r, r.Begin(), out)
	s.awaitStart(t)
	s.release <- struct{}{}
	require.Equal(t, "0", receive(t, out).rv)

	s.setVersion(-1)
	get(r, r.Begin(), out)
	s.awaitStart(t)
	s.release <- struct{}{}
	require.True(t, apierrors.IsNotFound(receive(t, out).err))
	require.Equal(t, 2, s.getCount())
}

// A caller that gives up does not fail the others sharing its read.
func TestCancelledCallerDoesNotFailTheRead(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	shares := watchSharing(r)
	ticket := r.Begin()
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := make(chan error, 1)
	go func() {
		_, err := r.Get(ctx, ticket, ns, name)
		cancelled <- err
	}()
	s.awaitStart(t)
	other := make(chan result, 1)
	get(r, ticket, other)
	awaitShare(t, shares, true)
	cancel()
	select {
	case err := <-cancelled:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(deadline):
		t.Fatal("the cancelled caller did not return")
	}
	s.release <- struct{}{}
	require.Equal(t, "0", receive(t, other).rv)
}

// B15: Forget drops the latest read of a Secret no identity names any
// more, and a read in flight (or queued) when Forget is called is handed to
// its callers but not kept; a read asked for later is kept again.
func TestForgetKeepsNoRead(t *testing.T) {
	s := newServer(t)
	r := NewReader(s.client)
	ctx := context.Background()

	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := r.Get(ctx, r.Begin(), ns, name)
		require.NoError(t, err)
	}()
	s.awaitStart(t)
	s.release <- struct{}{}
	<-done
	require.Equal(t, 1, r.Len())
	r.Forget(ns, name)
	require.Zero(t, r.Len(), "the latest read is dropped")

	// Forgotten while in flight: the caller gets it, nobody keeps it.
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, err := r.Get(ctx, r.Begin(), ns, name)
		require.NoError(t, err)
	}()
	s.awaitStart(t)
	r.Forget(ns, name)
	s.release <- struct{}{}
	<-done
	require.Zero(t, r.Len(), "a read in flight when the Secret was forgotten is not kept")

	go func() { s.release <- struct{}{} }()
	_, err := r.Get(ctx, r.Begin(), ns, name)
	require.NoError(t, err)
	require.Equal(t, 1, r.Len(), "a later read is kept again")
}
