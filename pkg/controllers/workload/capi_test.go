package workload

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// T5: control_plane_endpoint as an object or a host:port string.
// T5: provider_id is a string, provider_id_list a list of strings.
// storedObj returns kind's object as the fake API server holds it.
func (f *fixture) storedObj(kind, name string) metav1.Object {
	f.t.Helper()
	o, err := f.Captf.Tracker().Get(v1alpha1.SchemeGroupVersion.WithResource(resourceOf(kind)), testNS, name)
	require.NoError(f.t, err)
	return o.(metav1.Object)
}

// bumpGeneration does what the API server does on a spec change (the
// fake one does not): the stored object's generation goes up by one.
func (f *fixture) bumpGeneration(kind, name string) {
	f.t.Helper()
	o := f.storedObj(kind, name)
	o.SetGeneration(o.GetGeneration() + 1)
	require.NoError(f.t, f.Captf.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource(resourceOf(kind)), o.(runtime.Object), testNS))
	f.catchUp()
}

// providerFieldOf returns kind's Cluster API field of o as JSON.
func providerFieldOf(t *testing.T, o metav1.Object) string {
	var v any
	switch x := o.(type) {
	case *v1alpha1.TerraformCluster:
		v = x.Spec.ControlPlaneEndpoint
	case *v1alpha1.TerraformMachine:
		v = x.Spec.ProviderID
	case *v1alpha1.TerraformMachinePool:
		v = x.Spec.ProviderIDList
	}
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// T5, J1: after a successful apply the manager sets each kind's Cluster
// API field from its output, once, in one update that names the
// generation it creates; that generation is not applied again; a later
// spec change is.
func TestProviderFieldsFromOutputs(t *testing.T) {
	for _, tc := range []struct {
		kind, output, value, want string
	}{
		{v1alpha1.KindTerraformCluster, "control_plane_endpoint", `"[2001:db8::1]:6443"`, `{"host":"2001:db8::1","port":6443}`},
		{v1alpha1.KindTerraformMachine, "provider_id", `"fake://m-1"`, `"fake://m-1"`},
		{v1alpha1.KindTerraformMachinePool, "provider_id_list", `["fake://a","fake://b"]`, `["fake://a","fake://b"]`},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			f := newFixture(t)
			f.Secrets = append(f.Secrets, sensitiveOutput)
			obj := f.applied(tc.kind, 1)
			f.putState(stateSecretOf(tc.kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{tc.output: tc.value}))))
			f.catchUp()

			require.NoError(t, f.sync(tc.kind, "obj"))
			stored := f.storedObj(tc.kind, "obj")
			require.Equal(t, tc.want, providerFieldOf(t, stored))
			require.Equal(t, "2/"+string(obj.GetUID()), stored.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration], "names the generation the write makes, and whose (K11)")
			require.Empty(t, f.createdJobs())

			// The API server bumps the generation: not a new one to apply.
			f.bumpGeneration(tc.kind, "obj")
			f.resetActions()
			for range 2 {
				require.NoError(t, f.sync(tc.kind, "obj"))
			}
			require.Empty(t, f.createdJobs(), "the manager's own write is not a new generation (J1)")
			_, updated := f.find("update", resourceOf(tc.kind), "")
			require.False(t, updated, "set once")
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

			// A user's spec change is a new generation: it is applied.
			f.bumpGeneration(tc.kind, "obj")
			require.NoError(t, f.sync(tc.kind, "obj"))
			require.Equal(t, []string{jobs.Name(tc.kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 3)}, f.createdJobNames())
			f.checkNoSecretLeak()
		})
	}
}

