package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// SPEC K11: what clusterctl move needs of captf, unit by unit.

func (f *fixture) storedSecretOrNil(name string) *corev1.Secret {
	f.t.Helper()
	o, err := f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), testNS, name)
	if err != nil {
		return nil
	}
	return o.(*corev1.Secret)
}

// After a successful apply's outputs are read, the state Secret is owned
// by the object (so clusterctl moves it with the object) and records the
// applied spec and inputs; a second pass writes nothing more.
func TestK11StateMarkedAfterApply(t *testing.T) {
	f := newFixture(t)
	obj := f.applied(kindCluster, 1)
	f.withOutputs(kindCluster, obj, map[string]string{"control_plane_endpoint": `"cp:6443"`})
	require.NoError(t, f.sync(kindCluster, "obj"))

	name := tfstate.SecretName(jobs.StateSuffix(kindCluster, "obj"))
	state := f.storedSecretOrNil(name)
	require.NotNil(t, state)
	require.True(t, ownedBy(state, obj.GetUID()), "owned by its object: %v", state.OwnerReferences)
	w := f.c.kinds[kindCluster]
	stored, err := w.get(state2key(obj))
	require.NoError(t, err)
	stored.robj.(*v1alpha1.TerraformCluster).Spec.ControlPlaneEndpoint = v1alpha1.APIEndpoint{} // as applied
	require.Equal(t, specHash(stored), state.Annotations[v1alpha1.AnnotationAppliedSpec])
	require.Contains(t, state.Annotations, v1alpha1.AnnotationAppliedInputs)

	f.resetActions()
	f.steadyPasses(kindCluster, "obj")
	for _, a := range f.allActions() {
		require.False(t, a.verb == "patch" && a.resource == "secrets", "no second mark: %v", a)
	}
}

func state2key(o metav1.Object) cache.ObjectName {
	return cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// A copy of an applied object without status (clusterctl move, a restore)
// whose state records its spec adopts the run instead of applying again;
// with another spec it applies.
func TestK11AdoptsAnAppliedState(t *testing.T) {
	for _, tt := range []struct {
		name  string
		image string
		adopt bool
	}{
		{"same spec", moduleImage, true},
		{"changed spec", "registry.example.com/other:2", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			original := newCluster("obj")
			w := wrapCluster(original)
			w.kind = f.c.kinds[kindCluster]
			hash := specHash(w)
			copyObj := newCluster("obj", func(c *v1alpha1.TerraformCluster) {
				c.UID = "uid-moved-copy"
				c.Spec.Source.Image = tt.image
			})
			state := stateSecretOf(kindCluster, copyObj, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, map[string]string{"control_plane_endpoint": `"cp:6443"`})))
			state.Annotations = map[string]string{v1alpha1.AnnotationAppliedSpec: hash}
			state.OwnerReferences = []metav1.OwnerReference{refOf(kindCluster, copyObj)}
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), copyObj,
				newMirror(identityName, testNS, sourceData(), refOf(kindCluster, copyObj)))
			f.putState(state)
			f.catchUp()

			require.NoError(t, f.sync(kindCluster, "obj"))
			if !tt.adopt {
				require.Len(t, f.createdJobs(), 1, "another spec: applied")
				return
			}
			require.Empty(t, f.createdJobs(), "no second apply (K11)")
			st := f.lastStatus()
			require.Equal(t, adoptedJobName, st.LastApply.JobName)
			require.Equal(t, v1alpha1.RunSucceeded, st.LastApply.Outcome)
			requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
			require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventStateAdopted)
			require.Contains(t, f.storedObj(kindCluster, "obj").GetFinalizers(), v1alpha1.FinalizerDestroy, "its infrastructure exists")

			// Its outputs are read from that state as after an apply (T4).
			require.Equal(t, `{"control_plane_endpoint":"cp:6443"}`, outputsOf(st))
			f.steadyPasses(kindCluster, "obj")
			require.Empty(t, f.createdJobs())
		})
	}
}

