package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/credentials"
)

// Tests of SPEC section 14 (C1-C3, C5, C6) through the workload reconcile.

var (
	secretsGVR = corev1.SchemeGroupVersion.WithResource("secrets")
	jobsGVR    = batchv1.SchemeGroupVersion.WithResource("jobs")
)

// consenting marks a source as usable by the identities listed (C1).
func consenting(s *corev1.Secret, identities string) *corev1.Secret {
	s.Labels = map[string]string{v1alpha1.LabelCredential: v1alpha1.LabelTrue}
	s.Annotations = map[string]string{v1alpha1.AnnotationCredentialIdentities: identities}
	return s
}

// updateSource replaces the source Secret in the fake API server.
func (f *fixture) updateSource(s *corev1.Secret) {
	f.t.Helper()
	require.NoError(f.t, f.Kube.Tracker().Update(secretsGVR, s, sourceNS))
}

// oldData is the source's data before a rotation; its value and hash are
// scanned for (X1) by every fixture that uses it.
func oldData(f *fixture) map[string][]byte {
	d := map[string][]byte{"API_KEY": []byte("0ld-VALUE-x1"), "REGION": []byte("eu-west-1")}
	f.Secrets = append(f.Secrets, "0ld-VALUE-x1", credentials.SourceHash(d))
	return d
}

// jobWithHash is newJob annotated as the manager creates it (C5): the
// source hash it started with and its identity.
func jobWithHash(kind string, o metav1.Object, action v1alpha1.JobAction, generation int64, outcome jobOutcome, hash string) *batchv1.Job {
	j := newJob(kind, o, action, generation, outcome)
	j.Annotations[v1alpha1.AnnotationSourceHash] = hash
	j.Annotations[v1alpha1.AnnotationIdentity] = identityName
	return j
}

// stampJobCreation makes the fake API server set a created Job's
// creationTimestamp to the fake clock's now, as the API server does (the
// object tracker leaves it zero, which would order a new Job before every
// seeded one).
func (f *fixture) stampJobCreation() {
	f.prependKubeReactor("create", "jobs", func(a k8stesting.Action) (bool, runtime.Object, error) {
		j := a.(k8stesting.CreateAction).GetObject().(*batchv1.Job)
		j.CreationTimestamp = metav1.NewTime(f.Clock.Now())
		return false, nil, nil
	})
}

// finishJob sets the conditions of outcome on the stored Job name, as the
// Job controller does.
func (f *fixture) finishJob(name string, outcome jobOutcome) {
	f.t.Helper()
	o, err := f.Kube.Tracker().Get(jobsGVR, testNS, name)
	require.NoError(f.t, err)
	j := o.(*batchv1.Job).DeepCopy()
	j.Status.Conditions = newJob(v1alpha1.KindTerraformCluster, newCluster("x"), v1alpha1.JobActionApply, 1, outcome).Status.Conditions
	require.NoError(f.t, f.Kube.Tracker().Update(jobsGVR, j, testNS))
}

// requireNotUsable checks the outcome of a source the object may not use:
// IdentityAllowed=False with reason, no mirror, no Job, one
// IdentityNotAllowed Warning (plus MirrorRemoved when a mirror was
// deleted), and returns the IdentityAllowed condition.
func (f *fixture) requireNotUsable(reason v1alpha1.ConditionReason) metav1.Condition {
	f.t.Helper()
	st := f.lastStatus()
	c := requireCondition(f.t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, reason)
	requireCondition(f.t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
	requireCondition(f.t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, reason)
	require.Empty(f.t, f.createdJobs(), "no Job")
	_, created := f.find("create", "secrets", "")
	require.False(f.t, created, "no mirror is created")
	require.Contains(f.t, c.Message, sourceNS+"/"+sourceName, "the message names the Secret")
	return c
}

// C1: with --require-source-consent off (the default) an unlabelled
// source is mirrored and used.
func TestSyncC1ConsentOffUnlabelledSourceMirrors(t *testing.T) {
	f := newFixture(t)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newCluster("c1"))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	require.Equal(t, mirrorName, f.createdSecret().Name)
	require.Len(t, f.createdJobs(), 1)
}

