package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Issue 25 (SPEC P3): the record of the status last written per object
// lasts until the informer shows that write, so a manager that converged
// its objects does not keep a second copy of every status; a cache that
// still lags keeps the record, and with it S3's judgement against what is
// stored.
func TestStatusRecordEndsWhenTheCacheShowsTheWrite(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)))
	// No identity: the pass writes the status and nothing else.
	c := newCluster("c", func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = nil })
	f.seed(c)
	key := cache.ObjectName{Namespace: testNS, Name: c.Name}
	require.NoError(t, f.sync(kindCluster, c.Name))
	require.Len(t, f.writes(), 1, "one status write")
	_, ok := f.c.written.Last(key, c.UID)
	require.True(t, ok, "the cache does not show the write yet")

	h := f.c.workloadHandler()
	lagging, err := f.inf.Clusters.Lister().TerraformClusters(testNS).Get(c.Name)
	require.NoError(t, err)
	h.OnUpdate(lagging, lagging)
	require.Equal(t, 1, f.c.written.Len(), "an event of the version before the write keeps the record")

	f.catchUp() // the informer delivers the write
	require.Zero(t, f.c.written.Len(), "the cache shows the write: no second copy")
	require.NoError(t, f.sync(kindCluster, c.Name))
	require.Empty(t, f.writes(), "judged against the cache alone: nothing to write (S3)")
}