// K11: an object deleted with clusterctl.cluster.x-k8s.io/delete-for-move
// starts no destroy and keeps its state: the finalizer goes, the state
// stays (and is no longer owned, so nothing collects it by mistake).
// clusterctl pauses the Cluster too, but SPEC K11 names only the
// annotation: it is honoured without the pause as well.
func TestK11DeleteForMove(t *testing.T) {
	for _, tt := range []struct {
		name   string
		paused bool
	}{{"paused", true}, {"not paused", false}} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c := newCluster("obj", deleting, withStatus(func(st *v1alpha1.WorkloadStatus) {
				st.LastApply = &v1alpha1.RunRecord{Generation: 1, JobName: "applied", Outcome: v1alpha1.RunSucceeded, Attempt: 1}
			}), func(o metav1.Object) {
				o.GetAnnotations()[v1alpha1.AnnotationDeleteForMove] = ""
				if tt.paused {
					o.GetAnnotations()[v1alpha1.AnnotationPaused] = ""
				}
			})
			state := stateSecretOf(kindCluster, c, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, nil)))
			state.OwnerReferences = []metav1.OwnerReference{refOf(kindCluster, c)}
			f.seedReady(c)
			f.putState(state)
			f.catchUp()

			require.NoError(t, f.sync(kindCluster, "obj"))
			require.Empty(t, f.createdJobs(), "no destroy for a moved copy")
			require.NotContains(t, f.storedObj(kindCluster, "obj").GetFinalizers(), v1alpha1.FinalizerDestroy)
			kept := f.storedSecretOrNil(state.Name)
			require.NotNil(t, kept, "the state stays")
			require.False(t, ownedBy(kept, c.UID))
			require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventMovedAway)
		})
	}
}

// V2 with K11's ownership: abandoning keeps the state, so it is disowned.
func TestK11AbandonKeepsTheState(t *testing.T) {
	f := newFixture(t)
	c := newCluster("obj", deleting, func(o metav1.Object) {
		o.GetAnnotations()[v1alpha1.AnnotationAbandonInfrastructure] = string(o.GetUID())
	})
	state := stateSecretOf(kindCluster, c, "", tfstatetest.Gzip(tfstatetest.State(sensitiveOutput, nil)))
	state.OwnerReferences = []metav1.OwnerReference{refOf(kindCluster, c), {APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other"}}
	f.seedReady(c)
	f.putState(state)
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "obj"))
	kept := f.storedSecretOrNil(state.Name)
	require.NotNil(t, kept)
	require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "other"}}, kept.OwnerReferences, "other owners stay")
}

// A copied provider-fields mark names another object's UID: the copy's
// first spec change is applied (K11).
func TestK11CopiedProviderFieldsMarkIgnored(t *testing.T) {
	w := wrapCluster(newCluster("obj", generation(2), func(o metav1.Object) {
		o.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration] = "2/uid-of-the-source"
	}))
	rec := &v1alpha1.RunRecord{Generation: 1, Outcome: v1alpha1.RunSucceeded}
	require.False(t, coversGeneration(w, rec), "a mark of another UID does not cover the change")
	w.obj.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration] = "2/" + string(w.obj.GetUID())
	require.True(t, coversGeneration(w, rec))
	w.obj.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration] = "2"
	require.True(t, coversGeneration(w, rec), "a mark written before marks named a UID")
	w.obj.GetAnnotations()[v1alpha1.AnnotationProviderFieldsGeneration] = "x/y"
	require.False(t, coversGeneration(w, rec))
}

var _ runtime.Object = (*corev1.Secret)(nil)

