package workload

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// The Cluster API side of the reconcile (SPEC K2-K8): objects without the
// standalone annotation, with Cluster API objects in the caches.

const (
	kindMachine     = v1alpha1.KindTerraformMachine
	kindPool        = v1alpha1.KindTerraformMachinePool
	capiClusterName = "cl"
	// bootstrapValue is a machine's bootstrap data: X1 scans for it (and
	// its base64) everywhere, as for a credential (K5).
	bootstrapValue = "#cloud-config\nbootstrap-S3CRET-7c1a\n"
)

func infraRef(kind, name string) capiv1.ObjectReference {
	return capiv1.ObjectReference{APIGroup: v1alpha1.SchemeGroupVersion.Group, Kind: kind, Name: name}
}

func capiCluster(name, terraformCluster string) *capiv1.Cluster {
	return &capiv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-capi-" + name), ResourceVersion: "1"},
		Spec: capiv1.ClusterSpec{InfrastructureRef: infraRef(v1alpha1.KindTerraformCluster, terraformCluster)}}
}

func capiMachine(name, member string, bootstrap *string) *capiv1.Machine {
	return &capiv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-capi-" + name), ResourceVersion: "1"},
		Spec: capiv1.MachineSpec{ClusterName: capiClusterName, InfrastructureRef: infraRef(v1alpha1.KindTerraformMachine, member),
			Bootstrap: capiv1.Bootstrap{DataSecretName: bootstrap}}}
}

func capiPool(name, member string, bootstrap *string, replicas int32) *capiv1.MachinePool {
	p := &capiv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-capi-" + name), ResourceVersion: "1"},
		Spec: capiv1.MachinePoolSpec{ClusterName: capiClusterName, Replicas: ptr.To(replicas)}}
	p.Spec.Template.Spec = capiv1.MachineSpec{ClusterName: capiClusterName, InfrastructureRef: infraRef(v1alpha1.KindTerraformMachinePool, member),
		Bootstrap: capiv1.Bootstrap{DataSecretName: bootstrap}}
	return p
}

// capiOwner makes o a member whose controller is the Cluster API object
// kind/name (K2), labelled with its cluster as Cluster API labels it.
func capiOwner(kind, name string) func(metav1.Object) {
	return func(o metav1.Object) {
		o.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: capiv1.GroupVersion.String(), Kind: kind, Name: name,
			UID: types.UID("uid-capi-" + name), Controller: ptr.To(true)}})
		o.SetLabels(map[string]string{v1alpha1.LabelClusterName: capiClusterName})
	}
}

func provisionedStatus(st *v1alpha1.WorkloadStatus) {
	st.Initialization = &v1alpha1.WorkloadInitialization{Provisioned: ptr.To(true)}
}

func bootstrapSecret(name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Data: map[string][]byte{"value": []byte(value), "format": []byte("cloud-config")}}
}

// capiFixture seeds the source, identity and a provisioned TerraformCluster
// tc1 named by Cluster cl, whose machines use its identity.
func capiFixture(t *testing.T) *fixture {
	f := newFixture(t)
	f.Secrets = append(f.Secrets, bootstrapValue, base64.StdEncoding.EncodeToString([]byte(bootstrapValue)))
	tc := newCluster("tc1", withCAPI, withStatus(provisionedStatus), func(o metav1.Object) {
		o.SetLabels(map[string]string{v1alpha1.LabelClusterName: capiClusterName})
	})
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), tc)
	f.seedCAPI(capiCluster(capiClusterName, "tc1"))
	return f
}

func (f *fixture) replaceCAPI(o runtime.Object) {
	f.t.Helper()
	f.seedCAPI(o) // Add replaces by key
}

// K2: a TerraformCluster that no Cluster names waits, its credentials
// mirrored as before; once a Cluster names it, its apply Job starts.
func TestK2ClusterWaitsForItsOwner(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("tc1", withCAPI))

	require.NoError(t, f.sync(kindCluster, "tc1"))
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForOwner)
	require.Contains(t, c.Message, "no Cluster in namespace "+testNS+" names this TerraformCluster")
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	c = requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	require.Contains(t, c.Message, "DependenciesReady")
	requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForOwner)
	require.Empty(t, f.createdJobs())

	f.seedCAPI(capiCluster(capiClusterName, "tc1"))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	require.Len(t, f.createdJobs(), 1)
}