// C1: with --require-source-consent on, the source is usable only with the
// label captf.io/credential=true and the annotation
// captf.io/credential-identities naming the identity (or *).
func TestSyncC1Consent(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		annots map[string]string
		usable bool
		msg    string
	}{{
		name: "C1 no label, no annotation: NotOptedIn",
		msg:  v1alpha1.LabelCredential,
	}, {
		name:   "C1 label without annotation: NotOptedIn",
		labels: map[string]string{v1alpha1.LabelCredential: "true"},
		msg:    v1alpha1.AnnotationCredentialIdentities,
	}, {
		name:   "C1 annotation without label: NotOptedIn",
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: "*"},
		msg:    v1alpha1.LabelCredential,
	}, {
		name:   "C1 label not true: NotOptedIn",
		labels: map[string]string{v1alpha1.LabelCredential: "false"},
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: identityName},
		msg:    v1alpha1.LabelCredential,
	}, {
		name:   "C1 annotation names other identities only: NotOptedIn",
		labels: map[string]string{v1alpha1.LabelCredential: "true"},
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: "dev,staging, prod-eu"},
		msg:    identityName,
	}, {
		name:   "C1 label and annotation naming the identity: mirrored",
		labels: map[string]string{v1alpha1.LabelCredential: "true"},
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: identityName},
		usable: true,
	}, {
		name:   "C1 annotation listing the identity among others: mirrored",
		labels: map[string]string{v1alpha1.LabelCredential: "true"},
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: "dev, " + identityName + " ,staging"},
		usable: true,
	}, {
		name:   "C1 annotation *: mirrored",
		labels: map[string]string{v1alpha1.LabelCredential: "true"},
		annots: map[string]string{v1alpha1.AnnotationCredentialIdentities: "*"},
		usable: true,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withConsent)
			src := newSource(sourceData())
			src.Labels, src.Annotations = tc.labels, tc.annots
			f.seed(src, newIdentity(identityName, allowList(testNS)), newCluster("c1"))

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			if tc.usable {
				st := f.lastStatus()
				requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
				requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
				m := f.createdSecret()
				require.Equal(t, mirrorName, m.Name)
				require.Equal(t, sourceData(), m.Data)
				require.NotContains(t, m.Labels, v1alpha1.LabelCredential, "M2: the source's labels are not copied")
				require.Len(t, f.createdJobs(), 1)
				return
			}
			c := f.requireNotUsable(v1alpha1.ReasonNotOptedIn)
			require.Contains(t, c.Message, tc.msg)
			f.requireNoMirrorWrite()
			require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
			f.requireSourceReadUncached()
		})
	}
}

// C1: an existing mirror of a source without consent is deleted whatever
// owners remain (UID precondition), with a MirrorRemoved event; no Job.
func TestSyncC1NotOptedInDeletesExistingMirror(t *testing.T) {
	f := newFixture(t, withConsent)
	c1 := newCluster("c1")
	m1 := newMachine("m1", func(m *v1alpha1.TerraformMachine) { m.Spec.IdentityRef = idRef(identityName) })
	mirror := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1), refOf(v1alpha1.KindTerraformMachine, m1))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m1, mirror)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	w := f.writeActions()
	require.Len(t, w, 2, "delete the mirror, write the status: %v", w)
	require.Equal(t, "delete secrets "+testNS+"/"+mirrorName, w[0].String())
	requireDeletePreconditions(t, w[0], mirror.UID, "")
	require.Nil(t, f.storedSecret(testNS, mirrorName))
	require.NotNil(t, f.storedSecret(sourceNS, sourceName), "V6: the source is never deleted")
	f.requireNotUsable(v1alpha1.ReasonNotOptedIn)
	require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventMirrorRemoved, "Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))

	// Once per change: the same pass again deletes nothing and emits nothing.
	f.catchUp()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, f.writes())
	require.Empty(t, f.PopEvents())
}

