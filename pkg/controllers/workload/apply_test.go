package workload

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
)

// workloadOf builds an object of kind named name that uses identityName
// directly, with mods applied.
func workloadOf(kind, name string, mods ...any) metav1.Object {
	switch kind {
	case v1alpha1.KindTerraformCluster:
		return newCluster(name, mods...)
	case v1alpha1.KindTerraformMachine:
		return newMachine(name, append([]any{func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) }}, mods...)...)
	default:
		return newPool(name, append([]any{func(p *v1alpha1.TerraformMachinePool) { p.Spec.IdentityRef = idRef(identityName) }}, mods...)...)
	}
}

func resourceOf(kind string) string {
	switch kind {
	case v1alpha1.KindTerraformCluster:
		return "terraformclusters"
	case v1alpha1.KindTerraformMachine:
		return "terraformmachines"
	}
	return "terraformmachinepools"
}

func generation(g int64) func(metav1.Object) { return func(o metav1.Object) { o.SetGeneration(g) } }

// J1, J2, J8: with credentials ready and no Job for this generation, the
// apply Job is created with its deterministic name, after the finalizer
// is stored (an object with an apply Job must never be deleted without a
// destroy), and the status records it.
func TestSyncCreatesApplyJob(t *testing.T) {
	for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
		t.Run(kind, func(t *testing.T) {
			f := newFixture(t)
			obj := workloadOf(kind, "obj", generation(3))
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), obj.(runtime.Object))

			require.NoError(t, f.sync(kind, "obj"))

			res := resourceOf(kind)
			wantName := jobs.Name(kind, "obj", obj.GetUID(), v1alpha1.JobActionApply, 3)
			require.Equal(t, []string{
				"create secrets " + testNS + "/" + mirrorName,
				"create serviceaccounts " + testNS + "/" + v1alpha1.RunnerName, // T1, before the finalizer (J8)
				"create rolebindings " + testNS + "/" + v1alpha1.RunnerName,
				"patch " + res + " " + testNS + "/obj",
				"create jobs " + testNS + "/" + wantName,
				"update " + res + "/status " + testNS + "/obj",
			}, f.writes(), "the finalizer is stored before the Job is created")
			upd, _ := f.find("patch", res, "")
			require.Equal(t, []string{v1alpha1.FinalizerDestroy}, upd.obj.(metav1.Object).GetFinalizers())

			js := f.createdJobs()
			require.Len(t, js, 1)
			j := js[0]
			require.LessOrEqual(t, len(j.Name), 63)
			require.Equal(t, "true", j.Labels[v1alpha1.LabelManaged])
			require.Equal(t, "apply", j.Annotations[v1alpha1.AnnotationJobAction])
			require.Equal(t, "3", j.Annotations[v1alpha1.AnnotationJobGeneration])
			require.Equal(t, credentials.SourceHash(sourceData()), j.Annotations[v1alpha1.AnnotationSourceHash], "C5")
			ctrl := metav1.GetControllerOf(j)
			require.NotNil(t, ctrl)
			require.Equal(t, obj.GetUID(), ctrl.UID)
			require.Equal(t, kind, ctrl.Kind)
			require.Equal(t, mirrorName, j.Spec.Template.Spec.Containers[0].EnvFrom[0].SecretRef.Name, "J2")
			require.Equal(t, runnerImage, j.Spec.Template.Spec.InitContainers[0].Image, "J5")

			st := f.lastStatus()
			require.Equal(t, &v1alpha1.JobReference{Name: wantName, Action: v1alpha1.JobActionApply, Generation: 3}, st.LastJob)
			requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
			requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
			requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonJobRunning)
			for _, c := range st.Conditions {
				require.Equal(t, int64(3), c.ObservedGeneration, c.Type)
				require.Equal(t, epoch, c.LastTransitionTime.Time.UTC(), "the injected clock")
			}

			// Deterministic: the next pass, with the Job in the cache,
			// creates nothing.
			f.catchUp()
			require.NoError(t, f.sync(kind, "obj"))
			require.Empty(t, f.writes())
		})
	}
}