// K2: a member acts only once its controller owner names it back and its
// Cluster's infrastructure is a TerraformCluster.
func TestK2MemberOwners(t *testing.T) {
	for _, tt := range []struct {
		name    string
		capi    []runtime.Object
		owner   func(metav1.Object)
		reason  v1alpha1.ConditionReason
		message string
	}{
		{"no owner", nil, func(metav1.Object) {}, v1alpha1.ReasonWaitingForOwner, "no Machine is this object's controller owner"},
		{"owner not cached", nil, capiOwner(capiv1.KindMachine, "m1"), v1alpha1.ReasonWaitingForOwner, "owner Machine m1 not found"},
		{"owner names another", []runtime.Object{capiMachine("m1", "someone-else", nil)}, capiOwner(capiv1.KindMachine, "m1"),
			v1alpha1.ReasonOwnerMismatch, `"someone-else"`},
		{"cluster of another provider", []runtime.Object{capiMachine("m1", "tm1", nil), &capiv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: capiClusterName},
			Spec:       capiv1.ClusterSpec{InfrastructureRef: capiv1.ObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster", Name: "d"}},
		}}, capiOwner(capiv1.KindMachine, "m1"), v1alpha1.ReasonClusterNotTerraform, "DockerCluster"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
				newMachine("tm1", withCAPI, tt.owner, func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) }))
			f.seedCAPI(tt.capi...)
			require.NoError(t, f.sync(kindMachine, "tm1"))
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, tt.reason)
			require.Contains(t, c.Message, tt.message)
			require.Empty(t, f.createdJobs())
		})
	}
}

// K3: Cluster.spec.paused pauses its TerraformCluster and members; the
// credentials stay mirrored; unpaused, the Job starts.
func TestK3ClusterPaused(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("tc1", withCAPI))
	paused := capiCluster(capiClusterName, "tc1")
	paused.Spec.Paused = ptr.To(true)
	f.seedCAPI(paused)

	require.NoError(t, f.sync(kindCluster, "tc1"))
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	require.Contains(t, c.Message, "Cluster cl has spec.paused: true")
	c = requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	require.Contains(t, c.Message, "unpause it")
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	require.Empty(t, f.createdJobs())

	f.replaceCAPI(capiCluster(capiClusterName, "tc1"))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused)
	require.Len(t, f.createdJobs(), 1)
}