// C1: consent withdrawn after a mirror exists (label removed, or the
// identity dropped from the annotation) revokes: the mirror is deleted and
// no Job starts for a new generation.
func TestSyncC1ConsentWithdrawnRevokes(t *testing.T) {
	tests := []struct {
		name     string
		withdraw func(s *corev1.Secret)
	}{
		{"C1 label removed", func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelCredential) }},
		{"C1 identity removed from the annotation", func(s *corev1.Secret) { s.Annotations[v1alpha1.AnnotationCredentialIdentities] = "dev" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, withConsent)
			f.seed(consenting(newSource(sourceData()), identityName), newIdentity(identityName, allowList(testNS)), newCluster("c1"))

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Equal(t, mirrorName, f.createdSecret().Name)
			js := f.createdJobNames()
			require.Len(t, js, 1)
			f.finishJob(js[0], jobSucceeded)
			f.catchUp()
			f.PopEvents()

			src := consenting(newSource(sourceData()), identityName)
			tc.withdraw(src)
			f.updateSource(src)
			c1, err := f.Captf.InfrastructureV1alpha1().TerraformClusters(testNS).Get(f.Ctx, "c1", metav1.GetOptions{})
			require.NoError(t, err)
			c1.Generation = 2
			require.NoError(t, f.Captf.Tracker().Update(v1alpha1.SchemeGroupVersion.WithResource("terraformclusters"), c1, testNS))
			f.catchUp()

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			require.Equal(t, []string{
				"delete secrets " + testNS + "/" + mirrorName,
				"update terraformclusters/status " + testNS + "/c1",
			}, f.writes(), "revoked; no Job for generation 2")
			require.Nil(t, f.storedSecret(testNS, mirrorName))
			st := f.lastStatus()
			requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNotOptedIn)
			requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending)
			require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventMirrorRemoved, "Warning " + v1alpha1.EventIdentityNotAllowed,
				"Normal " + v1alpha1.EventRunFinished, "Normal " + v1alpha1.EventRunFinished},
				eventReasons(f.PopEvents()), "O1: the seeded finished Job is recorded, RunFinished on the object and its Job")
		})
	}
}

// C2: a source that is itself a mirror, or a service-account token, is
// refused whatever --require-source-consent says (even with consent): the
// object reports SourceRefused, an existing mirror is deleted, no Job.
func TestSyncC2RefusedSource(t *testing.T) {
	sources := []struct {
		name string
		make func() *corev1.Secret
		msg  string
	}{{
		name: "C2 source is a captf mirror",
		make: func() *corev1.Secret {
			s := consenting(newSource(sourceData()), "*")
			s.Labels[v1alpha1.LabelMirrored] = v1alpha1.LabelTrue
			s.Labels[v1alpha1.LabelManaged] = v1alpha1.LabelTrue
			s.Annotations[v1alpha1.AnnotationIdentity] = "other"
			return s
		},
		msg: v1alpha1.LabelMirrored,
	}, {
		name: "C2 source is a service-account token",
		make: func() *corev1.Secret {
			s := consenting(newSource(sourceData()), "*")
			s.Type = corev1.SecretTypeServiceAccountToken
			return s
		},
		msg: string(corev1.SecretTypeServiceAccountToken),
	}}
	for _, src := range sources {
		for _, consent := range []bool{false, true} {
			name := src.name + ", consent off"
			var mods []func(*Options)
			if consent {
				name = src.name + ", consent on"
				mods = append(mods, withConsent)
			}
			t.Run(name, func(t *testing.T) {
				t.Run("no mirror yet", func(t *testing.T) {
					f := newFixture(t, mods...)
					f.seed(src.make(), newIdentity(identityName, allowList(testNS)), newCluster("c1"))

					require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

					c := f.requireNotUsable(v1alpha1.ReasonSourceRefused)
					require.Contains(t, c.Message, src.msg)
					require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
					require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
				})
				t.Run("existing mirror removed", func(t *testing.T) {
					f := newFixture(t, mods...)
					c1 := newCluster("c1", withFinalizer)
					mirror := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1))
					f.seed(src.make(), newIdentity(identityName, allowList(testNS)), c1, mirror,
						jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(sourceData())))

					require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

					w := f.writeActions()
					require.Len(t, w, 2, "%v", w)
					require.Equal(t, "delete secrets "+testNS+"/"+mirrorName, w[0].String())
					requireDeletePreconditions(t, w[0], mirror.UID, "")
					require.NotNil(t, f.storedSecret(sourceNS, sourceName), "V6: the source is never deleted")
					st := f.lastStatus()
					requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonSourceRefused)
					requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
					require.Empty(t, f.createdJobs())
					require.ElementsMatch(t, []string{"Normal " + v1alpha1.EventMirrorRemoved, "Warning " + v1alpha1.EventIdentityNotAllowed,
						"Normal " + v1alpha1.EventRunFinished, "Normal " + v1alpha1.EventRunFinished},
						eventReasons(f.PopEvents()), "O1: the seeded finished Job is recorded, RunFinished on the object and its Job")
				})
			})
		}
	}
}