// J1: the cases that create no Job.
func TestSyncNoApplyJob(t *testing.T) {
	tests := []struct {
		name       string
		obj        *v1alpha1.TerraformCluster
		jobs       func(c *v1alpha1.TerraformCluster) []runtime.Object
		wantReason v1alpha1.ConditionReason
		wantStatus metav1.ConditionStatus
		wantMsg    string
	}{{
		name:       "J1 spec.source.image empty: NoApplyYet, no finalizer",
		obj:        newCluster("c1", func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = "" }),
		wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonNoApplyYet, wantMsg: "spec.source.image",
	}, {
		name: "J1 a Job of an older generation still runs: no second Job",
		obj:  newCluster("c1", withFinalizer, generation(2)),
		jobs: func(c *v1alpha1.TerraformCluster) []runtime.Object {
			return []runtime.Object{newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobRunning)}
		},
		wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonJobRunning, wantMsg: "generation 2 is applied after it ends",
	}, {
		name: "J1 a Job of an older generation has decided but its pod still runs (FailureTarget only): wait",
		obj:  newCluster("c1", withFinalizer, generation(2)),
		jobs: func(c *v1alpha1.TerraformCluster) []runtime.Object {
			j := newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobDeadlineExceeded)
			j.Status.Conditions = j.Status.Conditions[:1] // FailureTarget, not yet Failed
			return []runtime.Object{j}
		},
		wantStatus: metav1.ConditionUnknown, wantReason: v1alpha1.ReasonJobRunning,
	}, {
		name: "J1 this generation's Job already exists",
		obj:  newCluster("c1", withFinalizer, generation(2)),
		jobs: func(c *v1alpha1.TerraformCluster) []runtime.Object {
			return []runtime.Object{newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobSucceeded), newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 2, jobSucceeded)}
		},
		wantStatus: metav1.ConditionTrue, wantReason: v1alpha1.ReasonApplySucceeded,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), tc.obj,
				newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, tc.obj)))
			if tc.jobs != nil {
				f.seed(tc.jobs(tc.obj)...)
			}

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes(), "no Job, no finalizer change")
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, tc.wantStatus, tc.wantReason)
			require.Contains(t, c.Message, tc.wantMsg)
		})
	}
}

// J1: a create that finds the Job already there (the cache had not seen
// it yet) counts as created: no error, the status records it.
func TestSyncApplyJobAlreadyExists(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
	require.NoError(t, f.Kube.Tracker().Add(newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning)))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	st := f.lastStatus()
	require.Equal(t, jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1), st.LastJob.Name)
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
}

// J7: ApplyJobSucceeded reflects this generation's Job as the Job
// controller reports it.
func TestSyncReportsJobOutcome(t *testing.T) {
	tests := []struct {
		name       string
		outcome    jobOutcome
		status     metav1.ConditionStatus
		reason     v1alpha1.ConditionReason
		wantReady  metav1.ConditionStatus
		msgContain string
	}{
		{"J7 running", jobRunning, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning, metav1.ConditionFalse, "is running"},
		{"J7 succeeded", jobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded, metav1.ConditionTrue, "succeeded"},
		{"J7 failed (BackoffLimitExceeded)", jobFailed, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed, metav1.ConditionFalse, "backoff limit"},
		{"J7 deadline exceeded", jobDeadlineExceeded, metav1.ConditionFalse, v1alpha1.ReasonJobDeadlineExceeded, metav1.ConditionFalse, "deadline"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
				newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
				newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, tc.outcome))

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			require.Empty(t, f.createdJobs(), "a Job exists for this generation")
			st := f.lastStatus()
			c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, tc.status, tc.reason)
			require.Contains(t, c.Message, tc.msgContain)
			ready := requireCondition(t, st, v1alpha1.ConditionReady, tc.wantReady, map[bool]v1alpha1.ConditionReason{true: v1alpha1.ReasonReady, false: tc.reason}[tc.wantReady == metav1.ConditionTrue])
			if tc.wantReady != metav1.ConditionTrue {
				require.Contains(t, ready.Message, string(v1alpha1.ConditionApplyJobSucceeded))
			}
		})
	}
}

