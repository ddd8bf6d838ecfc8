package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func pausedCluster(c *v1alpha1.TerraformCluster) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[v1alpha1.AnnotationPaused] = ""
}

// T5: cluster.x-k8s.io/paused stops the apply Job (credentials stay
// mirrored): Paused=True/Paused; without it Paused=False/NotPaused.
func TestSyncPausedStartsNoApplyJob(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1", pausedCluster), newCluster("c2"))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	require.Contains(t, c.Message, v1alpha1.AnnotationPaused)
	require.Empty(t, f.createdJobs())

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c2"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused)
	require.Len(t, f.createdJobs(), 1, "an object that is not paused gets its Job")
}

// T5, T2: a paused object gets no destroy Job either; the finalizer stays.
func TestSyncPausedDeletionWaits(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting, pausedCluster)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Empty(t, f.createdJobs(), "no destroy Job while paused")
	_, updated := f.find("update", "terraformclusters", "")
	require.False(t, updated, "the finalizer stays")
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	require.Contains(t, c.Message, v1alpha1.AnnotationAbandonInfrastructure)
}
