package identity

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// B2: a Secret that looks like a mirror but has no owner reference to a
// live user of the identity is listed in status.namespaces (S2, A4) but
// never counts in status.mirrors or status.rotation: a forged stale copy
// cannot hold MirrorsCurrent or RotationComplete False.
func TestSyncForgedMirrorsDoNotCount(t *testing.T) {
	stale := map[string][]byte{"API_KEY": []byte("forged")}
	ownerless := newMirror(identityName, "ns-forged", stale)
	ownerless.OwnerReferences = nil
	wrongUID := newMirror(identityName, "ns-wronguid", stale)
	otherIdentityUser := newMirror(identityName, "ns-otheruser", stale)
	notAWorkload := newMirror(identityName, "ns-configmap", stale)
	notAWorkload.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "c-ns-configmap", UID: "uid-cm"}}

	f := newFixture(t, Options{Resync: resync})
	f.seed(newIdentity(identityName, allowAll()), newSource(sourceData()),
		newMirror(identityName, "ns-real", sourceData()),
		// The cluster these name exists with another UID, or uses another identity.
		&v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-wronguid", Name: "c-ns-wronguid", UID: "uid-new"},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identityName}}},
		&v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-otheruser", Name: "c-ns-otheruser", UID: "uid-c-ns-otheruser"},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "other"}}},
		ownerless, wrongUID, otherIdentityUser, notAWorkload,
	)

	require.NoError(t, f.sync(identityName))

	st := f.lastStatus()
	require.Equal(t, []string{"ns-configmap", "ns-forged", "ns-otheruser", "ns-real", "ns-wronguid"}, st.Namespaces, "S2/A4: look-alikes are listed")
	require.Equal(t, &v1alpha1.MirrorCounts{Total: 1, Current: 1}, st.Mirrors, "B2: only the real mirror counts")
	require.Equal(t, &v1alpha1.RotationStatus{MirrorsCurrent: 1}, st.Rotation)
	requireCondition(t, st, v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)
	requireCondition(t, st, v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)
	require.Empty(t, f.enqueuedOwners(), "nothing to rewrite for a look-alike")
	require.Empty(t, f.deletes(), "look-alikes in allowed namespaces are left alone")
}

// B2: a Job counts for C5 only when a live user of the identity in an
// allowed namespace controls it. A tenant's own suspended Job with the
// managed label and the identity and source-hash annotations does not.
func TestSyncForgedJobsDoNotCount(t *testing.T) {
	const oldHash = "0000000000000000000000000000000000000000000000000000000000000000"
	allowed := &v1alpha1.AllowedNamespaces{List: []string{"ns-a", "ns-b"}}

	forged := newIdentityJob("ns-a", "x", identityName, oldHash, "")
	forged.OwnerReferences = nil
	forged.Spec.Suspend = ptr.To(true)
	wrongOwner := newIdentityJob("ns-a", "ghost", identityName, oldHash, "")
	wrongOwner.OwnerReferences[0].UID = "uid-not-the-cluster"
	otherIdentity := newIdentityJob("ns-b", "c-other", identityName, oldHash, "")
	disallowed := newIdentityJob("ns-z", "c-z", identityName, oldHash, "")
	real := newIdentityJob("ns-a", "c-real", identityName, oldHash, "")

	for _, tc := range []struct {
		name string
		jobs []*batchv1.Job
		want int32
	}{
		{"forged, no controller", []*batchv1.Job{forged}, 0},
		{"controller reference to another UID", []*batchv1.Job{wrongOwner}, 0},
		{"controller uses another identity", []*batchv1.Job{otherIdentity}, 0},
		{"controller in a namespace the identity does not allow", []*batchv1.Job{disallowed}, 0},
		{"a live user's Job still counts (C5)", []*batchv1.Job{forged, real}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Resync: resync})
			f.seed(newIdentity(identityName, allowed), newSource(sourceData()),
				&v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-a", Name: "ghost", UID: "uid-ghost"},
					Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identityName}}},
				&v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns-b", Name: "c-other", UID: "uid-c-other"},
					Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "other"}}},
			)
			for _, j := range tc.jobs {
				f.seed(j)
			}

			require.NoError(t, f.sync(identityName))

			st := f.lastStatus()
			require.Equal(t, tc.want, st.Rotation.JobsOnPreviousCredentials)
			if tc.want == 0 {
				requireCondition(t, st, v1alpha1.ConditionRotationComplete, metav1.ConditionTrue, v1alpha1.ReasonRotationComplete)
			} else {
				requireCondition(t, st, v1alpha1.ConditionRotationComplete, metav1.ConditionFalse, v1alpha1.ReasonJobsOnPreviousCredentials)
			}
		})
	}
}

// B8: revocation never waits on the source. With the source unreadable,
// mirrors in namespaces the identity no longer allows are still deleted
// (V5), and the pass reports the read error so it is retried.
func TestSyncRevokesWhenSourceUnreadable(t *testing.T) {
	f := newFixture(t, Options{Resync: resync})
	revoked := newMirror(identityName, "ns-unlisted", sourceData())
	f.seed(newIdentity(identityName, &v1alpha1.AllowedNamespaces{List: []string{"ns-listed"}}), newSource(sourceData()),
		newMirror(identityName, "ns-listed", sourceData()), revoked)
	f.Kube.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() == sourceName {
			return true, nil, apierrors.NewInternalError(errors.New("etcd unavailable"))
		}
		return false, nil, nil
	})

	err := f.sync(identityName)
	require.Error(t, err)
	require.Contains(t, err.Error(), "reading source Secret")
	require.Equal(t, map[string]types.UID{"ns-unlisted/" + mirrorName: revoked.UID}, f.deletes())
	require.NotNil(t, f.storedSecret("ns-listed", mirrorName), "an allowed namespace keeps its mirror")

	// S2 follows the revocation although the source is still unreadable.
	f.catchUp()
	stored, err := f.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, identityName, metav1.GetOptions{})
	require.NoError(t, err)
	stored.Status.Namespaces = []string{"ns-listed", "ns-unlisted"}
	require.NoError(t, f.Captf.Tracker().Update(identityGR, stored, ""))
	f.CatchUp(t)
	require.Error(t, f.sync(identityName))
	require.Equal(t, []string{"ns-listed"}, f.lastStatus().Namespaces)
}