// Ready (section 10): True only when every other condition is True; else
// False with the reason of the first that is not, in the order
// IdentityAllowed, CredentialsMirrored, ApplyJobSucceeded.
func TestSyncReadySummary(t *testing.T) {
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: mirrorName, UID: "uid-foreign"}}
	tests := []struct {
		name   string
		setup  func(f *fixture, c *v1alpha1.TerraformCluster)
		status metav1.ConditionStatus
		reason v1alpha1.ConditionReason
	}{{
		name: "all True",
		setup: func(f *fixture, c *v1alpha1.TerraformCluster) {
			f.seed(newIdentity(identityName, allowList(testNS)), newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobSucceeded))
		},
		status: metav1.ConditionTrue, reason: v1alpha1.ReasonReady,
	}, {
		name: "IdentityAllowed first, even with a failed Job",
		setup: func(f *fixture, c *v1alpha1.TerraformCluster) {
			f.seed(newIdentity(identityName, allowList(otherNS)), newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobFailed))
		},
		status: metav1.ConditionFalse, reason: v1alpha1.ReasonNamespaceNotAllowed,
	}, {
		name: "CredentialsMirrored before ApplyJobSucceeded",
		setup: func(f *fixture, c *v1alpha1.TerraformCluster) {
			f.seedHidden(foreign)
			f.seed(newIdentity(identityName, allowList(testNS)), newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobFailed))
		},
		status: metav1.ConditionFalse, reason: v1alpha1.ReasonMirrorFailed,
	}, {
		name: "ApplyJobSucceeded last",
		setup: func(f *fixture, c *v1alpha1.TerraformCluster) {
			f.seed(newIdentity(identityName, allowList(testNS)), newJob(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobFailed))
		},
		status: metav1.ConditionFalse, reason: v1alpha1.ReasonApplyFailed,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			f.seed(newSource(sourceData()), c1)
			tc.setup(f, c1)

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			requireCondition(t, f.lastStatus(), v1alpha1.ConditionReady, tc.status, tc.reason)
		})
	}
}

// Section 10: one event per change, not per pass. Two identical passes of
// an object whose namespace is not allowed emit IdentityNotAllowed once,
// and the second pass writes no status (nothing changed).
func TestSyncEventsOncePerChange(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), newCluster("c1"))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
	f.catchUp()
	f.Clock.Step(syncPeriod)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, f.PopEvents(), "the same condition again: no event")
	require.Empty(t, f.writes())

	// A change (the namespace is allowed again, then the source vanishes)
	// is a new event.
	id := newIdentity(identityName, allowList(testNS))
	id.Generation = 2
	require.NoError(t, f.inf.Identities.Informer().GetIndexer().Update(id))
	require.NoError(t, f.Kube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), sourceNS, sourceName))
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
}

// J8: a deleting object whose apply Job still runs waits for it: no
// destroy Job, the finalizer stays.
func TestSyncDeletingWaitsForRunningApply(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	require.Contains(t, c.Message, "before destroying")
}

// J8, M6: a deleting object with credentials ready gets its mirror made
// current (a rotated source here), then its destroy Job.
func TestSyncDeletingCreatesDestroyJob(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	stale := newMirror(identityName, testNS, map[string][]byte{"API_KEY": []byte("old")}, refOf(v1alpha1.KindTerraformCluster, c1))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, stale,
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	wantJob := jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1)
	require.Equal(t, []string{
		"patch secrets " + testNS + "/" + mirrorName,
		"create serviceaccounts " + testNS + "/" + v1alpha1.RunnerName, // T1
		"create rolebindings " + testNS + "/" + v1alpha1.RunnerName,
		"create jobs " + testNS + "/" + wantJob,
		"update terraformclusters/status " + testNS + "/c1",
	}, f.writes(), "mirror current first, then the destroy Job; the finalizer stays")
	f.requireSourceReadUncached()
	j := f.createdJobs()[0]
	require.Equal(t, "destroy", j.Annotations[v1alpha1.AnnotationJobAction])
	st := f.lastStatus()
	require.Equal(t, &v1alpha1.JobReference{Name: wantJob, Action: v1alpha1.JobActionDestroy, Generation: 1}, st.LastJob)
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
}

