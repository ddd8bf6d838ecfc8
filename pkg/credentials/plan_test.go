package credentials

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func planRef(name string, uid types.UID) metav1.OwnerReference {
	return OwnerReference(v1alpha1.SchemeGroupVersion.String(), v1alpha1.KindTerraformCluster, name, uid)
}

// TestPlanMirror is the M2-M7 decision table, with trimmed cache copies (B1).
func TestPlanMirror(t *testing.T) {
	data := map[string][]byte{"KEY": []byte("v1")}
	desired := DesiredMirror("prod", "ns", data)
	a, b := planRef("a", "uid-a"), planRef("b", "uid-b")
	withRefs := func(s *corev1.Secret, refs ...metav1.OwnerReference) *corev1.Secret {
		s = s.DeepCopy()
		s.OwnerReferences = refs
		s.ResourceVersion = "7"
		return s
	}
	trimmed := func(s *corev1.Secret) *corev1.Secret {
		out, err := TrimSecretForCache(s.DeepCopy())
		require.NoError(t, err)
		return out.(*corev1.Secret)
	}
	current := withRefs(desired, a, b)
	rotated := withRefs(DesiredMirror("prod", "ns", map[string][]byte{"KEY": []byte("v0")}), a, b)
	tampered := withRefs(desired, a, b)
	tampered.Data = map[string][]byte{"KEY": []byte("edited")}
	foreign := withRefs(desired, a)
	delete(foreign.Labels, v1alpha1.LabelMirrored)
	other := withRefs(DesiredMirror("other", "ns", data), a)
	other.Name = desired.Name
	deleting := withRefs(desired, a, b)
	deleting.DeletionTimestamp = &metav1.Time{}
	replaced := withRefs(desired, planRef("a", "uid-a-old"), b)

	for _, tc := range []struct {
		name     string
		existing *corev1.Secret
		users    []metav1.OwnerReference
		want     MirrorAction
		diff     string
		added    int
		repaired int
	}{
		{"M2/nothing holds the name: create with every user", nil, []metav1.OwnerReference{a, b}, MirrorCreate, "none", 2, 0},
		{"M6/current: nothing to write", current, []metav1.OwnerReference{a, b}, MirrorCurrent, "none", 0, 0},
		{"M6/current trimmed copy: nothing to write (B1)", trimmed(current), []metav1.OwnerReference{a, b}, MirrorCurrent, "none", 0, 0},
		{"M6/rotated source: update data and hash", rotated, []metav1.OwnerReference{a, b}, MirrorUpdate, "data, annotation captf.io/source-hash", 0, 0},
		{"M6/rotated, trimmed copy: update (B1 hash comparison)", trimmed(rotated), []metav1.OwnerReference{a, b}, MirrorUpdate, "data, annotation captf.io/source-hash", 0, 0},
		{"M6/data edited out of band, hash kept: update", tampered, []metav1.OwnerReference{a, b}, MirrorUpdate, "data", 0, 0},
		{"M6/data edited out of band, trimmed copy: update (B1)", trimmed(tampered), []metav1.OwnerReference{a, b}, MirrorUpdate, "data", 0, 0},
		{"M5/a user's reference missing: update", withRefs(desired, a), []metav1.OwnerReference{a, b}, MirrorUpdate, "none", 1, 0},
		{"M5/older UID replaced in place: update, repaired", replaced, []metav1.OwnerReference{a, b}, MirrorUpdate, "none", 0, 1},
		{"M5/other owners left alone: current", withRefs(desired, a, b, planRef("c", "uid-c")), []metav1.OwnerReference{a}, MirrorCurrent, "none", 0, 0},
		{"M7/without the mirrored label: foreign", foreign, []metav1.OwnerReference{a}, MirrorForeign, "none", 0, 0},
		{"M7/another identity's mirror: foreign", other, []metav1.OwnerReference{a}, MirrorForeign, "none", 0, 0},
		{"being deleted: wait", deleting, []metav1.OwnerReference{a}, MirrorDeleting, "none", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before *corev1.Secret
			if tc.existing != nil {
				before = tc.existing.DeepCopy()
			}
			p := PlanMirror(tc.existing, desired, tc.users)
			require.Equal(t, tc.want, p.Action, "action %s", p.Action)
			require.Equal(t, tc.diff, p.Diff.String())
			require.Equal(t, tc.added, p.OwnersAdded)
			require.Len(t, p.Repaired, tc.repaired)
			require.Equal(t, before, tc.existing, "inputs are never modified")
			switch tc.want {
			case MirrorCreate, MirrorUpdate:
				require.NotNil(t, p.Secret)
				require.Equal(t, data, p.Secret.Data)
				require.Equal(t, desired.Annotations[v1alpha1.AnnotationSourceHash], p.Secret.Annotations[v1alpha1.AnnotationSourceHash])
				require.NotContains(t, p.Secret.Annotations, CachedDataHashAnnotation, "cache bookkeeping is never written (B1)")
				for _, u := range tc.users {
					require.True(t, HasOwnerReference(p.Secret.OwnerReferences, u.UID), "every user's reference (M5)")
				}
				if tc.existing != nil {
					require.Equal(t, "7", p.Secret.ResourceVersion, "an update carries the version it was planned from")
				}
			default:
				require.Nil(t, p.Secret)
			}
			if tc.want == MirrorForeign {
				require.NotEmpty(t, p.Foreign)
			}
		})
	}
}

// TestTrimSecretForCache: no data survives, the hash does, and a stored
// value under the cache's own key cannot spoof it (B1).
func TestTrimSecretForCache(t *testing.T) {
	s := DesiredMirror("prod", "ns", map[string][]byte{"KEY": []byte("value")})
	s.Annotations[CachedDataHashAnnotation] = "spoofed"
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "x"}}
	out, err := TrimSecretForCache(s)
	require.NoError(t, err)
	got := out.(*corev1.Secret)
	require.Nil(t, got.Data)
	require.Nil(t, got.StringData)
	require.Nil(t, got.ManagedFields)
	hash, ok := cachedDataHash(got)
	require.True(t, ok)
	require.Equal(t, SourceHash(map[string][]byte{"KEY": []byte("value")}), hash)

	// A Secret stored with no data and a forged value under the key is
	// re-marked, not trusted.
	forged := DesiredMirror("prod", "ns", nil)
	forged.Annotations[CachedDataHashAnnotation] = SourceHash(map[string][]byte{"KEY": []byte("value")})
	out, err = TrimSecretForCache(forged)
	require.NoError(t, err)
	hash, ok = cachedDataHash(out.(*corev1.Secret))
	require.True(t, ok)
	require.Equal(t, SourceHash(nil), hash)
	require.Equal(t, s.Labels, got.Labels)

	again, err := TrimSecretForCache(got)
	require.NoError(t, err)
	require.Equal(t, got, again, "trimming twice changes nothing")

	other, err := TrimSecretForCache("not a secret")
	require.NoError(t, err)
	require.Equal(t, "not a secret", other)
}
