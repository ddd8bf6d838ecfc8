package workload

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// bigJSON is a JSON string output of about n bytes.
func bigJSON(n int) string { return `"` + strings.Repeat("x", n) + `"` }

// K7: the contract outputs are read from the state with their own bounds,
// so an object whose other outputs are over status.outputs' 32 KiB (T4)
// still gets its endpoint, provider ID or IDs and exports, and an object
// Cluster API owns is provisioned. status.outputs keeps the last good read
// (T4), and a steady pass writes nothing.
func TestK7ContractOutputsBesideTooLargeOutputs(t *testing.T) {
	t.Run("a machine Cluster API owns, other outputs over the cap", func(t *testing.T) {
		f := capiFixture(t)
		tm := newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1"), withFinalizer, func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) })
		f.seed(tm, newMirror(identityName, testNS, sourceData(), refOf(kindMachine, tm)), newJob(kindMachine, tm, v1alpha1.JobActionApply, 1, jobSucceeded))
		f.seedCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
		f.seedHidden(bootstrapSecret("m1-bootstrap", bootstrapValue))
		f.withOutputs(kindMachine, tm, map[string]string{"provider_id": `"fake://m-1"`, "inventory": bigJSON(40 << 10)})

		require.NoError(t, f.sync(kindMachine, "tm1"))
		st := f.lastStatus()
		c := requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsTooLarge)
		require.Contains(t, c.Message, "status.contractOutputs")
		require.Nil(t, st.Outputs, "T4: nothing over the cap is published")
		require.JSONEq(t, `{"provider_id":"fake://m-1"}`, string(st.ContractOutputs.Values.Raw))
		requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
		require.Equal(t, "fake://m-1", f.storedObj(kindMachine, "tm1").(*v1alpha1.TerraformMachine).Spec.ProviderID)
		require.True(t, provisioned(st), "K7: provisioned with its provider ID")

		f.catchUp()
		f.steadyPasses(kindMachine, "tm1")
		require.Empty(t, f.writes(), "a steady pass writes nothing")
	})
	t.Run("a cluster's exports over 32 KiB, within 64 KiB", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindCluster, 1)
		exports := fmt.Sprintf(`{"blob":%s}`, bigJSON(40<<10))
		f.withOutputs(kindCluster, obj, map[string]string{"control_plane_endpoint": `"cp:6443"`, "exports": exports})
		require.NoError(t, f.sync(kindCluster, "obj"))
		st := f.lastStatus()
		requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsTooLarge)
		requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
		require.JSONEq(t, exports, string(st.Exports.Raw))
		require.Equal(t, "cp", f.storedObj(kindCluster, "obj").(*v1alpha1.TerraformCluster).Spec.ControlPlaneEndpoint.Host)
		require.True(t, provisioned(st))
	})
	t.Run("a pool's provider ID list over the decoder's budget", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindPool, 1)
		ids := make([]string, 3000)
		for i := range ids {
			ids[i] = fmt.Sprintf(`"fake://pool-instance-%08d"`, i)
		}
		f.withOutputs(kindPool, obj, map[string]string{"provider_id_list": "[" + strings.Join(ids, ",") + "]", "replicas": "3000"})
		require.NoError(t, f.sync(kindPool, "obj"))
		st := f.lastStatus()
		c := requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsTooLarge)
		require.Contains(t, c.Message, "while they are read", "the walk, not Encode, stopped the generic read")
		requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
		require.Len(t, f.storedObj(kindPool, "obj").(*v1alpha1.TerraformMachinePool).Spec.ProviderIDList, 3000)
		require.Equal(t, ptr.To[int32](3000), st.Replicas)
		require.True(t, st.Ready)
	})
	t.Run("a contract output over its own bound is invalid, not missing", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindMachine, 1)
		f.withOutputs(kindMachine, obj, map[string]string{"provider_id": bigJSON(8 << 10), "inventory": bigJSON(40 << 10)})
		require.NoError(t, f.sync(kindMachine, "obj"))
		st := f.lastStatus()
		require.Equal(t, []string{"provider_id"}, st.ContractOutputs.TooLarge)
		c := requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonOutputsInvalid)
		require.Contains(t, c.Message, "output provider_id is over 4096 bytes")
	})
}

// K7, T4: a later read that publishes status.outputs clears
// status.contractOutputs, and the contract is mapped from status.outputs
// again.
func TestK7ContractOutputsClearedByAPublishedRead(t *testing.T) {
	f := newFixture(t)
	obj := f.applied(kindMachine, 1)
	f.withOutputs(kindMachine, obj, map[string]string{"provider_id": `"fake://m-1"`, "inventory": bigJSON(40 << 10)})
	require.NoError(t, f.sync(kindMachine, "obj"))
	require.NotNil(t, f.lastStatus().ContractOutputs)

	f.catchUp()
	stored := f.storedObj(kindMachine, "obj")
	f.withOutputs(kindMachine, stored, map[string]string{"provider_id": `"fake://m-1"`, "addresses": `[{"type":"InternalIP","address":"10.0.0.7"}]`})
	f.newGeneration(kindMachine, stored, stored.GetGeneration()+1, jobSucceeded)
	require.NoError(t, f.sync(kindMachine, "obj"))
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
	require.Nil(t, st.ContractOutputs)
	require.Equal(t, []v1alpha1.MachineAddress{{Type: "InternalIP", Address: "10.0.0.7"}}, st.Addresses)
}