// K11: an object of a Cluster carries clusterctl's block-move annotation,
// written before its Job is created, for as long as the Job runs; the
// first pass after the Job finished removes it. A standalone object is in
// no move graph and gets no mark; a value someone else set stays.
func TestK11BlockMoveWhileAJobRuns(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("tc1", withCAPI))
	f.seedCAPI(capiCluster(capiClusterName, "tc1"))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))

	jobsCreated := f.createdJobs()
	require.Len(t, jobsCreated, 1)
	var marked, created int = -1, -1
	for i, w := range f.writes() {
		switch w {
		case "patch terraformclusters " + testNS + "/tc1": // a merge patch (B12)
			if marked < 0 {
				marked = i
			}
		case "create jobs " + testNS + "/" + jobsCreated[0].Name:
			created = i
		}
	}
	require.True(t, marked >= 0 && marked < created, "the mark is written before the Job is created: %v", f.writes())
	stored := f.storedObj(kindCluster, "tc1")
	require.Equal(t, blockMoveValue, stored.GetAnnotations()[v1alpha1.AnnotationBlockMove])
	require.Contains(t, stored.GetFinalizers(), v1alpha1.FinalizerDestroy)

	// Still running: the mark stays.
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))
	require.Equal(t, blockMoveValue, f.storedObj(kindCluster, "tc1").GetAnnotations()[v1alpha1.AnnotationBlockMove])

	f.finishJob(jobsCreated[0].Name, jobSucceeded)
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "tc1"))
	require.NotContains(t, f.storedObj(kindCluster, "tc1").GetAnnotations(), v1alpha1.AnnotationBlockMove, "removed once the Job finished")
}

func TestK11BlockMoveMarkOnlyOurs(t *testing.T) {
	for _, tt := range []struct {
		name    string
		initial map[string]string
		present bool
		want    map[string]string
	}{
		{"set", nil, true, map[string]string{v1alpha1.AnnotationBlockMove: blockMoveValue}},
		{"someone else's value kept on set", map[string]string{v1alpha1.AnnotationBlockMove: "backup"}, true, map[string]string{v1alpha1.AnnotationBlockMove: "backup"}},
		{"ours removed", map[string]string{v1alpha1.AnnotationBlockMove: blockMoveValue, "a": "b"}, false, map[string]string{"a": "b"}},
		{"someone else's value kept on removal", map[string]string{v1alpha1.AnnotationBlockMove: "backup"}, false, map[string]string{v1alpha1.AnnotationBlockMove: "backup"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := wrapCluster(newCluster("obj", func(o metav1.Object) { o.SetAnnotations(tt.initial) }))
			setBlockMoveOn(w, tt.present)
			require.Equal(t, tt.want, w.obj.GetAnnotations())
		})
	}
}

func TestK11JobActive(t *testing.T) {
	running := newJob(kindCluster, newCluster("obj"), v1alpha1.JobActionApply, 1, jobRunning)
	done := newJob(kindCluster, newCluster("obj"), v1alpha1.JobActionApply, 1, jobSucceeded)
	for _, tt := range []struct {
		name   string
		set    jobSet
		status v1alpha1.WorkloadStatus
		want   bool
	}{
		{"no Job ever", newJobSet(nil), v1alpha1.WorkloadStatus{}, false},
		{"a running Job", newJobSet([]*batchv1.Job{running}), v1alpha1.WorkloadStatus{LastJob: &v1alpha1.JobReference{Name: running.Name}}, true},
		{"the last Job finished", newJobSet([]*batchv1.Job{done}), v1alpha1.WorkloadStatus{LastJob: &v1alpha1.JobReference{Name: done.Name}}, false},
		{"the last Job not cached yet", newJobSet(nil), v1alpha1.WorkloadStatus{LastJob: &v1alpha1.JobReference{Name: "new"}}, true},
		{"the last Job gone, its run recorded", newJobSet(nil), v1alpha1.WorkloadStatus{LastJob: &v1alpha1.JobReference{Name: "old"}, LastApply: &v1alpha1.RunRecord{JobName: "old"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := wrapCluster(newCluster("obj"))
			*w.status = tt.status
			require.Equal(t, tt.want, jobActive(w, tt.set))
		})
	}
}