// C3: a key of spec.requiredKeys missing from the source:
// IdentityAllowed=False/CredentialsIncomplete naming the key, no apply
// Job, and the existing mirror is kept as it is (not deleted, not
// rewritten). Once the key is added, the mirror is made current and the
// apply Job created.
func TestSyncC3MissingRequiredKey(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1")
	mirror := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1))
	id := newIdentity(identityName, allowList(testNS))
	id.Spec.RequiredKeys = []string{"API_KEY", "SECRET_KEY", "REGION"}
	f.seed(newSource(sourceData()), id, c1, mirror)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	st := f.lastStatus()
	c := requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonCredentialsIncomplete)
	require.Contains(t, c.Message, "SECRET_KEY")
	require.NotContains(t, c.Message, "API_KEY", "only the missing key is named")
	requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)
	requireCondition(t, st, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonCredentialsIncomplete)
	require.Empty(t, f.createdJobs(), "C3: no Job starts")
	f.requireNoMirrorWrite()
	require.Equal(t, mirror.UID, f.storedSecret(testNS, mirrorName).UID, "C3: the mirror is kept")
	require.Equal(t, []string{"Warning " + v1alpha1.EventIdentityNotAllowed}, eventReasons(f.PopEvents()))
	f.catchUp()

	// The key is added to the source.
	complete := sourceData()
	complete["SECRET_KEY"] = []byte("s3cond-VALUE-x1")
	f.Secrets = append(f.Secrets, "s3cond-VALUE-x1", credentials.SourceHash(complete))
	f.updateSource(newSource(complete))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	st = f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	upd, _, ok := f.patchedSecret()
	require.True(t, ok, "the mirror is made current: %v", f.writes())
	require.Equal(t, complete, upd.Data)
	js := f.createdJobs()
	require.Len(t, js, 1)
	require.Equal(t, jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1), js[0].Name)
	require.Equal(t, credentials.SourceHash(complete), js[0].Annotations[v1alpha1.AnnotationSourceHash])
}