// K4, K5, K6: a machine waits for its cluster's infrastructure, then for
// its bootstrap data; its Job then gets the contract inputs, bootstrap
// data among them, through the run Secret only: never in the Job.
func TestK4K5MachineWaitsThenRunsWithInputs(t *testing.T) {
	f := newFixture(t)
	f.Secrets = append(f.Secrets, bootstrapValue, base64.StdEncoding.EncodeToString([]byte(bootstrapValue)))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)),
		newCluster("tc1", withCAPI, func(o metav1.Object) { o.SetLabels(map[string]string{v1alpha1.LabelClusterName: capiClusterName}) }),
		newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1")))
	f.seedCAPI(capiCluster(capiClusterName, "tc1"), capiMachine("m1", "tm1", nil))

	require.NoError(t, f.sync(kindMachine, "tm1"))
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForClusterInfrastructure)
	require.Contains(t, c.Message, "TerraformCluster tc1 is not provisioned yet")
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)

	f.editCluster("tc1", func(tc *v1alpha1.TerraformCluster) { provisionedStatus(&tc.Status) })
	require.NoError(t, f.sync(kindMachine, "tm1"))
	c = requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	require.Contains(t, c.Message, "spec.bootstrap.dataSecretName")

	f.replaceCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
	require.NoError(t, f.sync(kindMachine, "tm1"))
	c = requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	require.Contains(t, c.Message, "Secret m1-bootstrap, named by the Machine's spec.bootstrap.dataSecretName, does not exist yet")
	require.Empty(t, f.createdJobs())

	f.seedHidden(bootstrapSecret("m1-bootstrap", bootstrapValue))
	f.showRuns = true
	f.resetActions()
	require.NoError(t, f.sync(kindMachine, "tm1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	created := f.createdJobs()
	require.Len(t, created, 1)
	job := created[0]
	require.Equal(t, []string{
		"create secrets " + testNS + "/captf-inputs-tm1-machine",
		"create jobs " + testNS + "/" + job.Name,
		"create secrets " + testNS + "/captf-run-" + job.Name,
		"patch jobs " + testNS + "/" + job.Name,
	}, filterWrites(f.writes(), "captf-inputs-", "captf-run-", "jobs "), "inputs saved, Job created suspended, run Secret, resumed")
	require.Equal(t, ptr.To(true), job.Spec.Suspend)
	b, err := json.Marshal(job)
	require.NoError(t, err)
	require.NotContains(t, string(b), base64.StdEncoding.EncodeToString([]byte(bootstrapValue)), "K5: never in the Job spec")
	require.NotContains(t, string(b), "bootstrap-S3CRET")

	run := f.storedSecret(testNS, jobs.RunSecretName(job.Name))
	require.Equal(t, job.Name, run.OwnerReferences[0].Name, "owned by the Job")
	require.Equal(t, "Job", run.OwnerReferences[0].Kind)
	in, err := contract.DecodeInputs(run.Data[jobs.InputsKey])
	require.NoError(t, err)
	require.JSONEq(t, `"`+base64.StdEncoding.EncodeToString([]byte(bootstrapValue))+`"`, string(in[contract.InputBootstrapData]))
	require.JSONEq(t, `"m1"`, string(in[contract.InputMachineName]))
	require.JSONEq(t, `{}`, string(in[contract.InputClusterOutputs]))
	require.Equal(t, in.Hash(), job.Annotations[v1alpha1.AnnotationInputsHash])
	saved := f.storedSecret(testNS, "captf-inputs-tm1-machine")
	require.Equal(t, in.Hash(), saved.Annotations[v1alpha1.AnnotationInputsHash])
	require.Equal(t, "tm1", saved.OwnerReferences[0].Name)
}

// filterWrites keeps the writes containing one of parts.
func filterWrites(writes []string, parts ...string) []string {
	var out []string
	for _, w := range writes {
		for _, p := range parts {
			if strings.Contains(w, p) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

// K5: a provisioned machine pins what it was provisioned with: a later
// generation runs with the saved inputs, and its bootstrap Secret is not
// read again (it may be gone).
func TestK5ProvisionedMachinePinsItsInputs(t *testing.T) {
	f := capiFixture(t)
	tm := newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1"), withFinalizer, generation(2), withStatus(func(st *v1alpha1.WorkloadStatus) {
		provisionedStatus(st)
		st.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "old", Outcome: v1alpha1.RunSucceeded, Attempt: 1, InputsHash: "pinned"}
	}))
	pinned := contract.Inputs{contract.InputBootstrapData: json.RawMessage(`"cGlubmVk"`), contract.InputMachineName: json.RawMessage(`"m1"`)}
	f.seed(tm, newMirror(identityName, testNS, sourceData(), refOf(kindMachine, tm)))
	f.seedHidden(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "captf-inputs-tm1-machine",
		Annotations:     map[string]string{v1alpha1.AnnotationInputsHash: pinned.Hash()},
		OwnerReferences: []metav1.OwnerReference{refOf(kindMachine, tm)}}, Data: map[string][]byte{jobs.InputsKey: pinned.JSON()}})
	f.seedCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
	f.seedHidden(bootstrapSecret("m1-bootstrap", "rotated-data"))
	f.showRuns = true

	require.NoError(t, f.sync(kindMachine, "tm1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "generation 2 is applied")
	require.Equal(t, pinned.Hash(), created[0].Annotations[v1alpha1.AnnotationInputsHash])
	require.NotContains(t, f.readsOf("secrets"), "get secrets "+testNS+"/m1-bootstrap", "not read once provisioned")
	require.Equal(t, string(pinned.JSON()), string(f.storedSecret(testNS, jobs.RunSecretName(created[0].Name)).Data[jobs.InputsKey]))
}

// K6: a pool re-applies when its rendered inputs change (the MachinePool's
// replicas), at once, as the next attempt; unchanged inputs start nothing.
func TestK6PoolReappliesWhenInputsChange(t *testing.T) {
	f := capiFixture(t)
	f.seed(newPool("tmp1", withCAPI, capiOwner(capiv1.KindMachinePool, "p1")))
	f.seedCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 2))
	f.seedHidden(bootstrapSecret("p1-bootstrap", bootstrapValue))

	require.NoError(t, f.sync(kindPool, "tmp1"))
	created := f.createdJobs()
	require.Len(t, created, 1)
	first := created[0]
	f.catchUp()
	f.finishAt(first.Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	st := f.lastStatus()
	require.Equal(t, first.Annotations[v1alpha1.AnnotationInputsHash], st.LastApply.InputsHash, "K6: recorded with the run")
	require.Empty(t, f.createdJobs(), "same inputs: nothing to apply")

	f.replaceCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 3))
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	created = f.createdJobs()
	require.Len(t, created, 1, "replicas changed: re-apply")
	require.Equal(t, 2, jobs.AttemptOf(created[0]))
	require.NotEqual(t, first.Annotations[v1alpha1.AnnotationInputsHash], created[0].Annotations[v1alpha1.AnnotationInputsHash])
}

