package credentials

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// CachedDataHashAnnotation is set only on the manager's cached copies of
// Secrets, never written to the API server: it holds the [SourceHash] of the
// data the cache dropped (SPEC B1), after a mark chosen at random when the
// process starts, so a value a client stored under this key is recognised as
// foreign and replaced rather than trusted.
const CachedDataHashAnnotation = "cache.captf.io/data-hash"

// trimMark starts every value of CachedDataHashAnnotation this process sets.
var trimMark = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b) + "/"
}()

// TrimSecretForCache is the transform of the manager's Secret informer (SPEC
// B1): it keeps the metadata and type the manager compares and replaces the
// data by its hash, so the cache's memory does not grow with the size of
// labelled Secrets, which any tenant can create. The hash still lets a pass
// notice data edited out of band (M6) without a read, and a rewrite is
// preconditioned on the cached resourceVersion (P3), so a stale copy is
// refused by the API server, never written back. Managed fields are dropped too. It is
// idempotent, and objects of other types are returned unchanged.
func TrimSecretForCache(obj interface{}) (interface{}, error) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return obj, nil
	}
	s.ManagedFields = nil
	if _, trimmed := cachedDataHash(s); trimmed {
		return s, nil
	}
	hash := SourceHash(s.Data)
	s.Data, s.StringData = nil, nil
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[CachedDataHashAnnotation] = trimMark + hash
	return s, nil
}

// cachedDataHash returns the data hash of a copy [TrimSecretForCache]
// trimmed; ok is false for any other Secret.
func cachedDataHash(s *corev1.Secret) (hash string, ok bool) {
	if s.Data != nil || s.StringData != nil {
		return "", false
	}
	return strings.CutPrefix(s.Annotations[CachedDataHashAnnotation], trimMark)
}
