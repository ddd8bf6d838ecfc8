package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/loop"
)

// P1: a resync pass adds every key first, so the pass's first reconcile of
// an identity reads its source and the others reuse that read; a key added
// again afterwards (a change) reads afresh.
func TestSyncPassReadsEachSourceOnce(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
		newCluster("c1", withFinalizer), newCluster("c2", withFinalizer), newCluster("c3", withFinalizer))
	q := f.c.queues[v1alpha1.KindTerraformCluster]
	keys := []string{"c1", "c2", "c3"}
	for _, n := range keys {
		q.Add(cache.ObjectName{Namespace: testNS, Name: n})
	}
	for _, n := range keys {
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, n))
	}
	require.Equal(t, 1, f.sourceReads(), "one source GET for the pass")
	f.catchUp()

	q.Add(cache.ObjectName{Namespace: testNS, Name: "c2"}) // a change
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c2"))
	require.Equal(t, 1, f.sourceReads(), "a triggered reconcile reads afresh")
}

// P1 with a schedule: every object has a wake-up pending (a drift check,
// a backoff's end), which is not a change. A resync pass still reads the
// source once, and the wake-ups, when due, reuse that read: a drift
// schedule of N objects costs no source reads of its own (issue 25: with
// drift on, a pass of 1,000 objects read the source about 250 times).
func TestSyncPassWithWakeUpsPendingReadsOnce(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
		newCluster("c1", withFinalizer), newCluster("c2", withFinalizer), newCluster("c3", withFinalizer))
	q := f.c.queues[v1alpha1.KindTerraformCluster]
	keys := []string{"c1", "c2", "c3"}
	for i, n := range keys {
		q.Wake(cache.ObjectName{Namespace: testNS, Name: n}, time.Duration(i+1)*time.Minute)
	}
	for _, n := range keys { // the pass
		q.Add(cache.ObjectName{Namespace: testNS, Name: n})
	}
	for range keys {
		take(t, f, q)
	}
	require.Equal(t, 1, f.sourceReads(), "one source GET for the pass, wake-ups pending")
	f.catchUp()

	for range keys { // the wake-ups come due one by one
		f.Clock.Step(time.Minute)
		take(t, f, q)
	}
	require.Zero(t, f.sourceReads(), "a wake-up reuses the pass's read")
}

// take takes the next key out of q and syncs it, as a worker would.
func take(t *testing.T, f *fixture, q loop.Queue) {
	t.Helper()
	require.Eventually(t, func() bool { return q.Len() > 0 }, 10*time.Second, time.Millisecond)
	key, _ := q.Get()
	defer q.Done(key)
	require.NoError(t, f.c.sync(f.Ctx, f.c.kinds[v1alpha1.KindTerraformCluster], key))
}

// sourceReads counts the GETs of the source Secret since the last reset.
func (f *fixture) sourceReads() int {
	n := 0
	for _, r := range f.readsOf("secrets") {
		if r == "get secrets "+sourceNS+"/"+sourceName {
			n++
		}
	}
	return n
}

// T3: what the CRD cannot check in spec.variables (key syntax, the
// reserved captf_ prefix) is reported as a condition and starts no Job;
// the message names the key, never a value.
func TestSyncInvalidVariablesStartNoJob(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", func(c *v1alpha1.TerraformCluster) {
		c.Spec.Variables = &runtime.RawExtension{Raw: []byte(`{"captf_region":"v-x1-value","ok":1}`)}
	})
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Empty(t, f.createdJobs())
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonInvalidVariables)
	require.Contains(t, c.Message, "captf_region")
	require.NotContains(t, c.Message, "v-x1-value")
}
