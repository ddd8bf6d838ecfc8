package identity

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
)

// B15: an identity that goes leaves nothing behind: the delete handler
// drops the reader's latest read of its source, and the pass that finds it
// gone forgets its status record, its conflicts, its staleness, its queue
// stamps and its backoff. Churning many identities leaves every map empty.
func TestDeletedIdentitiesAreForgotten(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	f.seed(newSource(sourceData()))
	const n = 50
	var ids []*v1alpha1.TerraformClusterIdentity
	for i := range n {
		id := newIdentity(fmt.Sprintf("id-%d", i), allowAll())
		ids = append(ids, id)
		f.seed(id)
		key := cache.ObjectName{Name: id.Name}
		f.queue.Add(key)
		f.queue.AddRateLimited(key) // a failed pass's backoff
		require.NoError(t, f.sync(id.Name))
		f.Tracker.Set(id.Name, "ns-c", true) // a user met a foreign Secret
	}
	require.Equal(t, n, f.c.written.Len())
	require.Equal(t, 1, f.reader.Len(), "the shared source's latest read")
	before := freshness.Now()

	handler := f.c.identityHandler()
	for _, id := range ids {
		require.NoError(t, f.inf.Identities.Informer().GetIndexer().Delete(id))
		handler.OnDelete(id) // as the informer calls it: enqueues the key
		require.NoError(t, f.sync(id.Name))
	}

	require.Zero(t, f.c.written.Len(), "status records")
	require.Zero(t, f.Tracker.Len(), "conflict records")
	require.Zero(t, f.reader.Len(), "the source's latest read")
	f.c.mu.Lock()
	require.Empty(t, f.c.staleSince, "staleness")
	f.c.mu.Unlock()
	for _, id := range ids {
		key := cache.ObjectName{Name: id.Name}
		require.Zero(t, f.queue.NumRequeues(key), "backoff of %s", id.Name)
		require.Greater(t, f.queue.AddedAt(key), before, "stamps of %s", id.Name)
	}
}

// B15: an identity that names another source Secret drops the latest read
// of the one it named.
func TestSecretRefChangeForgetsTheOldRead(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	id := newIdentity(identityName, allowAll())
	f.seed(newSource(sourceData()), id)
	_, err := f.reader.Get(context.Background(), f.reader.Begin(), sourceNS, sourceName)
	require.NoError(t, err)
	require.Equal(t, 1, f.reader.Len())

	moved := id.DeepCopy()
	moved.Spec.SecretRef.Name = "elsewhere"
	moved.Generation++
	f.c.identityHandler().OnUpdate(id, moved)
	require.Zero(t, f.reader.Len())
}

// B15: until Run the queue takes nothing, names that tenants' Jobs and
// mirrors carry included (a replica that does not lead would keep them for
// ever); Run then queues every cached identity.
func TestQueueHeldUntilRun(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	c, err := newController(f.Ctx, f.Kube, f.Captf, f.inf, f.reader, f.Tracker, func(freshness.Stamp, ...metav1.Object) {}, f.Recorder, f.Clock, Options{Resync: resync})
	require.NoError(t, err)
	t.Cleanup(c.queue.ShutDown)
	f.seed(newIdentity(identityName, allowAll()))
	h := c.annotationHandler()
	for i := range 100 {
		h.OnUpdate(newMirror(fmt.Sprintf("tenant-chosen-%d", i), "ns", sourceData()), newMirror(fmt.Sprintf("tenant-chosen-%d", i), "ns", sourceData()))
		c.Enqueue(fmt.Sprintf("id-%d", i))
	}
	f.Clock.Step(time.Minute)
	require.Zero(t, c.queue.Len(), "a held queue keeps nothing")

	c.openQueue()
	require.Equal(t, 1, c.queue.Len(), "every cached identity")
}
