package slots

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

// O4: destroys first, then applies, then background; within a class the
// oldest wait first, and waits that began at once in arrival order.
func TestWaitersOrder(t *testing.T) {
	s := NewWaiters[string]()
	s.Wait("apply-old", Apply, "", Global, at(1))
	s.Wait("bg-old", Background, "", Global, at(0))
	s.Wait("apply-new", Apply, "", Global, at(5))
	s.Wait("destroy-new", Destroy, "", Global, at(9))
	s.Wait("apply-same-1", Apply, "", Global, at(3))
	s.Wait("apply-same-2", Apply, "", Global, at(3))
	s.Wait("destroy-old", Destroy, "", Global, at(2))
	require.Equal(t, []string{"destroy-old", "destroy-new", "apply-old", "apply-same-1", "apply-same-2", "apply-new", "bg-old"}, s.Next(100, "", 0))
	require.Equal(t, []string{"destroy-old", "destroy-new"}, s.Next(2, "", 0))
	require.Equal(t, 7, s.Len())
	require.Equal(t, 2, s.Count(Destroy, Global))
	require.Equal(t, 4, s.Count(Apply, Global))
	require.Equal(t, 1, s.Count(Background, Global))

	// A newcomer goes after every waiter of its class so far.
	g, _ := s.Ahead("new-apply", Apply, "", at(100))
	require.Equal(t, 6, g, "2 destroys and 4 applies go first")
	g, _ = s.Ahead("new-apply", Apply, "", at(2))
	require.Equal(t, 3, g, "since is the start of the wait: 2 destroys and apply-old")
	g, _ = s.Ahead("new-destroy", Destroy, "", at(100))
	require.Equal(t, 2, g)
	g, _ = s.Ahead("new-bg", Background, "", at(100))
	require.Equal(t, 7, g)
	// A waiter counts those before it, never itself.
	g, _ = s.Ahead("apply-same-2", Apply, "", at(100))
	require.Equal(t, 4, g)
	g, _ = s.Ahead("destroy-old", Destroy, "", at(100))
	require.Equal(t, 0, g)

	// An apply waiter whose object is deleted waits for its destroy,
	// keeping the start of its wait: it has waited longest of the destroys.
	require.False(t, s.Wait("apply-old", Destroy, "", Global, at(50)), "not a new wait")
	g, _ = s.Ahead("apply-old", Destroy, "", at(100))
	require.Equal(t, 0, g)
	// Asked as a destroy before its wait is updated: still not itself.
	g, _ = s.Ahead("apply-same-1", Destroy, "", at(100))
	require.Equal(t, 2, g, "the destroys older than its 3s: destroy-old (2s) and apply-old (1s)")
	w, ok := s.Get("apply-old")
	require.True(t, ok)
	require.Equal(t, at(1), w.Since)
	require.Equal(t, []string{"apply-old", "destroy-old", "destroy-new", "apply-same-1"}, s.Next(4, "", 0))

	w, ok = s.Remove("destroy-old")
	require.True(t, ok)
	require.Equal(t, Destroy, w.Class)
	_, ok = s.Remove("destroy-old")
	require.False(t, ok)
	require.Equal(t, 6, s.Len())
	require.Equal(t, 2, s.Count(Destroy, Global))
}

// O4: a waiter held by its cluster's cap is not in the cluster-wide order
// (it cannot use a cluster-wide slot); every waiter of a cluster is in
// its cluster's order.
func TestWaitersClusters(t *testing.T) {
	s := NewWaiters[string]()
	s.Wait("a1", Apply, "a", Cluster, at(1))
	s.Wait("a2", Apply, "a", Cluster, at(2))
	s.Wait("b1", Apply, "b", Global, at(3))
	s.Wait("a3", Apply, "a", Global, at(4))
	s.Wait("none", Apply, "", Global, at(5))

	g, c := s.Ahead("new", Apply, "a", at(10))
	require.Equal(t, 3, g, "b1, a3, none: a1 and a2 wait for cluster a")
	require.Equal(t, 3, c, "a1, a2, a3")
	g, c = s.Ahead("a2", Apply, "a", at(10))
	require.Equal(t, 0, g, "a2 asks again: none of the cluster-wide waiters is older")
	require.Equal(t, 1, c)
	g, c = s.Ahead("new", Destroy, "b", at(10))
	require.Equal(t, 0, g)
	require.Equal(t, 0, c)

	// A slot of cluster a wakes a's first; a cluster-wide slot the
	// cluster-wide first.
	require.Equal(t, []string{"a1"}, s.Next(0, "a", 1))
	require.Equal(t, []string{"b1", "a3"}, s.Next(2, "", 0))
	require.Equal(t, []string{"b1", "a1", "a2"}, s.Next(1, "a", 2))
	require.Equal(t, []string{"b1", "a3", "a1"}, s.Next(2, "a", 1), "a key once")
	require.Empty(t, s.Next(0, "zzz", 5))
	require.Empty(t, s.Next(-1, "a", 0))

	// a1 is let in by its cluster but now held cluster-wide: it moves into
	// the cluster-wide order at its place.
	s.Wait("a1", Apply, "a", Global, at(20))
	require.Equal(t, []string{"a1", "b1", "a3", "none"}, s.Next(10, "", 0))
	require.Equal(t, 1, s.Count(Apply, Cluster))
	require.Equal(t, 4, s.Count(Apply, Global))
	// Moving to another cluster.
	s.Wait("a2", Apply, "b", Cluster, at(20))
	require.Equal(t, []string{"a1", "a3"}, s.Next(0, "a", 5))
	require.Equal(t, []string{"a2", "b1"}, s.Next(0, "b", 5))
	for _, k := range []string{"a1", "a2", "a3", "b1", "none"} {
		_, ok := s.Remove(k)
		require.True(t, ok)
	}
	require.Zero(t, s.Len())
	require.Empty(t, s.clusters, "no empty cluster lists left behind")
	require.Empty(t, s.counts)
}

func TestReservations(t *testing.T) {
	r := NewReservations[string]()
	r.Reserve("x", "a", at(0))
	r.Reserve("y", "", at(10))
	r.Reserve("z", "a", at(20))
	require.Equal(t, 3, r.Active(nil, ""))
	require.Equal(t, 2, r.Active(nil, "a"))
	// A reserved key whose Job is in the cache counts once.
	require.Equal(t, 4, r.Active(map[string]bool{"x": true, "q": true}, ""))
	require.Equal(t, 3, r.Active(map[string]bool{"x": true, "q": true}, "a"))
	require.True(t, r.Release("y"))
	require.False(t, r.Release("y"))
	require.Equal(t, 2, r.Len())
	require.Empty(t, r.Expire(at(60), time.Minute))
	require.Equal(t, []string{"a"}, r.Expire(at(61), time.Minute))
	require.Equal(t, 1, r.Len())
}