// C3: an empty value counts as present.
func TestSyncC3EmptyValueIsPresent(t *testing.T) {
	f := newFixture(t)
	data := sourceData()
	data["EMPTY"] = []byte{}
	f.Secrets = append(f.Secrets, credentials.SourceHash(data))
	id := newIdentity(identityName, allowList(testNS))
	id.Spec.RequiredKeys = []string{"API_KEY", "EMPTY"}
	f.seed(newSource(data), id, newCluster("c1"))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	st := f.lastStatus()
	requireCondition(t, st, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
	requireCondition(t, st, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	require.Contains(t, f.createdSecret().Data, "EMPTY")
	require.Len(t, f.createdJobs(), 1)
}

// C3 with C1: consent comes first; a source without consent and without a
// required key reports NotOptedIn (and revokes), not CredentialsIncomplete.
func TestSyncC3AfterConsent(t *testing.T) {
	f := newFixture(t, withConsent)
	c1 := newCluster("c1")
	id := newIdentity(identityName, allowList(testNS))
	id.Spec.RequiredKeys = []string{"SECRET_KEY"}
	f.seed(newSource(sourceData()), id, c1, newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	requireCondition(t, f.lastStatus(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonNotOptedIn)
	require.Contains(t, f.writes(), "delete secrets "+testNS+"/"+mirrorName)
}

// C5: every Job the manager creates carries captf.io/source-hash (the hash
// of the mirror it starts with) and captf.io/identity (the identity whose
// mirror it uses): apply Jobs of each kind, also for an identity inherited
// from the cluster's defaults, and destroy Jobs.
func TestSyncC5JobsCarrySourceHashAndIdentity(t *testing.T) {
	hash := credentials.SourceHash(sourceData())
	t.Run("C5 apply Job of each kind", func(t *testing.T) {
		for _, kind := range []string{v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool} {
			t.Run(kind, func(t *testing.T) {
				f := newFixture(t)
				f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), workloadOf(kind, "obj").(runtime.Object))

				require.NoError(t, f.sync(kind, "obj"))

				js := f.createdJobs()
				require.Len(t, js, 1)
				m := f.storedSecret(testNS, mirrorName)
				require.Equal(t, m.Annotations[v1alpha1.AnnotationSourceHash], js[0].Annotations[v1alpha1.AnnotationSourceHash])
				require.Equal(t, hash, js[0].Annotations[v1alpha1.AnnotationSourceHash])
				require.Equal(t, identityName, js[0].Annotations[v1alpha1.AnnotationIdentity])
			})
		}
	})
	t.Run("C5 apply Job of a machine using its cluster's defaults", func(t *testing.T) {
		f := newFixture(t)
		cluster := newCluster("c1", func(c *v1alpha1.TerraformCluster) {
			c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: idRef("machines")}
			c.Spec.Source.Image = ""
		})
		machine := newMachine("m1", func(m *v1alpha1.TerraformMachine) { m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"} })
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), newIdentity("machines", allowList(testNS)), cluster, machine)

		require.NoError(t, f.sync(v1alpha1.KindTerraformMachine, "m1"))

		js := f.createdJobs()
		require.Len(t, js, 1)
		require.Equal(t, "machines", js[0].Annotations[v1alpha1.AnnotationIdentity])
		require.Equal(t, f.storedSecret(testNS, credentials.MirrorName("machines")).Annotations[v1alpha1.AnnotationSourceHash], js[0].Annotations[v1alpha1.AnnotationSourceHash])
	})
	t.Run("C5 destroy Job", func(t *testing.T) {
		f := newFixture(t)
		old := oldData(f)
		c1 := newCluster("c1", deleting)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)),
			jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(old)))

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		js := f.createdJobs()
		require.Len(t, js, 1)
		require.Equal(t, "destroy", js[0].Annotations[v1alpha1.AnnotationJobAction])
		require.Equal(t, hash, js[0].Annotations[v1alpha1.AnnotationSourceHash], "the hash of the mirror made current just before (M6)")
		require.Equal(t, hash, f.storedSecret(testNS, mirrorName).Annotations[v1alpha1.AnnotationSourceHash])
		require.Equal(t, identityName, js[0].Annotations[v1alpha1.AnnotationIdentity])
	})
}

// reapplyCluster is c1 at generation 1 with spec.jobs.reapplyOnRotation
// and the finalizer (it has applied).
func reapplyCluster(reapply bool, mods ...any) *v1alpha1.TerraformCluster {
	return newCluster("c1", append([]any{withFinalizer, func(c *v1alpha1.TerraformCluster) { c.Spec.Jobs.ReapplyOnRotation = reapply }}, mods...)...)
}