// K5: a Job whose start was interrupted (created, suspended, no run
// Secret) is finished by the next pass: run Secret, then resume.
func TestK5ResumesAnInterruptedStart(t *testing.T) {
	f := newFixture(t)
	c := newCluster("c1", withFinalizer)
	j := jobs.Build(jobs.Params{OwnerAPIVersion: v1alpha1.SchemeGroupVersion.String(), OwnerKind: kindCluster, OwnerName: "c1",
		OwnerUID: c.UID, Namespace: testNS, Generation: 1, Action: v1alpha1.JobActionApply, ModuleImage: moduleImage,
		RunnerImage: runnerImage, MirrorName: mirrorName, Inputs: true, InputsHash: "h"})
	j.UID = "uid-job"
	f.seedReady(c, j)
	f.showRuns = true

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, []string{
		"create secrets " + testNS + "/" + jobs.RunSecretName(j.Name),
		"patch jobs " + testNS + "/" + j.Name,
	}, filterWrites(f.writes(), "captf-run-", "jobs "))
	require.Empty(t, f.createdJobs())
	run := f.storedSecret(testNS, jobs.RunSecretName(j.Name))
	require.Equal(t, types.UID("uid-job"), run.OwnerReferences[0].UID)
}

// K5: a run's Secret is deleted once its Job's outcome is recorded.
func TestK5RunSecretDeletedWhenRecorded(t *testing.T) {
	f := newFixture(t)
	c := newCluster("c1", withFinalizer)
	j := newJob(kindCluster, c, v1alpha1.JobActionApply, 1, jobSucceeded)
	f.seedReady(c, j)
	f.showRuns = true

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Contains(t, f.writes(), "delete secrets "+testNS+"/"+jobs.RunSecretName(j.Name))
	require.Equal(t, j.Name, f.lastStatus().LastApply.JobName)

	f.catchUp()
	f.steadyPasses(kindCluster, "c1")
}

// K4: a TerraformCluster's destroy waits while machines or pools of the
// cluster exist; their deletion lets it go.
func TestK4ClusterDestroyWaitsForItsMembers(t *testing.T) {
	f := capiFixture(t)
	f.editCluster("tc1", func(tc *v1alpha1.TerraformCluster) {
		deleting(tc)
		tc.Status.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "applied", Outcome: v1alpha1.RunSucceeded, Attempt: 1}
	})
	tc := f.storedCluster("tc1")
	member := newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1"))
	f.seed(member, newMirror(identityName, testNS, sourceData(), refOf(kindCluster, tc)))

	require.NoError(t, f.sync(kindCluster, "tc1"))
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionDeletionBlocked, metav1.ConditionTrue, v1alpha1.ReasonDependentsExist)
	require.Contains(t, c.Message, "TerraformMachine/tm1")
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonDependentsExist)
	require.Empty(t, f.createdJobs())

	require.NoError(t, f.Captf.Tracker().Delete(v1alpha1.SchemeGroupVersion.WithResource("terraformmachines"), testNS, "tm1"))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDeletionBlocked, metav1.ConditionFalse, v1alpha1.ReasonNotBlocked)
	require.Len(t, f.createdJobs(), 1)
	require.Equal(t, v1alpha1.JobActionDestroy, jobs.ActionOf(f.createdJobs()[0]))
}

