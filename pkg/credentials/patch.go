package credentials

import (
	"encoding/json"
	"errors"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The strategic merge patch directive that makes a map or a list replace
// the stored one instead of merging into it.
const (
	patchDirective = "$patch"
	patchReplace   = "replace"
)

// ErrNoResourceVersion: a mirror write is always preconditioned on the
// version it was planned from (SPEC P3), and this one has none. The caller
// reads the mirror uncached and plans again.
var ErrNoResourceVersion = errors.New("the mirror has no resourceVersion to precondition a write on")

// MirrorPatch is the write of a [MirrorUpdate] plan (SPEC P3): a strategic
// merge patch of the fields the manager owns, preconditioned on
// existing's resourceVersion, so the API server refuses it with a Conflict
// when the Secret changed since the version it was planned from. Nothing
// else is sent, so labels and annotations set by others are kept even when
// existing is a cache copy that dropped them (SPEC B1, B12):
//
//   - metadata.resourceVersion: the precondition;
//   - type Opaque: a no-op on a mirror, and an immutable-field refusal on
//     any other Secret, so even a wrong plan cannot turn a typed Secret
//     into a mirror (M7);
//   - the labels and annotations of M3, key by key;
//   - data, replaced whole when it differs (a key the source dropped goes
//     too); the "$patch: replace" directive is sent only when existing has
//     data, because over absent data the directive would drop the field;
//   - ownerReferences, replaced whole when they differ (M5): the list
//     was computed from existing's, and the precondition makes sure it is
//     still the stored list, so a reference added meanwhile is never lost.
//
// existing is the Secret plan was made from (a trimmed cache copy or an
// uncached read), desired from [DesiredMirror]; plan.Secret holds the
// owner references to write.
func MirrorPatch(existing, desired *corev1.Secret, plan MirrorPlan) ([]byte, error) {
	if existing.ResourceVersion == "" {
		return nil, ErrNoResourceVersion
	}
	meta := map[string]any{
		"resourceVersion": existing.ResourceVersion,
		"labels":          maps.Clone(desired.Labels),
		"annotations":     maps.Clone(desired.Annotations),
	}
	if plan.OwnersAdded > 0 || len(plan.Repaired) > 0 {
		meta["ownerReferences"] = replaceList(plan.Secret.OwnerReferences)
	}
	p := map[string]any{
		"metadata": meta,
		"type":     corev1.SecretTypeOpaque,
	}
	if plan.Diff.Data {
		p["data"] = patchData(hasData(existing), desired.Data)
	}
	return json.Marshal(p)
}

// OwnersPatch is the write that sets a mirror's owner references to refs
// (SPEC V3, V4: an owner released), preconditioned on resourceVersion rv,
// the version refs were computed from (SPEC P3).
func OwnersPatch(rv string, refs []metav1.OwnerReference) ([]byte, error) {
	if rv == "" {
		return nil, ErrNoResourceVersion
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": rv,
			"ownerReferences": replaceList(refs),
		},
	})
}

// replaceList is refs as a strategic merge patch list that replaces the
// stored one (ownerReferences otherwise merge by UID).
func replaceList(refs []metav1.OwnerReference) []any {
	out := make([]any, 0, len(refs)+1)
	out = append(out, map[string]string{patchDirective: patchReplace})
	for _, r := range refs {
		out = append(out, r)
	}
	return out
}

// patchData is data as a strategic merge patch value that replaces the
// stored data: null when data is empty (the field goes), the plain map
// when nothing is stored (nothing to remove; see [MirrorPatch] for why
// not the directive), the map with "$patch: replace" otherwise. Secret
// data keys cannot contain "$", so the directive never meets a key.
func patchData(stored bool, data map[string][]byte) any {
	if len(data) == 0 {
		return nil
	}
	out := make(map[string]any, len(data)+1)
	for k, v := range data {
		out[k] = v // []byte marshals as base64, as Secret data does
	}
	if stored {
		out[patchDirective] = patchReplace
	}
	return out
}

// hasData reports whether s, a trimmed cache copy (by its data hash) or a
// full read, holds any data.
func hasData(s *corev1.Secret) bool {
	if hash, ok := cachedDataHash(s); ok {
		return hash != emptyDataHash
	}
	return len(s.Data) > 0
}

// emptyDataHash is the hash of no data (SPEC M4).
var emptyDataHash = SourceHash(nil)