// T5: a field set by hand is left alone, a paused object is not written,
// and an output that cannot set the field is reported in OutputsAvailable
// and sets nothing.
func TestProviderFieldsLeftAlone(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	state := func(f *fixture, obj metav1.Object, value string) {
		f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"control_plane_endpoint": value}))))
		f.catchUp()
	}
	t.Run("set by hand", func(t *testing.T) {
		f := newFixture(t)
		obj := workloadOf(kind, "obj", withFinalizer, generation(1), func(c *v1alpha1.TerraformCluster) {
			c.Spec.ControlPlaneEndpoint = v1alpha1.APIEndpoint{Host: "mine", Port: 443}
		})
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
			newMirror(identityName, testNS, sourceData(), refOf(kind, obj)), newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded))
		state(f, obj, `"cp:6443"`)
		require.NoError(t, f.sync(kind, "obj"))
		_, updated := f.find("update", resourceOf(kind), "")
		require.False(t, updated)
		require.Equal(t, `{"host":"mine","port":443}`, providerFieldOf(t, f.storedObj(kind, "obj")))
	})
	t.Run("paused", func(t *testing.T) {
		f := newFixture(t)
		obj := workloadOf(kind, "obj", withFinalizer, generation(1), pausedCluster)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
			newMirror(identityName, testNS, sourceData(), refOf(kind, obj)), newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded))
		state(f, obj, `"cp:6443"`)
		require.NoError(t, f.sync(kind, "obj"))
		_, updated := f.find("update", resourceOf(kind), "")
		require.False(t, updated, "a paused object is not written")
	})
	t.Run("invalid output", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kind, 1)
		state(f, obj, `"no-port"`)
		require.NoError(t, f.sync(kind, "obj"))
		_, updated := f.find("update", resourceOf(kind), "")
		require.False(t, updated)
		requireCondition(t, f.lastStatus(), v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead)
		// K7: what is wrong with a contract output is OutputsValid's.
		c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonOutputsInvalid)
		require.Contains(t, c.Message, "control_plane_endpoint")
	})
}

// T5, T7: a Job that met its success criteria while its pod still ends is
// not recorded yet (not Finished), so its outputs are not read yet (T4
// follows the record) and no field is written; once it is Complete and
// recorded, the outputs are read and the field is written with the
// generation it makes, which is not applied again. Found by the
// end-to-end test on a real node, when the outputs were read ahead of the
// record.
func TestProviderFieldsWaitForTheRecord(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	obj := workloadOf(kind, "obj", withFinalizer, generation(1))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
		newMirror(identityName, testNS, sourceData(), refOf(kind, obj)),
		successCriteriaMetOnly(t, newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded)))
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"control_plane_endpoint": `"cp:6443"`}))))
	f.catchUp()

	require.NoError(t, f.sync(kind, "obj"))
	require.Nil(t, f.lastStatus().Outputs, "no outputs before the apply is recorded (T4, T7)")
	_, updated := f.find("update", resourceOf(kind), "")
	require.False(t, updated, "no field before the apply is recorded")

	// The pod ends: Complete, recorded, read, and the field is written
	// with the generation it makes.
	finished := newJob(kind, obj, v1alpha1.JobActionApply, 1, jobSucceeded)
	require.NoError(t, f.Kube.Tracker().Update(batchv1.SchemeGroupVersion.WithResource("jobs"), finished, testNS))
	f.catchUp()
	require.NoError(t, f.sync(kind, "obj"))
	stored := f.storedObj(kind, "obj")
	require.Equal(t, `{"host":"cp","port":6443}`, providerFieldOf(t, stored))
	require.Equal(t, "2/"+string(stored.GetUID()), stored.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration])

	// The API server made generation 2: not applied again (J1).
	f.bumpGeneration(kind, "obj")
	require.NoError(t, f.sync(kind, "obj"))
	require.Empty(t, f.createdJobs())
}

// T5, J1: published outputs wait for the apply of the object's generation.
// A user who clears the field makes a new generation; until its apply is
// recorded the outputs (of the generation before) set nothing, since the
// write could not name a generation that the record covers. The apply
// starts, and the field is set after it.
func TestProviderFieldsWaitForTheGenerationsApply(t *testing.T) {
	const kind = v1alpha1.KindTerraformCluster
	f := newFixture(t)
	obj := workloadOf(kind, "obj", withFinalizer, generation(2))
	rec := succeededRecord(kind, obj)
	withStatus(func(s *v1alpha1.WorkloadStatus) {
		s.LastApply = rec
		s.OutputsSource = &v1alpha1.OutputsSource{JobName: rec.JobName}
		s.Outputs = &runtime.RawExtension{Raw: []byte(`{"control_plane_endpoint":"cp:6443"}`)}
		s.Initialization = &v1alpha1.WorkloadInitialization{Provisioned: ptr.To(true)}
	})(obj)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object),
		newMirror(identityName, testNS, sourceData(), refOf(kind, obj)))
	f.catchUp()

	require.NoError(t, f.sync(kind, "obj"))
	_, updated := f.find("update", resourceOf(kind), "")
	require.False(t, updated, "no field before generation 2 is applied")
	require.Equal(t, []string{jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 2)}, f.createdJobNames())
	require.Equal(t, `{}`, providerFieldOf(t, f.storedObj(kind, "obj")))
}
