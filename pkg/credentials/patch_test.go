package credentials

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// applyPatch applies a strategic merge patch to stored as the API server
// does (the same library), and returns the result.
func applyPatch(t *testing.T, stored *corev1.Secret, patch []byte) *corev1.Secret {
	t.Helper()
	old, err := json.Marshal(stored)
	require.NoError(t, err)
	merged, err := strategicpatch.StrategicMergePatch(old, patch, &corev1.Secret{})
	require.NoError(t, err)
	out := &corev1.Secret{}
	require.NoError(t, json.Unmarshal(merged, out))
	return out
}

// TestMirrorPatch: the update P3 sends, applied to the stored Secret as the
// API server applies it, gives the desired mirror while keeping what others
// set, whether it was planned from a full read or from a trimmed cache copy
// that dropped others' labels and annotations (B1, B12).
func TestMirrorPatch(t *testing.T) {
	a, b, c := planRef("a", "uid-a"), planRef("b", "uid-b"), planRef("c", "uid-c")
	tenant := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "theirs", UID: "uid-deploy"}
	stored := func(data map[string][]byte, refs ...metav1.OwnerReference) *corev1.Secret {
		s := DesiredMirror("prod", "ns", data)
		s.UID, s.ResourceVersion = "uid-mirror", "7"
		s.Labels["tenant"] = "kept"
		s.Annotations["tenant.example.com/note"] = "kept"
		s.OwnerReferences = refs
		return s
	}
	cacheCopy := func(s *corev1.Secret) *corev1.Secret {
		out, err := TrimSecretForCache(s.DeepCopy())
		require.NoError(t, err)
		c := out.(*corev1.Secret)
		// What B12 may drop: labels and annotations the manager does not read.
		delete(c.Labels, "tenant")
		delete(c.Annotations, "tenant.example.com/note")
		return c
	}
	v0 := map[string][]byte{"KEY": []byte("v0"), "DROPPED": []byte("old")}
	v1 := map[string][]byte{"KEY": []byte("v1"), "NEW": []byte("n")}
	for _, tc := range []struct {
		name     string
		stored   *corev1.Secret
		data     map[string][]byte
		users    []metav1.OwnerReference
		wantRefs []metav1.OwnerReference
		wantData map[string][]byte
		sendsData,
		sendsRefs bool
	}{
		{name: "M6 rotation: data replaced whole, a dropped key goes", stored: stored(v0, a, tenant), data: v1, users: []metav1.OwnerReference{a},
			wantRefs: []metav1.OwnerReference{a, tenant}, wantData: v1, sendsData: true},
		{name: "M5 a user added: the list replaced, others kept", stored: stored(v1, a, tenant), data: v1, users: []metav1.OwnerReference{a, b, c},
			wantRefs: []metav1.OwnerReference{a, tenant, b, c}, wantData: v1, sendsRefs: true},
		{name: "M5 an older UID replaced in place", stored: stored(v1, planRef("a", "uid-a-old"), b), data: v1, users: []metav1.OwnerReference{a, b},
			wantRefs: []metav1.OwnerReference{a, b}, wantData: v1, sendsRefs: true},
		{name: "M6 stored without data: the data is set", stored: stored(nil, a), data: v1, users: []metav1.OwnerReference{a},
			wantRefs: []metav1.OwnerReference{a}, wantData: v1, sendsData: true},
		{name: "M6 source emptied: the data goes", stored: stored(v0, a), data: nil, users: []metav1.OwnerReference{a},
			wantRefs: []metav1.OwnerReference{a}, wantData: nil, sendsData: true},
		{name: "M6 stored without owners: the users are set", stored: stored(v0), data: v1, users: []metav1.OwnerReference{a, b},
			wantRefs: []metav1.OwnerReference{a, b}, wantData: v1, sendsData: true, sendsRefs: true},
	} {
		for _, from := range []string{"full read", "cache copy"} {
			t.Run(tc.name+"/"+from, func(t *testing.T) {
				existing := tc.stored.DeepCopy()
				if from == "cache copy" {
					existing = cacheCopy(existing)
				}
				desired := DesiredMirror("prod", "ns", tc.data)
				plan := PlanMirror(existing, desired, tc.users)
				require.Equal(t, MirrorUpdate, plan.Action)
				require.NotNil(t, plan.Patch)
				patch := string(plan.Patch)
				require.Contains(t, patch, `"resourceVersion":"7"`, "P3: preconditioned on the planned-from version")
				require.NotContains(t, patch, CachedDataHashAnnotation, "B1: the cache's bookkeeping is never written")
				require.NotContains(t, patch, "tenant", "nothing but the manager's own fields is sent")
				require.Equal(t, tc.sendsData, containsKey(t, plan.Patch, "data"))
				require.Equal(t, tc.sendsRefs, containsKey(t, plan.Patch, "metadata", "ownerReferences"))

				got := applyPatch(t, tc.stored, plan.Patch)
				require.Equal(t, tc.wantRefs, got.OwnerReferences)
				if len(tc.wantData) == 0 {
					require.Empty(t, got.Data)
				} else {
					require.Equal(t, tc.wantData, got.Data)
				}
				require.Equal(t, "kept", got.Labels["tenant"])
				require.Equal(t, "kept", got.Annotations["tenant.example.com/note"])
				require.Equal(t, SourceHash(tc.data), got.Annotations[v1alpha1.AnnotationSourceHash])
				require.Equal(t, "prod", got.Annotations[v1alpha1.AnnotationIdentity])
				require.Equal(t, v1alpha1.LabelTrue, got.Labels[v1alpha1.LabelMirrored])
				require.Equal(t, v1alpha1.LabelTrue, got.Labels[v1alpha1.LabelManaged])
				require.Equal(t, corev1.SecretTypeOpaque, got.Type)
				require.Equal(t, "7", got.ResourceVersion, "the precondition the API server compares")
				require.Equal(t, CompareMirror(got, desired), MirrorDiff{}, "the result is current")
			})
		}
	}
}

