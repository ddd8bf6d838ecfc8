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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

const (
	testNamespace = "captf-system"
	testName      = "cloud-creds"
	// secretValue is a recognisable credential (X1).
	secretValue = "s3cr3t-VALUE-x1"
	// deadline bounds every wait; reaching it is a failure, never an assertion.
	deadline = 10 * time.Second
)

// gate is a reactor that blocks every GET of a Secret until released and
// reports each GET that reaches it. fake.Clientset runs reactors under its
// own lock, so a second GET queues behind a blocked one before reaching the
// reactor; tests observe reads that started through the Reader's in-flight
// map instead.
type gate struct {
	started chan string
	release chan struct{}
	once    sync.Once
}

func newGate() *gate {
	return &gate{started: make(chan string, 16), release: make(chan struct{})}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) reactor(action k8stesting.Action) (bool, runtime.Object, error) {
	g.started <- action.(k8stesting.GetAction).GetName()
	<-g.release
	// Fall through to the object tracker.
	return false, nil, nil
}

// doneSignal is a context whose Done method reports that it was called: the
// Reader calls it only in the select that waits for a shared read, so a call
// proves the caller joined the read in flight (SPEC section 13).
type doneSignal struct {
	context.Context
	called chan struct{}
	once   sync.Once
}

func (d *doneSignal) Done() <-chan struct{} {
	d.once.Do(func() { close(d.called) })
	return d.Context.Done()
}

func newSource() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: testName, UID: "uid-source"},
		Data:       map[string][]byte{"API_KEY": []byte(secretValue)},
	}
}

func getCount(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// inflightSeq returns the sequence number of the read of the test Secret in
// flight, 0 when none.
func (r *Reader) inflightSeq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.inflight[types.NamespacedName{Namespace: testNamespace, Name: testName}]; ok {
		return c.seq
	}
	return 0
}

type result struct {
	secret *corev1.Secret
	err    error
}

// Section 13 and M6: a Get whose ticket was taken before an in-flight read
// started joins that read (one GET, one shared result); a Get whose ticket
// was taken after the read started does not join it and reads again, so it
// never gets data older than its own start.
func TestGetSharesOnlyReadsStartedAfterTheTicket(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(newSource())
	g := newGate()
	defer g.open()
	client.PrependReactor("get", "secrets", g.reactor)
	r := NewReader(client)

	early := r.Begin() // a reconcile that began before any read

	// A: starts the read and blocks in the API call.
	aDone := make(chan result, 1)
	go func() {
		s, err := r.Get(ctx, early, testNamespace, testName)
		aDone <- result{s, err}
	}()
	require.Equal(t, testName, recv(t, "A's GET", g.started))
	readA := r.inflightSeq()
	require.NotZero(t, readA)

	// B: began before A's read started, so it joins it.
	bCtx := &doneSignal{Context: ctx, called: make(chan struct{})}
	bDone := make(chan result, 1)
	go func() {
		s, err := r.Get(bCtx, early, testNamespace, testName)
		bDone <- result{s, err}
	}()
	recv(t, "B waiting on the shared read", bCtx.called)
	require.Equal(t, readA, r.inflightSeq(), "B must not start a read of its own")

	// C: its ticket is taken after A's read started; it must start its own.
	late := r.Begin()
	cDone := make(chan result, 1)
	go func() {
		s, err := r.Get(ctx, late, testNamespace, testName)
		cDone <- result{s, err}
	}()
	waitFor(t, "C to start a read of its own", func() bool { return r.inflightSeq() > readA })

	g.open()
	a, b, c := recv(t, "A", aDone), recv(t, "B", bDone), recv(t, "C", cDone)
	for _, res := range []result{a, b, c} {
		require.NoError(t, res.err)
		require.Equal(t, []byte(secretValue), res.secret.Data["API_KEY"])
	}
	require.Same(t, a.secret, b.secret, "B shares A's result")
	require.NotSame(t, a.secret, c.secret, "C read on its own")
	require.Equal(t, 2, getCount(client), "A and C read; B joined A")
	require.Zero(t, r.inflightSeq(), "finished reads leave the in-flight map")
}

// M6: every Get that finds no read in flight makes a fresh uncached GET
// (no caching between reads), and a missing Secret is a NotFound error.
func TestGetReadsAgainEachTimeAndReportsNotFound(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(newSource())
	r := NewReader(client)

	for i := 1; i <= 3; i++ {
		s, err := r.Get(ctx, r.Begin(), testNamespace, testName)
		require.NoError(t, err)
		require.Equal(t, []byte(secretValue), s.Data["API_KEY"])
		require.Equal(t, i, getCount(client))
	}

	_, err := r.Get(ctx, r.Begin(), testNamespace, "missing")
	require.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// Section 13: a caller that joins a shared read and whose context ends
// returns its context's error; the read itself is not cancelled for the
// others.
func TestGetJoinedCallerCancellationDoesNotFailTheRead(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset(newSource())
	g := newGate()
	defer g.open()
	client.PrependReactor("get", "secrets", g.reactor)
	r := NewReader(client)
	ticket := r.Begin()

	aDone := make(chan result, 1)
	go func() {
		s, err := r.Get(ctx, ticket, testNamespace, testName)
		aDone <- result{s, err}
	}()
	recv(t, "A's GET", g.started)

	bCtx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := r.Get(bCtx, ticket, testNamespace, testName)
	require.ErrorIs(t, err, context.Canceled)

	g.open()
	a := recv(t, "A", aDone)
	require.NoError(t, a.err)
	require.Equal(t, 1, getCount(client))
}
