package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// K1, K6 (upstream A1-171): InputsApplied is Unknown before the first
// apply, True once it is recorded with the inputs rendered now, False
// while a change of the contract inputs (the MachinePool's replicas) is
// being re-applied, and True again once that re-apply is recorded.
func TestK1InputsAppliedFollowsAReapply(t *testing.T) {
	f := capiFixture(t)
	f.seed(newPool("tmp1", withCAPI, capiOwner(capiv1.KindMachinePool, "p1")))
	f.seedCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 2))
	f.seedHidden(bootstrapSecret("p1-bootstrap", bootstrapValue))

	require.NoError(t, f.sync(kindPool, "tmp1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionInputsApplied, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	first := f.createdJobs()[0]
	f.catchUp()
	f.finishAt(first.Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionInputsApplied, metav1.ConditionTrue, v1alpha1.ReasonInputsApplied)

	f.replaceCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 3))
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "replicas changed: re-apply")
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionInputsApplied, metav1.ConditionFalse, v1alpha1.ReasonInputsChanged)

	f.catchUp()
	f.finishAt(created[0].Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionInputsApplied, metav1.ConditionTrue, v1alpha1.ReasonInputsApplied)

	// A steady pass writes nothing: the condition is set to what it is.
	f.catchUp()
	f.resetActions()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	require.Empty(t, f.statusWrites(), "steady pass: no status write")
}

// K5, K6: a provisioned machine pins its inputs and does not re-apply
// when its Machine's bootstrap data changes; InputsApplied says so
// (True, InputsPinned) instead of staying False forever.
func TestK1InputsAppliedPinnedMachine(t *testing.T) {
	f := capiFixture(t)
	tm := newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1"), withFinalizer, withStatus(func(st *v1alpha1.WorkloadStatus) {
		provisionedStatus(st)
		st.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "old", Outcome: v1alpha1.RunSucceeded, Attempt: 1, InputsHash: "pinned"}
	}))
	f.seed(tm, newMirror(identityName, testNS, sourceData(), refOf(kindMachine, tm)))
	f.seedCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
	f.seedHidden(bootstrapSecret("m1-bootstrap", "rotated-data"))

	require.NoError(t, f.sync(kindMachine, "tm1"))
	require.Empty(t, f.createdJobs(), "K5: a provisioned machine does not re-apply for its Cluster API inputs")
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionInputsApplied, metav1.ConditionTrue, v1alpha1.ReasonInputsPinned)
}

// K8: Ready does not read InputsApplied: a re-apply pending does not
// flip Ready, before or after the object is provisioned.
func TestK1InputsAppliedIsNotInReady(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, prov := range []bool{false, true} {
		w := &workload{obj: newPool("tmp1"), status: &v1alpha1.WorkloadStatus{}}
		if prov {
			provisionedStatus(w.status)
			setCondition(w, now, v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionTrue, v1alpha1.ReasonHealthy, "ok")
		}
		for _, ct := range []v1alpha1.ConditionType{v1alpha1.ConditionDependenciesReady, v1alpha1.ConditionIdentityAllowed,
			v1alpha1.ConditionCredentialsMirrored, v1alpha1.ConditionApplyJobSucceeded} {
			setCondition(w, now, ct, metav1.ConditionTrue, "Fine", "ok")
		}
		setCondition(w, now, v1alpha1.ConditionInputsApplied, metav1.ConditionFalse, v1alpha1.ReasonInputsChanged, "pending")
		summarize(w, now)
		requireCondition(t, w.status, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	}
}
