package credentials

import (
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// OwnerReference returns the reference a workload object puts on the mirror
// it uses (SPEC M5): not a controller reference, because several objects
// share one mirror, and blockOwnerDeletion unset (absent, not false, SPEC J3)
// so deleting an owner never waits on the mirror and the manager needs no
// permission to set finalizers on its owners.
func OwnerReference(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: apiVersion,
		Kind:       kind,
		Name:       name,
		UID:        uid,
	}
}

// EnsureOwnerReference returns refs with ref present (SPEC M5):
//
//   - a reference with ref's UID already present (whatever its apiVersion)
//     changes nothing;
//   - else a reference with the same API group, kind and name but another
//     UID, left by a deleted object of the same name, is replaced in place
//     at the same index (replaced is true); only the first such reference
//     is replaced, and the garbage collector drops any further dangling one;
//   - else ref is appended.
//
// The API group is compared, not the version, so a reference written at an
// older version of the API is still recognised. Other references are left
// alone, and refs is never mutated: a changed result is a new slice.
func EnsureOwnerReference(refs []metav1.OwnerReference, ref metav1.OwnerReference) (out []metav1.OwnerReference, changed bool, replaced bool) {
	if HasOwnerReference(refs, ref.UID) {
		return refs, false, false
	}
	group := apiGroup(ref.APIVersion)
	for i, r := range refs {
		if r.Kind == ref.Kind && r.Name == ref.Name && apiGroup(r.APIVersion) == group {
			out = slices.Clone(refs)
			out[i] = ref
			return out, true, true
		}
	}
	// Clip forces append to allocate, so refs' backing array is never written.
	return append(slices.Clip(refs), ref), true, false
}

// RemoveOwnerReference returns refs without any reference to uid, used when
// an object stops using a mirror (SPEC V3, V4). refs is never mutated.
func RemoveOwnerReference(refs []metav1.OwnerReference, uid types.UID) (out []metav1.OwnerReference, changed bool) {
	if !HasOwnerReference(refs, uid) {
		return refs, false
	}
	out = slices.DeleteFunc(slices.Clone(refs), func(r metav1.OwnerReference) bool { return r.UID == uid })
	return out, true
}

// HasOwnerReference reports whether refs holds a reference to uid (SPEC M5).
func HasOwnerReference(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

// apiGroup returns the group of an apiVersion ("group/version"); the core
// group, written "v1", is "".
func apiGroup(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}
