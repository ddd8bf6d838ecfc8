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

// B1: the cache holds no mirror data, so a mirror is rewritten only from an
// uncached read of it, and the cache's bookkeeping never reaches the API
// server.
func TestSyncRewritesMirrorFromUncachedRead(t *testing.T) {
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

	require.Equal(t, []string{"get secrets " + sourceNS + "/" + sourceName, "get secrets " + testNS + "/" + mirrorName}, f.readsOf("secrets"),
		"the source, then the mirror before its rewrite")
	a, ok := f.find("update", "secrets", "")
	require.True(t, ok)
	m := a.obj.(*corev1.Secret)
	require.Equal(t, rotated, m.Data)
	require.NotContains(t, m.Annotations, credentials.CachedDataHashAnnotation)
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
			f.prependKubeReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
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