// C6: after the generation's apply Job finished with hash A and the source
// rotated to B, an object with spec.jobs.reapplyOnRotation gets exactly one
// new apply Job, named by jobs.ReapplyName, that records hash B; further
// passes (while it runs, and after it succeeded) create nothing more.
func TestSyncC6ReapplyOnRotation(t *testing.T) {
	for _, outcome := range []jobOutcome{jobSucceeded, jobFailed} {
		name := map[jobOutcome]string{jobSucceeded: "C6 after a Complete apply Job", jobFailed: "C6 after a Failed apply Job"}[outcome]
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.stampJobCreation()
			old := oldData(f)
			hashA, hashB := credentials.SourceHash(old), credentials.SourceHash(sourceData())
			c1 := reapplyCluster(true)
			first := jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, outcome, hashA)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
				newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)), first)

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			wantName := jobs.ReapplyName(v1alpha1.KindTerraformCluster, "c1", c1.UID, 1, 1)
			require.Equal(t, []string{
				"patch secrets " + testNS + "/" + mirrorName,
				"create serviceaccounts " + testNS + "/" + v1alpha1.RunnerName, // T1
				"create rolebindings " + testNS + "/" + v1alpha1.RunnerName,
				"create jobs " + testNS + "/" + wantName,
				"update terraformclusters/status " + testNS + "/c1",
			}, f.writes(), "the mirror is made current, then exactly one re-apply Job")
			j := f.createdJobs()[0]
			require.Equal(t, hashB, j.Annotations[v1alpha1.AnnotationSourceHash])
			require.Equal(t, identityName, j.Annotations[v1alpha1.AnnotationIdentity])
			require.Equal(t, "apply", j.Annotations[v1alpha1.AnnotationJobAction])
			require.Equal(t, "1", j.Annotations[v1alpha1.AnnotationJobGeneration])
			st := f.lastStatus()
			require.Equal(t, &v1alpha1.JobReference{Name: wantName, Action: v1alpha1.JobActionApply, Generation: 1}, st.LastJob)
			requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
			f.catchUp()

			// A second pass, the re-apply Job running: nothing.
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Empty(t, f.writes())
			f.catchUp()

			// The re-apply Job succeeded: it carries hash B, nothing more.
			f.Clock.Step(time.Minute)
			f.finishJob(wantName, jobSucceeded)
			f.catchUp()
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Empty(t, f.createdJobs(), "one re-apply per rotation")
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
			f.catchUp()
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Empty(t, f.writes())
		})
	}
}

// C6: a second rotation after a re-apply gets the next re-apply Job.
func TestSyncC6SecondRotation(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	old := oldData(f)
	mid := map[string][]byte{"API_KEY": []byte("m1d-VALUE-x1"), "REGION": []byte("eu-west-1")}
	f.Secrets = append(f.Secrets, "m1d-VALUE-x1", credentials.SourceHash(mid))
	c1 := reapplyCluster(true)
	r1 := jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(mid))
	r1.Name = jobs.ReapplyName(v1alpha1.KindTerraformCluster, "c1", c1.UID, 1, 1)
	r1.Annotations[v1alpha1.AnnotationJobReapply] = "1"
	r1.CreationTimestamp = metav1.NewTime(epoch.Add(-time.Minute))
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, mid, refOf(v1alpha1.KindTerraformCluster, c1)),
		jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(old)), r1)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	js := f.createdJobs()
	require.Len(t, js, 1, "%v", f.writes())
	require.Equal(t, jobs.ReapplyName(v1alpha1.KindTerraformCluster, "c1", c1.UID, 1, 2), js[0].Name)
	require.Equal(t, credentials.SourceHash(sourceData()), js[0].Annotations[v1alpha1.AnnotationSourceHash])
}

// C6: the re-apply Job's number must not collide with a Job that exists.
// When the generation's first apply Job is gone (deleted by hand after
// the re-apply that followed it), the next rotation must still start a
// new apply Job with the new hash.
func TestSyncC6ReapplyAfterFirstJobDeleted(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	mid := map[string][]byte{"API_KEY": []byte("m1d-VALUE-x1"), "REGION": []byte("eu-west-1")}
	f.Secrets = append(f.Secrets, "m1d-VALUE-x1", credentials.SourceHash(mid))
	c1 := reapplyCluster(true)
	r1 := jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(mid))
	r1.Name = jobs.ReapplyName(v1alpha1.KindTerraformCluster, "c1", c1.UID, 1, 1)
	r1.Annotations[v1alpha1.AnnotationJobReapply] = "1"
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, mid, refOf(v1alpha1.KindTerraformCluster, c1)), r1)

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	js := f.createdJobs()
	require.Len(t, js, 1, "%v", f.writes())
	require.NotEqual(t, r1.Name, js[0].Name)
	f.catchUp()
	var withNewHash []string
	for _, o := range f.inf.Jobs.Informer().GetIndexer().List() {
		if j := o.(*batchv1.Job); jobs.SourceHashOf(j) == credentials.SourceHash(sourceData()) {
			withNewHash = append(withNewHash, j.Name)
		}
	}
	require.Len(t, withNewHash, 1, "a Job with the new hash exists")
}