// withOutputs puts kind's object's state with outputs (name to JSON).
func (f *fixture) withOutputs(kind string, obj metav1.Object, outputs map[string]string) {
	f.t.Helper()
	f.putState(stateSecretOf(kind, obj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, outputs))))
	f.catchUp()
}

// K7: the contract outputs reach the status fields Cluster API reads.
func TestK7OutputsToStatus(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindCluster, 1)
		f.withOutputs(kindCluster, obj, map[string]string{
			"control_plane_endpoint": `"cp:6443"`,
			"failure_domains":        `[{"name":"b"},{"name":"a","controlPlane":true}]`,
			"exports":                `{"vpc_id":"vpc-1"}`,
		})
		require.NoError(t, f.sync(kindCluster, "obj"))
		st := f.lastStatus()
		requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
		require.Equal(t, []v1alpha1.FailureDomain{{Name: "a", ControlPlane: ptr.To(true)}, {Name: "b"}}, st.FailureDomains)
		require.JSONEq(t, `{"vpc_id":"vpc-1"}`, string(st.Exports.Raw))
		requireCondition(t, st, v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionTrue, v1alpha1.ReasonHealthy)
		f.steadyPasses(kindCluster, "obj")
	})
	t.Run("machine", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindMachine, 1)
		f.withOutputs(kindMachine, obj, map[string]string{
			"provider_id":   `"fake://m-1"`,
			"addresses":     `[{"type":"InternalIP","address":"10.0.0.7"}]`,
			"interruptible": `true`,
			"health":        `{"state":"unhealthy","message":"disk full"}`,
		})
		require.NoError(t, f.sync(kindMachine, "obj"))
		st := f.lastStatus()
		require.Equal(t, []v1alpha1.MachineAddress{{Type: "InternalIP", Address: "10.0.0.7"}}, st.Addresses)
		require.True(t, st.Interruptible)
		require.Equal(t, "fake://m-1", f.storedObj(kindMachine, "obj").(*v1alpha1.TerraformMachine).Spec.ProviderID)
		c := requireCondition(t, st, v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy)
		require.Equal(t, "disk full", c.Message)
		// K8: once provisioned, Ready follows health.
		requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy)
	})
	t.Run("pool list kept current", func(t *testing.T) {
		f := newFixture(t)
		obj := f.applied(kindPool, 1)
		f.withOutputs(kindPool, obj, map[string]string{"provider_id_list": `["fake://b","fake://a"]`, "replicas": `2`})
		require.NoError(t, f.sync(kindPool, "obj"))
		st := f.lastStatus()
		require.Equal(t, ptr.To[int32](2), st.Replicas)
		require.True(t, st.Ready, "K7: status.ready once provisioned")
		require.Equal(t, []string{"fake://a", "fake://b"}, f.storedObj(kindPool, "obj").(*v1alpha1.TerraformMachinePool).Spec.ProviderIDList)

		// A later apply (the object's next generation, then its Job) reads
		// the state again: the list follows the pool's membership.
		f.catchUp()
		stored := f.storedObj(kindPool, "obj")
		f.newGeneration(kindPool, stored, stored.GetGeneration()+1, jobSucceeded)
		f.withOutputs(kindPool, obj, map[string]string{"provider_id_list": `["fake://a","fake://c","fake://d"]`, "replicas": `3`})
		require.NoError(t, f.sync(kindPool, "obj"))
		require.Equal(t, []string{"fake://a", "fake://c", "fake://d"}, f.storedObj(kindPool, "obj").(*v1alpha1.TerraformMachinePool).Spec.ProviderIDList)
		require.Equal(t, ptr.To[int32](3), f.lastStatus().Replicas)
	})
}

// K7: an object Cluster API owns is provisioned only once the field
// Cluster API needs is set: a machine without provider_id is not; the
// module's null (pending) is reported.
func TestK7ProvisionedNeedsTheRequiredOutput(t *testing.T) {
	f := capiFixture(t)
	tm := newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1"), withFinalizer, func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) })
	f.seed(tm, newMirror(identityName, testNS, sourceData(), refOf(kindMachine, tm)), newJob(kindMachine, tm, v1alpha1.JobActionApply, 1, jobSucceeded))
	f.seedCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")))
	f.seedHidden(bootstrapSecret("m1-bootstrap", bootstrapValue))
	f.withOutputs(kindMachine, tm, map[string]string{"provider_id": `null`})

	require.NoError(t, f.sync(kindMachine, "tm1"))
	st := f.lastStatus()
	require.False(t, provisioned(st), "no provider ID yet")
	requireCondition(t, st, v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonOutputsPending)
	requireCondition(t, st, v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionUnknown, v1alpha1.ReasonWaitingForProvisioning)
}

