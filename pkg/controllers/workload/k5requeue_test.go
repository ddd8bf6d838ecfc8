package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// requireLookedAgain checks that kind's key name comes back on its own
// (no event) once bootstrapRequeue has passed, and not before.
func (f *fixture) requireLookedAgain(kind, name string) {
	f.t.Helper()
	key := cache.ObjectName{Namespace: testNS, Name: name}
	require.True(f.t, f.c.queues[kind].Pending(key), "a timed add of %s is pending", name)
	require.NotContains(f.t, f.queuedNames(kind), name, "not at once")
	f.Clock.Step(bootstrapRequeue)
	require.Contains(f.t, f.queuedNames(kind), name, "back after bootstrapRequeue, not after --sync-period")
}

// K5: a machine waiting for its bootstrap data (no dataSecretName yet, or
// the Secret it names not there yet) is looked at again within seconds,
// not at the next resync: a bootstrap Secret without the cluster-name
// label is not watched, so its creation brings no event. Once the data is
// read, the machine applies and no such requeue is made.
func TestK5WaitingForBootstrapDataRequeues(t *testing.T) {
	f := newFixture(t)
	f.Secrets = append(f.Secrets, bootstrapValue)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
		newCluster("tc1", withCAPI, func(o metav1.Object) { o.SetLabels(map[string]string{v1alpha1.LabelClusterName: capiClusterName}) }),
		newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1")))
	f.seedCAPI(capiCluster(capiClusterName, "tc1"), capiMachine("m1", "tm1", nil))
	f.editCluster("tc1", func(tc *v1alpha1.TerraformCluster) { provisionedStatus(&tc.Status) })
	f.queuedNames(kindMachine)

	require.NoError(t, f.sync(kindMachine, "tm1"))
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	require.Contains(t, c.Message, "has no spec.bootstrap.dataSecretName yet")
	f.requireLookedAgain(kindMachine, "tm1")

	f.replaceCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
	f.queuedNames(kindMachine)
	require.NoError(t, f.sync(kindMachine, "tm1"))
	c = requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	require.Contains(t, c.Message, "bootstrap data Secret m1-bootstrap, named by the Machine's spec.bootstrap.dataSecretName, does not exist yet")
	f.requireLookedAgain(kindMachine, "tm1")

	// The Secret appears, unlabelled: the requeued pass reads it.
	f.seedHidden(bootstrapSecret("m1-bootstrap", bootstrapValue))
	require.NoError(t, f.sync(kindMachine, "tm1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	require.Len(t, f.createdJobs(), 1)
	f.queuedNames(kindMachine)
	f.Clock.Step(bootstrapRequeue)
	require.NotContains(t, f.queuedNames(kindMachine), "tm1", "no bootstrap requeue once the data is read")
}
