package loop

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// deadline bounds every wait; reaching it is a failure, never an assertion.
const deadline = 10 * time.Second

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

// drainKeys takes every key out of q and returns them, marking them done.
func drainKeys(q Queue) []cache.ObjectName {
	var out []cache.ObjectName
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		out = append(out, k)
	}
	return out
}

// R2: the resync ticker re-enqueues every key the list returns once per
// period of the (fake) clock, every period, and stops when ctx ends.
func TestRunResyncEnqueuesEveryKeyEachPeriod(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q := NewQueue("test-resync", clock.RealClock{})
	defer q.ShutDown()
	const period = 10 * time.Minute

	var mu sync.Mutex
	keys := []cache.ObjectName{{Namespace: "a", Name: "x"}, {Namespace: "b", Name: "y"}}
	list := func() []cache.ObjectName {
		mu.Lock()
		defer mu.Unlock()
		return append([]cache.ObjectName(nil), keys...)
	}

	done := make(chan struct{})
	go func() {
		defer close(done)
		RunResync(ctx, clk, period, Resync{Queue: q, List: list})
	}()
	waitFor(t, "the resync ticker", clk.HasWaiters)

	// Nothing before a full period.
	clk.Step(period - time.Second)
	require.Zero(t, q.Len())

	clk.Step(time.Second)
	waitFor(t, "the first resync", func() bool { return q.Len() == 2 })
	require.ElementsMatch(t, keys, drainKeys(q))

	// Every period, with the keys listed then (a new object joins).
	mu.Lock()
	keys = append(keys, cache.ObjectName{Namespace: "c", Name: "z"})
	mu.Unlock()
	clk.Step(period)
	waitFor(t, "the second resync", func() bool { return q.Len() == 3 })
	require.ElementsMatch(t, list(), drainKeys(q))

	cancel()
	recv(t, "RunResync to return", done)
}

// The worker loop: success forgets the key, an error requeues it with
// backoff, a panic is an error (not a crash); on shutdown the loop drains
// (the item in flight finishes) and Run returns only after every worker has.
func TestRunProcessesRetriesAndDrainsOnShutdown(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := NewQueue("test-run", clock.RealClock{})

	ok := cache.ObjectName{Namespace: "ns", Name: "ok"}
	flaky := cache.ObjectName{Namespace: "ns", Name: "flaky"}
	panicky := cache.ObjectName{Namespace: "ns", Name: "panicky"}
	slow := cache.ObjectName{Namespace: "ns", Name: "slow"}

	var mu sync.Mutex
	calls := map[cache.ObjectName]int{}
	slowStarted := make(chan struct{})
	releaseSlow := make(chan struct{})
	var slowFinished atomic.Bool
	syncFn := func(ctx context.Context, key cache.ObjectName) error {
		mu.Lock()
		calls[key]++
		n := calls[key]
		mu.Unlock()
		switch key {
		case flaky:
			if n == 1 {
				return errors.New("transient")
			}
		case panicky:
			if n == 1 {
				panic("boom")
			}
		case slow:
			close(slowStarted)
			<-releaseSlow
			slowFinished.Store(true)
		}
		return nil
	}
	count := func(k cache.ObjectName) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[k]
	}

	returned := make(chan struct{})
	go func() {
		defer close(returned)
		Run(ctx, q, 2, syncFn)
	}()
	q.Add(ok)
	q.Add(flaky)
	q.Add(panicky)
	waitFor(t, "the retries", func() bool { return count(flaky) == 2 && count(panicky) == 2 && count(ok) == 1 })
	waitFor(t, "the retried keys to be forgotten", func() bool {
		return q.NumRequeues(flaky) == 0 && q.NumRequeues(panicky) == 0
	})

	q.Add(slow)
	recv(t, "the slow sync", slowStarted)
	cancel()
	waitFor(t, "the queue to shut down", q.ShuttingDown)
	q.Add(ok) // ignored after shutdown
	select {
	case <-returned:
		t.Fatal("Run returned while a sync was in flight: it must drain")
	default:
	}
	close(releaseSlow)
	recv(t, "Run to return", returned)
	require.True(t, slowFinished.Load())
	require.Equal(t, 1, count(ok), "no key is processed after shutdown")
}

// Event handlers unwrap tombstones (STYLE section 2).
func TestKeyOfAndUnwrapTombstones(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "name"}}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/name", Obj: s}
	require.Same(t, s, Unwrap(tomb))
	require.Same(t, s, Unwrap(s))
	for _, obj := range []interface{}{s, tomb} {
		key, ok := KeyOf(obj)
		require.True(t, ok)
		require.Equal(t, cache.ObjectName{Namespace: "ns", Name: "name"}, key)
	}
	_, ok := KeyOf("not an object")
	require.False(t, ok)
}