// K8: once provisioned, a failed re-apply does not flip Ready (Cluster
// API copies it into the Cluster's InfrastructureReady and the Machine's
// Ready); the run shows in ApplyJobSucceeded.
func TestK8ReadyFollowsHealthNotRuns(t *testing.T) {
	f := newFixture(t)
	obj := f.applied(kindCluster, 1)
	f.withOutputs(kindCluster, obj, map[string]string{"control_plane_endpoint": `"cp:6443"`})
	require.NoError(t, f.sync(kindCluster, "obj"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)

	f.catchUp()
	stored := f.storedObj(kindCluster, "obj")
	f.newGeneration(kindCluster, stored, stored.GetGeneration()+1, jobFailed)
	require.NoError(t, f.sync(kindCluster, "obj"))
	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
}

// K5: a pool re-applies when its bootstrap data changes; the change of
// the Secret's version enqueues the pool (the metadata watch), whose pass
// reads it uncached.
func TestK5PoolFollowsItsBootstrapData(t *testing.T) {
	f := capiFixture(t)
	f.seed(newPool("tmp1", withCAPI, capiOwner(capiv1.KindMachinePool, "p1")))
	f.seedCAPI(capiPool("p1", "tmp1", ptr.To("p1-bootstrap"), 2))
	f.seedHidden(bootstrapSecret("p1-bootstrap", bootstrapValue))
	require.NoError(t, f.sync(kindPool, "tmp1"))
	first := f.createdJobs()[0]
	f.catchUp()
	f.finishAt(first.Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	require.Empty(t, f.createdJobs())

	f.c.enqueuePoolsOf(&metav1.ObjectMeta{Namespace: testNS, Name: "p1-bootstrap"})
	f.waitQueued(kindPool, cache.ObjectName{Namespace: testNS, Name: "tmp1"})

	rotated := bootstrapSecret("p1-bootstrap", "#cloud-config\nrotated-token\n")
	require.NoError(t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), rotated, testNS))
	f.catchUp()
	require.NoError(t, f.sync(kindPool, "tmp1"))
	require.Len(t, f.createdJobs(), 1, "new bootstrap data: re-apply")
}

// K5: a machine waiting for its bootstrap data Secret is enqueued when the
// Secret appears (the metadata watch of labelled Secrets), so its apply
// starts then, not a sync period later; a provisioned machine, which pins
// its data, is not.
func TestK5MachineFollowsItsBootstrapSecret(t *testing.T) {
	f := capiFixture(t)
	f.seed(newMachine("tm1", withCAPI, capiOwner(capiv1.KindMachine, "m1")),
		newMachine("tm2", withCAPI, capiOwner(capiv1.KindMachine, "m2"), withStatus(provisionedStatus)))
	f.seedCAPI(capiMachine("m1", "tm1", ptr.To("m1-bootstrap")), capiMachine("m2", "tm2", ptr.To("m1-bootstrap")))
	require.NoError(t, f.sync(kindMachine, "tm1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	q := f.c.queues[kindMachine]
	for q.Len() > 0 { // what seeding enqueued
		k, _ := q.Get()
		q.Done(k)
	}

	f.c.enqueueBootstrapUsers(&metav1.ObjectMeta{Namespace: testNS, Name: "m1-bootstrap"})
	f.waitQueued(kindMachine, cache.ObjectName{Namespace: testNS, Name: "tm1"})
	require.Zero(t, q.Len(), "the provisioned machine tm2 pins its bootstrap data: not enqueued")
	f.c.enqueueBootstrapUsers(&metav1.ObjectMeta{Namespace: testNS, Name: "other"})
	require.Zero(t, q.Len(), "a Secret no Machine names")

	f.seedHidden(bootstrapSecret("m1-bootstrap", bootstrapValue))
	require.NoError(t, f.sync(kindMachine, "tm1"))
	require.Len(t, f.createdJobs(), 1)
}
