package loop

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/source"
)

// P1: every add path stamps the key: Add at once; AddAfter and
// AddRateLimited when the delay has passed, just before the add (until
// then the key keeps the stamp of its last add: the pending add has not
// happened, so a reconcile of the earlier one may use what it allowed).
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
	take(t, q, key)

	q.AddAfter(key, time.Minute)
	require.Equal(t, added, q.AddedAt(key), "a pending requeue keeps the last add's stamp")
	require.True(t, q.Pending(key))
	mid := freshness.Now()
	clk.Step(time.Minute)
	take(t, q, key)
	require.Greater(t, q.AddedAt(key), mid, "stamped when the delay passed, before the add")
	require.False(t, q.Pending(key))

	last := q.AddedAt(key)
	q.AddRateLimited(key)
	require.Equal(t, last, q.AddedAt(key))
	mid = freshness.Now()
	clk.Step(time.Hour)
	take(t, q, key)
	require.Greater(t, q.AddedAt(key), mid, "a rate-limited retry is stamped when it is added")

	other := cache.ObjectName{Namespace: "ns", Name: "never-added"}
	require.Greater(t, q.AddedAt(other), added, "a key never added accepts only reads from now on")

	q.Drop(key)
	require.Greater(t, q.AddedAt(key), added, "dropped: as if never added")
}

// P1: Wake adds a key later without stamping it: a drift check or a
// backoff's end is not a change, and reuses the read the key's last add
// allows. A key only ever woken accepts only reads from now on.
func TestWakeKeepsTheStamp(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-wake", clk)
	defer q.ShutDown()
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	q.Add(key)
	added := q.AddedAt(key)
	take(t, q, key)

	q.Wake(key, time.Minute)
	clk.Step(time.Minute)
	take(t, q, key)
	require.Equal(t, added, q.AddedAt(key), "a wake-up is not stamped")

	q.Wake(key, 0)
	take(t, q, key)
	require.Equal(t, added, q.AddedAt(key), "nor one due at once")

	woken := cache.ObjectName{Namespace: "ns", Name: "woken"}
	q.Wake(woken, time.Second)
	clk.Step(time.Second)
	take(t, q, woken)
	require.Greater(t, q.AddedAt(woken), added, "never stamped: only reads from now on")
}

// One timed add per key is pending, the earliest, as the embedded queue's
// AddAfter keeps it: a later one waits for it (its reconcile schedules
// again); an earlier one replaces it. An AddAfter merged with a Wake still
// stamps.
func TestTimedAddsOfAKeyMerge(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	q := NewQueue("test-merge", clk)
	defer q.ShutDown()
	key := cache.ObjectName{Namespace: "ns", Name: "a"}
	q.Add(key)
	take(t, q, key)
	added := q.AddedAt(key)

	q.Wake(key, time.Hour)
	q.Wake(key, 2*time.Hour)
	q.AddAfter(key, time.Minute) // earlier and stamping: replaces the hour
	clk.Step(time.Minute)
	take(t, q, key)
	require.Greater(t, q.AddedAt(key), added, "the stamping add came first")
	clk.Step(3 * time.Hour)
	time.Sleep(10 * time.Millisecond)
	require.Zero(t, q.Len(), "the replaced and the later wake-ups do not add the key again")

	q.Wake(key, time.Minute)
	q.AddAfter(key, time.Hour) // later: merged into the pending wake-up, which now stamps
	stamped := q.AddedAt(key)
	clk.Step(time.Minute)
	take(t, q, key)
	require.Greater(t, q.AddedAt(key), stamped)
}