// J8, V3: after a successful destroy, cleanup removes the object's owner
// reference from the mirror (deleting it with UID and resourceVersion
// preconditions when it was the last owner, MirrorRemoved event), and the
// finalizer goes last.
func TestSyncDestroySucceededCleansUp(t *testing.T) {
	tests := []struct {
		name       string
		others     []metav1.OwnerReference
		wantMirror string
	}{
		{name: "V3 last owner: mirror deleted", wantMirror: "delete secrets " + testNS + "/" + mirrorName},
		{name: "V3 other owners: reference removed", others: []metav1.OwnerReference{refOf(v1alpha1.KindTerraformMachine, newMachine("m1"))}, wantMirror: "patch secrets " + testNS + "/" + mirrorName},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", deleting, func(c *v1alpha1.TerraformCluster) { c.Finalizers = append(c.Finalizers, "example.com/other") })
			mirror := newMirror(identityName, testNS, sourceData(), append([]metav1.OwnerReference{refOf(v1alpha1.KindTerraformCluster, c1)}, tc.others...)...)
			state := func(name, suffix string) *corev1.Secret {
				s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-" + name)}}
				if suffix != "" {
					s.Labels = map[string]string{"tfstate": "true", "tfstateSecretSuffix": suffix, "app.kubernetes.io/managed-by": "terraform"}
				}
				return s
			}
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, mirror,
				newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded),
				newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionDestroy, 1, jobSucceeded),
				state("tfstate-default-c1-cluster", "c1-cluster"),
				state("tfstate-default-c1-cluster-part-1", "c1-cluster"),
				// B15: the labels alone make no state Secret.
				state("tfstate-default-c1-cluster-part1", "c1-cluster"),
				state("tenant-data", "c1-cluster"),
				state("tfstate-default-c2-cluster", "c2-cluster"),
				state("unlabelled", ""))

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			w := f.writeActions()
			require.Len(t, w, 6, "%v", w)
			require.ElementsMatch(t, []string{
				"delete secrets " + testNS + "/tfstate-default-c1-cluster",
				"delete secrets " + testNS + "/tfstate-default-c1-cluster-part-1",
			}, []string{w[0].String(), w[1].String()}, "T2: every state Secret of the object's suffix, and no other")
			requireDeletePreconditions(t, w[0], types.UID("uid-"+w[0].name), "")
			require.Equal(t, "delete leases "+testNS+"/lock-tfstate-default-c1-cluster", w[2].String(), "T2: the lock Lease")
			w = w[3:]
			require.Equal(t, "update terraformclusters/status "+testNS+"/c1", w[0].String())
			require.Equal(t, tc.wantMirror, w[1].String())
			require.Equal(t, "patch terraformclusters "+testNS+"/c1", w[2].String(), "the finalizer goes last")
			require.Equal(t, []string{"example.com/other"}, w[2].obj.(metav1.Object).GetFinalizers(), "only ours removed")
			require.NotNil(t, f.storedSecret(testNS, "tfstate-default-c2-cluster"), "another object's state is kept")
			require.NotNil(t, f.storedSecret(testNS, "unlabelled"))
			require.NotNil(t, f.storedSecret(testNS, "tfstate-default-c1-cluster-part1"), "B15: a look-alike name is kept")
			require.NotNil(t, f.storedSecret(testNS, "tenant-data"), "B15: a Secret with the labels but another name is kept")
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonDestroySucceeded)
			if w[1].verb == "delete" {
				requireDeletePreconditions(t, w[1], mirror.UID, mirror.ResourceVersion)
				require.Contains(t, eventReasons(f.PopEvents()), "Normal "+v1alpha1.EventMirrorRemoved)
			} else {
				require.Equal(t, tc.others, f.storedSecret(testNS, mirrorName).OwnerReferences)
				require.Contains(t, string(w[1].raw.(k8stesting.PatchAction).GetPatch()), `"resourceVersion":"42"`, "P3: preconditioned on the cached version")
			}
			require.Empty(t, f.createdJobs())
		})
	}
}

// J7, J8: a failed destroy keeps the finalizer and says so.
func TestSyncDestroyFailedKeepsFinalizer(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionDestroy, 1, jobFailed))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonDestroyFailed)
}

// V2: a deletion whose destroy needs an identity that no longer allows the
// namespace waits: ApplyJobSucceeded=False/IdentityNotAllowed, finalizer
// kept, no destroy Job, requeued after a delay (not only on events).
func TestSyncDeletingWaitsForDisallowedIdentity(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{
		"delete secrets " + testNS + "/" + mirrorName, // V1 still applies
		"update terraformclusters/status " + testNS + "/c1",
	}, f.writes(), "no destroy Job, no finalizer change")
	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed)
	require.Contains(t, c.Message, v1alpha1.AnnotationAbandonInfrastructure+"="+string(c1.UID))
	requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNamespaceNotAllowed)
	key := cache.ObjectName{Namespace: testNS, Name: "c1"}
	controllertest.RequireRequeuedAfter(t, f.c.queues[v1alpha1.KindTerraformCluster], f.Clock, key, waitRequeue)
}

