package credentials

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// maxNameLength is the longest name a Secret may have (a DNS subdomain).
const maxNameLength = 253

// hashedNameHexChars is how many hex characters of SHA-256 a too-long
// mirror name keeps (SPEC M1): 64 bits, ample for the identities of one
// cluster, and short enough to read in kubectl output.
const hashedNameHexChars = 16

// MirrorName returns the name of the mirror Secret of identity (SPEC M1):
// "captf-creds-<identity>", or, when that would be longer than 253
// characters, "captf-creds-" followed by the first 16 lowercase hex
// characters of SHA-256 of the identity name. Every caller must use this
// function so that the name is computed in exactly one place.
func MirrorName(identity string) string {
	name := v1alpha1.MirrorNamePrefix + identity
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(identity))
	return v1alpha1.MirrorNamePrefix + hex.EncodeToString(sum[:])[:hashedNameHexChars]
}

// SourceHash returns the hash of a source Secret's data (SPEC M4): lowercase
// hex SHA-256 over the keys in sorted order, each key written as an 8-byte
// big-endian length and the key bytes, then an 8-byte big-endian length and
// the value bytes. The length prefixes make the encoding unambiguous, so
// {"a": "bc"} and {"ab": "c"} hash differently. Nil and empty data hash the
// same (the hash of no input), and so do a nil and an empty value.
func SourceHash(data map[string][]byte) string {
	h := sha256.New()
	var length [8]byte
	for _, k := range slices.Sorted(maps.Keys(data)) {
		binary.BigEndian.PutUint64(length[:], uint64(len(k)))
		h.Write(length[:])
		h.Write([]byte(k))
		v := data[k]
		binary.BigEndian.PutUint64(length[:], uint64(len(v)))
		h.Write(length[:])
		h.Write(v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DesiredMirror returns the mirror Secret of identity in namespace, built
// from the source Secret's data (SPEC M2, M3): named by [MirrorName], type
// Opaque, data a byte copy of sourceData (the caller may reuse or mutate the
// source afterwards), labels captf.io/mirrored=true and captf.io/managed=true,
// annotations captf.io/identity and captf.io/source-hash. The source's type,
// labels and annotations are deliberately not copied: source labels could
// make other controllers select the mirror, and a typed Secret (for example
// kubernetes.io/service-account-token) carries meaning and validation a copy
// must not inherit. Owner references are left to the caller (SPEC M5).
func DesiredMirror(identity, namespace string, sourceData map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      MirrorName(identity),
			Namespace: namespace,
			Labels: map[string]string{
				v1alpha1.LabelMirrored: v1alpha1.LabelTrue,
				v1alpha1.LabelManaged:  v1alpha1.LabelTrue,
			},
			Annotations: map[string]string{
				v1alpha1.AnnotationIdentity:   identity,
				v1alpha1.AnnotationSourceHash: SourceHash(sourceData),
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: copyData(sourceData),
	}
}

// IsForeign reports whether existing, a Secret that holds the mirror's name,
// must never be modified because it is not provably a mirror of identity
// (SPEC M7): it lacks the label captf.io/mirrored=true, or its
// captf.io/identity annotation is missing or names another identity.
//
// A Secret with the label but without the annotation counts as foreign: the
// manager always writes both together (SPEC M3), so such a Secret was made
// or edited by someone else, and overwriting it could destroy credentials
// that are not ours. A nil Secret (nothing holds the name) is not foreign.
func IsForeign(existing *corev1.Secret, identity string) bool {
	return ForeignReason(existing, identity) != ""
}

// ForeignReason says, for a message, why existing is not identity's mirror
// (see [IsForeign]), or "" when it is one. A Secret of another type than
// Opaque is foreign too: the manager only writes Opaque mirrors (SPEC M2),
// and a type cannot be changed by an update.
func ForeignReason(existing *corev1.Secret, identity string) string {
	if existing == nil {
		return ""
	}
	owner, annotated := existing.Annotations[v1alpha1.AnnotationIdentity]
	switch {
	case existing.Labels[v1alpha1.LabelMirrored] != v1alpha1.LabelTrue:
		return "exists without the label " + v1alpha1.LabelMirrored + "=true"
	case !annotated || owner == "":
		return "has no " + v1alpha1.AnnotationIdentity + " annotation"
	case identity == "" || owner != identity:
		// identity == "" never names a real identity, so nothing is its mirror.
		return "is the mirror of TerraformClusterIdentity " + owner
	case existing.Type != "" && existing.Type != corev1.SecretTypeOpaque:
		return "has type " + string(existing.Type) + ", not Opaque"
	}
	return ""
}

// MirrorDiff says which parts of an existing mirror differ from the desired
// one (SPEC M6), so that callers write only when something differs and can
// log what differed without logging any value (SPEC X1). Owner references
// are not compared here: see [EnsureOwnerReference].
type MirrorDiff struct {
	// Data is true when the data differs (byte-wise; nil and empty are equal).
	Data bool
	// SourceHash is true when the captf.io/source-hash annotation differs.
	SourceHash bool
	// Identity is true when the captf.io/identity annotation differs.
	Identity bool
	// LabelMirrored is true when the captf.io/mirrored label differs.
	LabelMirrored bool
	// LabelManaged is true when the captf.io/managed label differs.
	LabelManaged bool
	// Type is true when the Secret type differs. The API server rejects an
	// update of a Secret's type (it is immutable), so callers must delete
	// and recreate the mirror instead: see [MirrorDiff.NeedsRecreate].
	Type bool
}

// Any reports whether anything differs, that is whether a write is needed
// (SPEC M6: an unchanged pass makes no write).
func (d MirrorDiff) Any() bool {
	return d != MirrorDiff{}
}

// NeedsRecreate reports whether the difference cannot be fixed by an update:
// a Secret's type is immutable, so a mirror of the wrong type must be
// deleted and created again.
func (d MirrorDiff) NeedsRecreate() bool {
	return d.Type
}

// String lists the names of the fields that differ, comma-separated, or
// "none". It never contains a value, so it is safe to log (SPEC X1).
func (d MirrorDiff) String() string {
	var fields []string
	for _, f := range []struct {
		differs bool
		name    string
	}{
		{d.Data, "data"},
		{d.SourceHash, "annotation " + v1alpha1.AnnotationSourceHash},
		{d.Identity, "annotation " + v1alpha1.AnnotationIdentity},
		{d.LabelMirrored, "label " + v1alpha1.LabelMirrored},
		{d.LabelManaged, "label " + v1alpha1.LabelManaged},
		{d.Type, "type"},
	} {
		if f.differs {
			fields = append(fields, f.name)
		}
	}
	if len(fields) == 0 {
		return "none"
	}
	return strings.Join(fields, ", ")
}

// CompareMirror compares an existing mirror, already known not to be foreign
// ([IsForeign]), with the desired one from [DesiredMirror] (SPEC M6). Only the
// fields the manager owns are compared: labels and annotations that others
// set are left alone. An empty type counts as Opaque, the API server's
// default.
func CompareMirror(existing, desired *corev1.Secret) MirrorDiff {
	return MirrorDiff{
		Data:          dataDiffers(existing, desired),
		SourceHash:    differs(existing.Annotations, desired.Annotations, v1alpha1.AnnotationSourceHash),
		Identity:      differs(existing.Annotations, desired.Annotations, v1alpha1.AnnotationIdentity),
		LabelMirrored: differs(existing.Labels, desired.Labels, v1alpha1.LabelMirrored),
		LabelManaged:  differs(existing.Labels, desired.Labels, v1alpha1.LabelManaged),
		Type:          secretType(existing.Type) != secretType(desired.Type),
	}
}

// ApplyDesired returns a deep copy of existing carrying desired's data, type,
// labels and annotations (SPEC M6). Labels and annotations are merged: ours
// are set, any others (set by users or other tools) are kept. Owner
// references are kept as they are; edit them with [EnsureOwnerReference].
// The data is copied, so the result never aliases desired.
func ApplyDesired(existing, desired *corev1.Secret) *corev1.Secret {
	out := existing.DeepCopy()
	// Never write the cache's own bookkeeping back (B1).
	delete(out.Annotations, CachedDataHashAnnotation)
	out.Type = desired.Type
	out.Data = copyData(desired.Data)
	// StringData is write-only and would override Data on the server.
	out.StringData = nil
	out.Labels = merge(out.Labels, desired.Labels)
	out.Annotations = merge(out.Annotations, desired.Annotations)
	return out
}

// copyData returns a deep copy of data. Values are never nil, so that a key
// with an empty value serialises as "" rather than null.
func copyData(data map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(data))
	for k, v := range data {
		out[k] = append([]byte{}, v...)
	}
	return out
}

// dataDiffers compares the data of existing, which may be a trimmed cache
// copy (SPEC B1: compared by hash), with desired's.
func dataDiffers(existing, desired *corev1.Secret) bool {
	if hash, ok := cachedDataHash(existing); ok {
		return hash != SourceHash(desired.Data)
	}
	return !dataEqual(existing.Data, desired.Data)
}

// dataEqual compares Secret data byte-wise; nil and empty maps, and nil and
// empty values, are equal, as they are on the API server.
func dataEqual(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !bytes.Equal(av, bv) {
			return false
		}
	}
	return true
}

// differs reports whether key is set differently in got and want (presence
// and value).
func differs(got, want map[string]string, key string) bool {
	g, gok := got[key]
	w, wok := want[key]
	return gok != wok || g != w
}

// secretType maps the empty type to Opaque, as the API server defaults it.
func secretType(t corev1.SecretType) corev1.SecretType {
	if t == "" {
		return corev1.SecretTypeOpaque
	}
	return t
}

// merge sets every entry of ours in dst (allocating dst when nil) and
// returns it.
func merge(dst, ours map[string]string) map[string]string {
	if dst == nil && len(ours) > 0 {
		dst = make(map[string]string, len(ours))
	}
	maps.Copy(dst, ours)
	return dst
}
