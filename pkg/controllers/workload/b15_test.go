package workload

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
)

// B15: a workload object that goes leaves nothing behind: its deletion
// enqueues its key (as the delete handler does), and the pass that finds
// it gone forgets its status record, its queue stamps and its backoff.
// Churning many uniquely named objects leaves every map empty.
func TestDeletedObjectsAreForgotten(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)))
	const n = 50
	q := f.c.queues[kindCluster]
	var objs []*v1alpha1.TerraformCluster
	for i := range n {
		// No identity: one status write, nothing else.
		c := newCluster(fmt.Sprintf("c-%d", i), func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = nil })
		objs = append(objs, c)
		f.seed(c)
		key := cache.ObjectName{Namespace: testNS, Name: c.Name}
		q.Add(key)
		q.AddRateLimited(key) // a failed pass's backoff
		require.NoError(t, f.sync(kindCluster, c.Name))
	}
	require.Equal(t, n, f.c.written.Len())
	before := freshness.Now()

	for _, c := range objs {
		require.NoError(t, f.inf.Clusters.Informer().GetIndexer().Delete(c))
		f.c.enqueueObject(c) // the delete handler
		require.NoError(t, f.sync(kindCluster, c.Name))
	}

	require.Zero(t, f.c.written.Len(), "status records")
	for _, c := range objs {
		key := cache.ObjectName{Namespace: testNS, Name: c.Name}
		require.Zero(t, q.NumRequeues(key), "backoff of %s", c.Name)
		require.Greater(t, q.AddedAt(key), before, "stamps of %s", c.Name)
	}
}

// B15: the echo of a write whose object was deleted before the write
// returned (its delete event came first) is swept; the echo of a cached
// mirror stays.
func TestSweepDropsEchoesOfGoneObjects(t *testing.T) {
	f := newFixture(t)
	m := newMirror(identityName, testNS, sourceData())
	f.seed(m)
	f.c.echoes.wrote(cache.ObjectName{Namespace: testNS, Name: m.Name}, "43")
	for i := range 20 {
		f.c.echoes.wrote(cache.ObjectName{Namespace: testNS, Name: fmt.Sprintf("gone-%d", i)}, "7")
	}
	f.c.sweep()
	require.Equal(t, 1, f.c.echoes.len())
	require.False(t, f.c.echoes.isEcho(cache.ObjectName{Namespace: testNS, Name: "gone-0"}, "7"))
	require.True(t, f.c.echoes.isEcho(cache.ObjectName{Namespace: testNS, Name: m.Name}, "43"))
}

// B15: until Run the controller's queues take nothing (a replica that does
// not lead keeps no key of the objects that come and go meanwhile); Run
// then queues every cached object once, as one batch, and reports the
// start-up done (HasSynced, which the identity controller waits for).
func TestQueuesHeldUntilRun(t *testing.T) {
	f := newHeldFixture(t)
	c := f.c
	var live []*v1alpha1.TerraformCluster
	for i := range 100 {
		cl := newCluster(fmt.Sprintf("c-%d", i))
		c.enqueueObject(cl) // added, then gone again: never cached
		if i%10 == 0 {
			f.seed(cl)
			live = append(live, cl)
		}
	}
	for _, q := range c.queues {
		require.Zero(t, q.Len(), "a held queue keeps nothing")
	}
	require.False(t, c.opened.Load())

	c.openQueues()
	require.Equal(t, len(live), c.queues[kindCluster].Len(), "every cached object, once")
	require.True(t, c.opened.Load(), "HasSynced once the caches are in too")
	at := c.queues[kindCluster].AddedAt(cache.ObjectName{Namespace: testNS, Name: live[0].Name})
	for _, cl := range live {
		require.Equal(t, at, c.queues[kindCluster].AddedAt(cache.ObjectName{Namespace: testNS, Name: cl.Name}), "one batch, one stamp (P1)")
	}
}

// B15: a mirror's change enqueues only the owners the caches hold. While
// objects churn through a shared mirror faster than the garbage collector
// removes their references (M5), the mirror names thousands of gone
// objects: enqueueing them all grew the queues' maps, which never shrink.
func TestMirrorChangeEnqueuesOnlyCachedOwners(t *testing.T) {
	f := newFixture(t)
	live := newCluster("live")
	f.seed(live)
	refs := []metav1.OwnerReference{refOf(kindCluster, live)}
	for i := range 1000 {
		refs = append(refs, refOf(kindCluster, newCluster(fmt.Sprintf("gone-%d", i))))
	}
	f.c.EnqueueOwners(newMirror(identityName, testNS, sourceData(), refs...))
	q := f.c.queues[kindCluster]
	require.Equal(t, 1, q.Len())
	key, _ := q.Get()
	q.Done(key)
	require.Equal(t, cache.ObjectName{Namespace: testNS, Name: "live"}, key)
}
