package loop

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/controllers/freshness"
)

// P1: every add path stamps the key: Add at once; AddAfter and
// AddRateLimited only when the delay has passed (Never until then, so a
// reconcile of an earlier add never takes a read from before the requeue).
func TestQueueStampsEveryAddPath(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-stamps", clk)
	defer q.ShutDown()
	key := cache.ObjectName{Namespace: "ns", Name: "a"}

	before := freshness.Now()
	q.Add(key)
	added := q.AddedAt(key)
	require.Greater(t, added, before, "Add stamps the key")
	require.Less(t, added, freshness.Now())

	q.AddAfter(key, time.Minute)
	require.Equal(t, freshness.Never, q.AddedAt(key), "a pending requeue accepts no earlier read")
	mid := freshness.Now()
	clk.Step(time.Minute)
	require.Eventually(t, func() bool { return q.AddedAt(key) != freshness.Never }, 10*time.Second, time.Millisecond)
	require.Greater(t, q.AddedAt(key), mid, "stamped when the delay passed")

	q.AddRateLimited(key)
	require.Equal(t, freshness.Never, q.AddedAt(key), "a rate-limited retry is stamped when it is added")
	clk.Step(time.Hour)
	require.Eventually(t, func() bool { return q.AddedAt(key) != freshness.Never }, 10*time.Second, time.Millisecond)

	other := cache.ObjectName{Namespace: "ns", Name: "never-added"}
	require.Greater(t, q.AddedAt(other), added, "a key never added accepts only reads from now on")

	q.Drop(key)
	require.Greater(t, q.AddedAt(key), added, "dropped: as if never added")
}

// P1: a batch shares one stamp taken before its first add, so a read that
// begins after the stamp serves every key of the batch; a key that has a
// later stamp (a change enqueued it meanwhile) keeps it.
func TestAddStampedSharesOneStampAndKeepsLater(t *testing.T) {
	q := NewQueue("test-batch", clocktesting.NewFakeClock(time.Now()))
	defer q.ShutDown()
	a, b := cache.ObjectName{Namespace: "ns", Name: "a"}, cache.ObjectName{Namespace: "ns", Name: "b"}

	at := freshness.Now()
	q.Add(b) // a change after the batch's stamp
	changed := q.AddedAt(b)
	q.AddStamped(at, a, b)
	require.Equal(t, at, q.AddedAt(a), "the batch's stamp")
	require.Equal(t, changed, q.AddedAt(b), "a later stamp is kept")
	require.Equal(t, 2, q.Len())
}

// P1: one resync pass stamps every key of every queue with one stamp.
func TestRunResyncStampsAllQueuesAtOnce(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	q1, q2 := NewQueue("test-r1", clock.RealClock{}), NewQueue("test-r2", clock.RealClock{})
	defer q1.ShutDown()
	defer q2.ShutDown()
	k1, k2 := cache.ObjectName{Namespace: "a", Name: "x"}, cache.ObjectName{Namespace: "b", Name: "y"}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunResync(ctx, clk, time.Minute,
			Resync{Queue: q1, List: func() []cache.ObjectName { return []cache.ObjectName{k1} }},
			Resync{Queue: q2, List: func() []cache.ObjectName { return []cache.ObjectName{k2} }})
	}()
	waitFor(t, "the resync ticker", clk.HasWaiters)
	before := freshness.Now()
	clk.Step(time.Minute)
	waitFor(t, "the resync", func() bool { return q1.Len() == 1 && q2.Len() == 1 })
	require.Greater(t, q1.AddedAt(k1), before)
	require.Equal(t, q1.AddedAt(k1), q2.AddedAt(k2), "one stamp for the whole pass")
	cancel()
	recv(t, "RunResync to return", done)
}
