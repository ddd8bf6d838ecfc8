package workload

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// Issue 25 (SPEC P3): the status the controller keeps of its last write
// per object shares the strings every object's status repeats, instead of
// holding its own copy of each: two clusters in one namespace using one
// identity get conditions with equal messages (each built by its own
// reconcile), and their records point to one copy of each.
func TestWrittenRecordsShareRepeatedStrings(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)))
	names := []string{"c-a", "c-b"}
	for _, n := range names {
		f.seed(newCluster(n))
		require.NoError(t, f.sync(kindCluster, n))
	}
	var recs []v1alpha1.WorkloadStatus
	for _, n := range names {
		c, err := f.inf.Clusters.Lister().TerraformClusters(testNS).Get(n)
		require.NoError(t, err)
		rec, ok := f.c.written.Last(cache.ObjectName{Namespace: testNS, Name: n}, c.UID)
		require.True(t, ok, "no status record of %s", n)
		recs = append(recs, rec)
	}
	a, b := recs[0].Conditions, recs[1].Conditions
	require.NotEmpty(t, a)
	require.Equal(t, len(a), len(b))
	equal := 0
	for i := range a {
		if a[i].Message != b[i].Message {
			continue // names the object's own Job
		}
		equal++
		require.Truef(t, unsafe.StringData(a[i].Message) == unsafe.StringData(b[i].Message),
			"condition %s: message %q held twice", a[i].Type, a[i].Message)
	}
	// IdentityAllowed's message is built per reconcile (it names the
	// identity and the namespace), so equal messages are not shared by
	// accident.
	require.Greater(t, equal, 1)
	allowed := func(cs []metav1.Condition) string {
		return meta.FindStatusCondition(cs, string(v1alpha1.ConditionIdentityAllowed)).Message
	}
	require.Contains(t, allowed(a), identityName)
	require.True(t, unsafe.StringData(recs[0].Identity) == unsafe.StringData(recs[1].Identity))
}