// C6: no re-apply Job while the generation's apply Job still runs (also
// when its outcome is decided but its pod has not ended); the re-apply
// comes once it has finished.
func TestSyncC6NoReapplyWhileRunning(t *testing.T) {
	tests := []struct {
		name string
		job  func(c *v1alpha1.TerraformCluster, hash string) *batchv1.Job
	}{{
		name: "C6 apply Job running",
		job: func(c *v1alpha1.TerraformCluster, hash string) *batchv1.Job {
			return jobWithHash(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobRunning, hash)
		},
	}, {
		name: "C6 apply Job decided (FailureTarget) but not Finished",
		job: func(c *v1alpha1.TerraformCluster, hash string) *batchv1.Job {
			j := jobWithHash(v1alpha1.KindTerraformCluster, c, v1alpha1.JobActionApply, 1, jobFailed, hash)
			j.Status.Conditions = j.Status.Conditions[:1]
			return j
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.stampJobCreation()
			old := oldData(f)
			c1 := reapplyCluster(true)
			j := tc.job(c1, credentials.SourceHash(old))
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
				newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)), j)

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

			require.Empty(t, f.createdJobs(), "R3, C6: the running Job keeps its credentials; no second Job")
			require.Contains(t, f.writes(), "patch secrets "+testNS+"/"+mirrorName, "the mirror still follows the source")
			f.catchUp()

			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Empty(t, f.createdJobs())
			f.catchUp()

			// It ends: the re-apply Job follows.
			f.finishJob(j.Name, jobSucceeded)
			f.catchUp()
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			require.Equal(t, []string{jobs.ReapplyName(v1alpha1.KindTerraformCluster, "c1", c1.UID, 1, 1)}, f.createdJobNames())
		})
	}
}

// C6: without spec.jobs.reapplyOnRotation a rotation starts no Job (R3);
// with it, an unchanged hash starts none either.
func TestSyncC6NoReapply(t *testing.T) {
	t.Run("C6 reapplyOnRotation=false", func(t *testing.T) {
		f := newFixture(t)
		old := oldData(f)
		c1 := reapplyCluster(false)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)),
			jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(old)))

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Contains(t, f.writes(), "patch secrets "+testNS+"/"+mirrorName)
		require.Empty(t, f.createdJobs())
	})
	t.Run("C6 reapplyOnRotation=true, hash unchanged", func(t *testing.T) {
		f := newFixture(t)
		c1 := reapplyCluster(true)
		f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
			newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
			jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(sourceData())))

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Empty(t, f.createdJobs())
		require.Equal(t, []string{"update terraformclusters/status " + testNS + "/c1"}, f.writes())
	})
	t.Run("C6 reapplyOnRotation=true, credentials not usable (C3)", func(t *testing.T) {
		f := newFixture(t)
		old := oldData(f)
		c1 := reapplyCluster(true)
		id := newIdentity(identityName, allowList(testNS))
		id.Spec.RequiredKeys = []string{"SECRET_KEY"}
		f.seed(newSource(sourceData()), id, c1,
			newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)),
			jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(old)))

		require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

		require.Empty(t, f.createdJobs())
		f.requireNoMirrorWrite()
	})
}

// C6: a deleting object never gets a re-apply Job: it gets the destroy
// flow (J8), whose Job records the new hash.
func TestSyncC6DeletingGetsDestroyNotReapply(t *testing.T) {
	f := newFixture(t)
	f.stampJobCreation()
	old := oldData(f)
	c1 := reapplyCluster(true, deleting)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, old, refOf(v1alpha1.KindTerraformCluster, c1)),
		jobWithHash(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded, credentials.SourceHash(old)))

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	destroy := jobs.Name(v1alpha1.KindTerraformCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1)
	require.Equal(t, []string{destroy}, f.createdJobNames())
	require.Equal(t, credentials.SourceHash(sourceData()), f.createdJobs()[0].Annotations[v1alpha1.AnnotationSourceHash])
	f.catchUp()

	// The destroy Job runs: still no re-apply.
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	require.Empty(t, f.createdJobs())
}