// V2: the abandon annotation set to the object's UID releases the
// finalizer without a destroy Job, with an InfrastructureAbandoned Warning;
// any other value is ignored.
func TestSyncAbandonInfrastructure(t *testing.T) {
	t.Run("V2 annotation names the UID", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		c1.Annotations = map[string]string{v1alpha1.AnnotationAbandonInfrastructure: string(c1.UID)}
		mirror := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1))
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1, mirror,
			newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded),
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "tfstate-default-c1-cluster",
				Labels: map[string]string{"tfstate": "true", "tfstateSecretSuffix": "c1-cluster"}}})

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		w := f.writes()
		require.Equal(t, "patch terraformclusters "+testNS+"/c1", w[len(w)-1], "the finalizer goes last: %v", w)
		upd, _ := f.find("patch", "terraformclusters", "")
		require.Empty(t, upd.obj.(metav1.Object).GetFinalizers())
		require.Empty(t, f.createdJobs(), "no destroy Job")
		events := f.PopEvents()
		require.Contains(t, eventReasons(events), "Warning "+v1alpha1.EventInfrastructureAbandoned)
		require.Contains(t, strings.Join(events, "\n"), "state stays in Secret "+testNS+"/tfstate-default-c1-cluster", "T2: the event says where the state is")
		for _, a := range f.writeActions() {
			require.False(t, a.verb == "delete" && a.resource == "leases", "T2: abandonment keeps the state's lock Lease")
		}
		require.NotNil(t, f.storedSecret(testNS, "tfstate-default-c1-cluster"), "T2: abandonment keeps the state")
	})
	t.Run("V2 annotation with another value is ignored", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		c1.Annotations = map[string]string{v1alpha1.AnnotationAbandonInfrastructure: "true"}
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(otherNS)), c1,
			newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		_, updated := f.find("patch", "terraformclusters", "")
		require.False(t, updated, "finalizer kept")
		requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotAllowed)
		require.NotContains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventInfrastructureAbandoned)
	})
}

// J8: a deleting object that never created an apply Job just loses the
// finalizer (nothing to destroy); one without the finalizer is left alone.
func TestSyncDeletingWithoutApply(t *testing.T) {
	t.Run("J8 finalizer but no apply Job", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1", "patch terraformclusters " + testNS + "/c1"}, f.writes(),
			"the status once, the finalizer last")
		upd, _ := f.find("patch", "terraformclusters", "")
		require.Empty(t, upd.obj.(metav1.Object).GetFinalizers())
		require.Empty(t, f.createdJobs())
	})
	t.Run("J8 no finalizer: nothing to do", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting, func(o metav1.Object) { o.SetFinalizers([]string{"example.com/other"}) })
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1)

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Empty(t, f.allActions())
	})
	t.Run("gone from the cache: nothing to do", func(t *testing.T) {
		f := newFixture(t)
		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "gone"))
		require.Empty(t, f.allActions())
	})
}

// J1 ("at most one Job per object runs at a time") when the Job cache lags
// behind the object's status: the status records an apply Job (LastJob)
// that the API server has and is still running, but the Job informer has
// not delivered it yet.
func TestSyncJobCacheLag(t *testing.T) {
	t.Run("J1 deleting: no destroy Job while the recorded apply Job may run", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		apply := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning)
		c1.Status.LastJob = &v1alpha1.JobReference{Name: apply.Name, Action: v1alpha1.JobActionApply, Generation: 1}
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
		require.NoError(t, f.Kube.Tracker().Add(apply)) // API server only

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Empty(t, f.createdJobNames(), "the apply Job runs")
	})
	t.Run("J8 deleting: the finalizer stays while an apply Job the cache has not seen exists", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", deleting)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
		require.NoError(t, f.Kube.Tracker().Add(newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning))) // API server only

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		_, updated := f.find("patch", "terraformclusters", "")
		require.False(t, updated, "the finalizer must stay: an apply Job exists")
	})
	t.Run("J1 new generation: no second apply Job while the recorded one may run", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer, generation(2))
		apply := newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobRunning)
		c1.Status.LastJob = &v1alpha1.JobReference{Name: apply.Name, Action: v1alpha1.JobActionApply, Generation: 1}
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
		require.NoError(t, f.Kube.Tracker().Add(apply)) // API server only

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Empty(t, f.createdJobNames(), "the generation-1 Job runs")
	})
}

// A create of a Job that fails for a reason a retry can fix returns an
// error (rate-limited retry), with the status still written.
func TestSyncJobCreateErrorIsRetried(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))
	f.prependKubeReactor("create", "jobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is sad")
	})

	err := f.sync(v1alpha1.KindTerraformCluster, "c1")
	require.Error(t, err)
	require.Contains(t, err.Error(), "etcd is sad")
	require.Nil(t, f.lastStatus().LastJob)
}
