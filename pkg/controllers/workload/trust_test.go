package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// rotate makes the fake API server's source Secret carry a new value.
func (f *fixture) rotate() map[string][]byte {
	f.t.Helper()
	rotated := sourceData()
	rotated["API_KEY"] = []byte("r0tated-VALUE-x1")
	f.Secrets = append(f.Secrets, "r0tated-VALUE-x1", credentials.SourceHash(rotated))
	require.NoError(f.t, f.Kube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("secrets"), newSource(rotated), sourceNS))
	return rotated
}

// P3 (superseding B1's re-read): the cache holds no mirror data, but its
// metadata and resourceVersion are enough to rewrite the mirror with one
// request: a patch of the fields the manager owns, preconditioned on the
// cached version, without reading the mirror first. The cache's
// bookkeeping never reaches the API server.
func TestSyncRewritesMirrorWithOneRequest(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
		newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))
	cachedMirror, err := f.inf.Mirrors.Lister().Secrets(testNS).Get(mirrorName)
	require.NoError(t, err)
	require.Nil(t, cachedMirror.Data, "B1: the cache holds no data")
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
	f.catchUp()

	rotated := f.rotate()
	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Equal(t, []string{"get secrets " + sourceNS + "/" + sourceName}, f.readsOf("secrets"),
		"the source only: the mirror is not re-read before its rewrite")
	require.Equal(t, []string{"patch secrets " + testNS + "/" + mirrorName}, f.writes())
	m, patch, ok := f.patchedSecret()
	require.True(t, ok)
	require.Contains(t, patch, `"resourceVersion":"42"`, "preconditioned on the cached version")
	require.Equal(t, rotated, m.Data)
	require.NotContains(t, m.Annotations, credentials.CachedDataHashAnnotation)
	require.NotContains(t, patch, credentials.CachedDataHashAnnotation)
	require.Empty(t, f.statusWrites(), "still current: no status change")
}

// B8: a mirror write that fails is CredentialsMirrored=False/MirrorFailed,
// never "current", and the message names no value. A write the API server
// refuses for good (an immutable mirror) is retried at the sync period, not
// hot; a conflict that never ends is an error (backoff).
func TestSyncFailedMirrorWriteIsNeverCurrent(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"immutable mirror", apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Secret").GroupKind(), mirrorName,
			field.ErrorList{field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set")}), false},
		// Retried with backoff: a restarted API server answers 403 until
		// its authorizer is synced (fault 1).
		{"refused by admission", apierrors.NewForbidden(corev1.Resource("secrets"), mirrorName, errForTest("denied by policy")), true},
		{"conflicts exhausted", apierrors.NewConflict(corev1.Resource("secrets"), mirrorName, errForTest("changed")), true},
		{"server error", apierrors.NewInternalError(errForTest("etcd")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1,
				newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1)),
				newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))
			require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
			f.catchUp()
			f.PopEvents()

			f.rotate()
			updates := 0
			f.prependKubeReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				updates++
				return true, nil, tc.err
			})
			err := f.sync(v1alpha1.KindTerraformCluster, "c1")

			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err, "retried at the sync period, not hot")
				require.Equal(t, 1, updates)
			}
			require.LessOrEqual(t, updates, maxWriteAttempts)
			c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
			require.Contains(t, c.Message, mirrorName)
			require.NotContains(t, c.Message, "is current")
			require.Contains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventMirrorConflict)
		})
	}
}

type errForTest string

func (e errForTest) Error() string { return string(e) }