// TestMirrorPatchNeedsAVersion: a write is never sent without a
// precondition (SPEC P3): no resourceVersion, no patch.
func TestMirrorPatchNeedsAVersion(t *testing.T) {
	existing := DesiredMirror("prod", "ns", map[string][]byte{"KEY": []byte("v0")})
	plan := PlanMirror(existing, DesiredMirror("prod", "ns", map[string][]byte{"KEY": []byte("v1")}), nil)
	require.Equal(t, MirrorUpdate, plan.Action)
	require.Nil(t, plan.Patch)
	_, err := OwnersPatch("", nil)
	require.ErrorIs(t, err, ErrNoResourceVersion)
}

// TestOwnersPatch: a release sets exactly the remaining references, on the
// version they were computed from (SPEC V3, V4, P3).
func TestOwnersPatch(t *testing.T) {
	a, b := planRef("a", "uid-a"), planRef("b", "uid-b")
	s := DesiredMirror("prod", "ns", map[string][]byte{"KEY": []byte("v")})
	s.ResourceVersion = "9"
	s.OwnerReferences = []metav1.OwnerReference{a, b}
	refs, changed := RemoveOwnerReference(s.OwnerReferences, "uid-a")
	require.True(t, changed)
	p, err := OwnersPatch(s.ResourceVersion, refs)
	require.NoError(t, err)
	got := applyPatch(t, s, p)
	require.Equal(t, []metav1.OwnerReference{b}, got.OwnerReferences)
	require.Equal(t, s.Data, got.Data)
	require.Equal(t, "9", got.ResourceVersion)
}

// containsKey reports whether the JSON object doc has the nested key path.
func containsKey(t *testing.T, doc []byte, path ...string) bool {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(doc, &m))
	for i, k := range path {
		v, ok := m[k]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if m, ok = v.(map[string]any); !ok {
			return false
		}
	}
	return true
}