// take waits for key to be added and takes it out of q, as a worker would.
func take(t *testing.T, q Queue, key cache.ObjectName) {
	t.Helper()
	require.Eventually(t, func() bool { return q.Len() == 1 }, 10*time.Second, time.Millisecond)
	got, _ := q.Get()
	require.Equal(t, key, got)
	q.Done(got)
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

// P1, property, with the batches S4, P2 and the resync make: however
// changes (a plain Add), pushed rotations (a batch stamped after the source
// changed), S4 enqueues (a batch stamped before a read of the source and
// added after it) and resync passes interleave with reconciles, a
// reconcile's ticket (its key's AddedAt when it begins) is never earlier
// than the stamp of an add that completed before it began, so the reader
// never gives it a read that began before that add (the reader's own
// property is source.TestP1NeverUsesAReadThatBeganBeforeTheTicket); and
// every add is followed by a reconcile that sees the source at least as new
// as the add requires: the version written before a push, the version the
// S4 read saw.
func TestReconcileNeverUsesAReadOlderThanItsAdds(t *testing.T) {
	const ns, name = "captf-system", "source"
	var version atomic.Int64
	client := fake.NewClientset()
	client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		v := version.Load()
		time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
		return true, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: strconv.FormatInt(v, 10)}}, nil
	})
	reader := source.NewReader(client)
	read := func(ticket freshness.Stamp) (int64, error) {
		s, err := reader.Get(context.Background(), ticket, ns, name)
		if err != nil {
			return 0, err
		}
		return strconv.ParseInt(s.ResourceVersion, 10, 64)
	}

	q := NewQueue("test-p1-property", clock.RealClock{})
	keys := []cache.ObjectName{{Namespace: "a", Name: "w1"}, {Namespace: "a", Name: "w2"}, {Namespace: "b", Name: "w3"}, {Namespace: "c", Name: "w4"}}
	var mu sync.Mutex
	need := map[cache.ObjectName]freshness.Stamp{} // per key, the latest stamp of a completed add (or a stamp before it)
	want := map[cache.ObjectName]int64{}           // per key, the newest version a completed add requires
	seen := map[cache.ObjectName]freshness.Stamp{} // per key, the latest ticket a reconcile had
	seenV := map[cache.ObjectName]int64{}          // per key, the newest version a reconcile saw
	var failures []string
	added := func(at freshness.Stamp, v int64, ks ...cache.ObjectName) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range ks {
			need[k], want[k] = max(need[k], at), max(want[k], v)
		}
	}

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, q, 3, func(_ context.Context, key cache.ObjectName) error {
			mu.Lock()
			n, w := need[key], want[key]
			mu.Unlock()
			ticket := q.AddedAt(key)
			v, err := read(ticket)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if ticket < n {
				failures = append(failures, fmt.Sprintf("%s: ticket %d is earlier than a completed add's stamp %d", key, ticket, n))
			}
			if v < w {
				failures = append(failures, fmt.Sprintf("%s: saw version %d, an add before the reconcile required %d", key, v, w))
			}
			seen[key], seenV[key] = max(seen[key], ticket), max(seenV[key], v)
			return nil
		})
	}()

	pause := func() { time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) }
	some := func() []cache.ObjectName {
		out := slices.Clone(keys)
		rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
		return out[:1+rand.IntN(len(out))]
	}
	var actors sync.WaitGroup
	const rounds = 150
	actors.Go(func() { // changes: each key's reconcile reads afresh
		for range rounds {
			pause()
			k := keys[rand.IntN(len(keys))]
			before := freshness.Now()
			q.Add(k)
			added(before, 0, k)
		}
	})
	actors.Go(func() { // pushed rotations (P2): the source changes, then its users are one batch
		for range rounds / 3 {
			pause()
			v := version.Add(1)
			at := freshness.Now()
			ks := some()
			q.AddStamped(at, ks...)
			added(at, v, ks...)
		}
	})
	actors.Go(func() { // S4: the stamp is the ticket of the read that found the mirrors stale
		for range rounds / 3 {
			pause()
			at := freshness.Now()
			v, err := read(at)
			if err != nil {
				t.Error(err)
				return
			}
			pause()
			ks := some()
			q.AddStamped(at, ks...)
			added(at, v, ks...)
		}
	})
	actors.Go(func() { // resync passes: every key, one stamp
		for range rounds / 10 {
			pause()
			at := freshness.Now()
			q.AddStamped(at, keys...)
			added(at, 0, keys...)
		}
	})
	actors.Wait()
	waitFor(t, "the queue to empty", func() bool { return q.Len() == 0 })
	cancel()
	recv(t, "Run to drain", done)

	mu.Lock()
	defer mu.Unlock()
	for _, f := range failures {
		t.Error(f)
	}
	for _, k := range keys {
		require.GreaterOrEqual(t, seen[k], need[k], "%s: the last add was followed by a reconcile with its stamp", k)
		require.GreaterOrEqual(t, seenV[k], want[k], "%s: the last reconcile saw what the adds required", k)
	}
	t.Logf("source GETs: %d", len(client.Actions()))
}
