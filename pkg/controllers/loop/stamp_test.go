package loop

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
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