// P3, B1, M5, M7: a mirror changed between the manager's decision (made
// from the cache) and its write keeps that change: the preconditioned write
// is refused with a Conflict, the mirror is read uncached and planned
// again, and the second write carries both, or there is none when the
// Secret is no longer a mirror. Never a blind overwrite. The syncing
// object is a new user and the source rotated, so the write replaces the
// owner list and the data.
func TestSyncMirrorChangedBeforeTheWriteIsReplanned(t *testing.T) {
	other := refOf(v1alpha1.KindTerraformMachine, newMachine("m9"))
	for _, tc := range []struct {
		name string
		race func(*corev1.Secret)
		// kept checks that the race's change survived the write.
		kept func(*corev1.Secret) bool
		// foreign: the Secret is no longer a mirror after the race.
		foreign bool
	}{
		{name: "M5 another object's owner reference added",
			race: func(s *corev1.Secret) { s.OwnerReferences = append(s.OwnerReferences, other) },
			kept: func(s *corev1.Secret) bool { return credentials.HasOwnerReference(s.OwnerReferences, other.UID) }},
		{name: "an annotation a tenant may set",
			race: func(s *corev1.Secret) { s.Annotations["tenant.example.com/note"] = "kept" },
			kept: func(s *corev1.Secret) bool { return s.Annotations["tenant.example.com/note"] == "kept" }},
		{name: "M7 no longer a mirror", race: func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelMirrored) }, foreign: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			first := refOf(v1alpha1.KindTerraformCluster, newCluster("c0"))
			p1 := newPool("p1", func(p *v1alpha1.TerraformMachinePool) {
				p.Spec.IdentityRef = idRef(identityName)
				p.Spec.Source.Image = ""
			})
			f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), p1,
				newMirror(identityName, testNS, sourceData(), first))
			rotated := f.rotate()
			gvr := corev1.SchemeGroupVersion.WithResource("secrets")
			raced := false
			f.prependKubeReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if !raced {
					// Another writer gets in after the decision, before the
					// write. (The tracker directly: the fake clientset is
					// locked while a reactor runs.)
					raced = true
					obj, err := f.Kube.Tracker().Get(gvr, testNS, mirrorName)
					require.NoError(t, err)
					s := obj.(*corev1.Secret).DeepCopy()
					tc.race(s)
					s.ResourceVersion = "43"
					require.NoError(t, f.Kube.Tracker().Update(gvr, s, testNS))
				}
				return false, nil, nil
			})
			var want *corev1.Secret
			if tc.foreign {
				obj, err := f.Kube.Tracker().Get(gvr, testNS, mirrorName)
				require.NoError(t, err)
				want = obj.(*corev1.Secret).DeepCopy()
				tc.race(want)
				want.ResourceVersion = "43"
			}

			require.NoError(t, f.sync(v1alpha1.KindTerraformMachinePool, "p1"))

			var seq []string
			for _, a := range f.allActions() {
				if a.name == mirrorName {
					seq = append(seq, a.String())
				}
			}
			wantSeq := []string{
				"patch secrets " + testNS + "/" + mirrorName, // planned from the cache (42): Conflict
				"get secrets " + testNS + "/" + mirrorName,   // B1: re-read uncached
			}
			got := f.storedSecret(testNS, mirrorName)
			if tc.foreign {
				require.Equal(t, wantSeq, seq, "M7: no second write")
				require.Equal(t, want, got, "M7: not modified")
				requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
				return
			}
			require.Equal(t, append(wantSeq, "patch secrets "+testNS+"/"+mirrorName), seq, "planned again from 43")
			require.True(t, tc.kept(got), "the race's change is kept: %+v", got.ObjectMeta)
			require.Equal(t, rotated, got.Data)
			require.True(t, credentials.HasOwnerReference(got.OwnerReferences, first.UID))
			require.True(t, credentials.HasOwnerReference(got.OwnerReferences, p1.UID), "the new user is added")
			requireCondition(t, f.lastStatus(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
		})
	}
}

// P3, B12: the cache may keep only the labels and annotations the manager
// reads; a rewrite planned from such a copy sends only the manager's own
// fields, so the others stay on the API server.
func TestSyncMirrorRewriteKeepsWhatTheCacheDropped(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	m := newMirror(identityName, testNS, sourceData(), refOf(v1alpha1.KindTerraformCluster, c1))
	m.Labels["team"] = "a"
	m.Annotations["tenant.example.com/note"] = "kept"
	f.seed(newSource(sourceData()), newIdentity(identityName, allowList(testNS)), c1, m,
		newJob(v1alpha1.KindTerraformCluster, c1, v1alpha1.JobActionApply, 1, jobSucceeded))
	cached, err := f.inf.Mirrors.Lister().Secrets(testNS).Get(mirrorName)
	require.NoError(t, err)
	trimmed := cached.DeepCopy()
	delete(trimmed.Labels, "team")
	delete(trimmed.Annotations, "tenant.example.com/note")
	require.NoError(t, f.inf.Mirrors.Informer().GetIndexer().Update(trimmed))
	rotated := f.rotate()

	require.NoError(t, f.sync(v1alpha1.KindTerraformCluster, "c1"))

	require.Contains(t, f.writes(), "patch secrets "+testNS+"/"+mirrorName)
	require.NotContains(t, f.readsOf("secrets"), "get secrets "+testNS+"/"+mirrorName, "no read of the mirror")
	got := f.storedSecret(testNS, mirrorName)
	require.Equal(t, rotated, got.Data)
	require.Equal(t, "a", got.Labels["team"])
	require.Equal(t, "kept", got.Annotations["tenant.example.com/note"])
}
