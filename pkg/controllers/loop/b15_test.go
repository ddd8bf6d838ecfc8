package loop

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/controllers/freshness"
)

// tracked is the number of keys whose stamps the queue keeps.
func tracked(q Queue) int {
	tq := q.(*trackingQueue)
	tq.mu.Lock()
	defer tq.mu.Unlock()
	return len(tq.stamps)
}

// B15: Drop forgets a gone key's stamps and backoff, also while a timed
// or rate-limited add of it is pending, and that add, when it fires, does
// not bring the stamps back. Churning many keys leaves nothing behind.
func TestDropForgetsEverythingAboutAKey(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-b15-drop", clk)
	defer q.ShutDown()
	const n = 200
	for i := range n {
		key := cache.ObjectName{Namespace: "ns", Name: fmt.Sprintf("o-%d", i)}
		q.Add(key)
		for range 3 {
			q.AddRateLimited(key) // a failing reconcile's backoff
		}
		q.AddAfter(key, time.Hour) // a timed requeue still pending
		require.Equal(t, 3, q.NumRequeues(key))
	}
	require.Equal(t, n, tracked(q))

	before := freshness.Now()
	for i := range n {
		key := cache.ObjectName{Namespace: "ns", Name: fmt.Sprintf("o-%d", i)}
		q.Drop(key)
		require.Zero(t, q.NumRequeues(key), "the backoff of a gone key is forgotten")
		require.Greater(t, q.AddedAt(key), before, "dropped: as if never added")
	}
	require.Zero(t, tracked(q), "no stamps are kept for gone keys, even with adds pending")

	// The pending adds fire: each key is added once more (its reconcile
	// finds the object gone) but its stamps do not come back.
	clk.Step(2 * time.Hour)
	require.Eventually(t, func() bool { return q.Len() == n }, 10*time.Second, time.Millisecond)
	require.Zero(t, tracked(q), "a timed add that fires after Drop recreates nothing")
}

// A key dropped and then added again (an object of the same name created)
// is tracked afresh, and a timed add of the earlier object does not
// disturb its new stamps.
func TestDropThenAddAgain(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-b15-readd", clk)
	defer q.ShutDown()
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	q.AddAfter(key, time.Minute)
	q.Drop(key)
	q.Add(key) // the new object's first add
	stamped := q.AddedAt(key)
	got, _ := q.Get()
	q.Done(got)
	q.AddAfter(key, time.Hour) // the new object's own timed add
	clk.Step(time.Minute)      // the earlier object's add fires
	require.Eventually(t, func() bool { return q.Len() == 1 }, 10*time.Second, time.Millisecond)
	require.Equal(t, stamped, q.AddedAt(key), "the earlier object's add does not stamp the new one")
	got, _ = q.Get()
	q.Done(got)
	before := freshness.Now()
	clk.Step(time.Hour) // the new object's add fires, stamped
	require.Eventually(t, func() bool { return q.Len() == 1 }, 10*time.Second, time.Millisecond)
	require.Greater(t, q.AddedAt(key), before)
}

// B15: a held queue (a replica that does not lead) keeps nothing of what is
// added on any path, so keys of objects that come and go while it waits
// cannot pile up; once open it takes adds again.
func TestHeldQueueKeepsNothing(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-b15-held", clk)
	defer q.ShutDown()
	q.Hold()
	for i := range 100 {
		key := cache.ObjectName{Namespace: "ns", Name: fmt.Sprintf("o-%d", i)}
		q.Add(key)
		q.AddStamped(freshness.Now(), key)
		q.AddAfter(key, time.Second)
		q.AddRateLimited(key)
	}
	clk.Step(time.Hour)
	require.Zero(t, q.Len())
	require.Zero(t, tracked(q))

	q.Open()
	q.Add(cache.ObjectName{Namespace: "ns", Name: "a"})
	require.Equal(t, 1, q.Len())
}
