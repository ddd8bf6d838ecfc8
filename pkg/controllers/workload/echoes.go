package workload

import (
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// maxEchoes bounds the writes of one object remembered as echoes: a write
// whose event never comes (a relist skipped it) must not be kept forever.
const maxEchoes = 4

// knownTTL bounds how long a known version is preferred to the cache's:
// the informer shows a write within a second or so, and a version whose
// event never came (a relist skipped it) must not hide the cache for good,
// or a mirror deleted meanwhile would never be created again (M8).
const knownTTL = 30 * time.Second

// echoes remembers the manager's own recent mirror and Job writes until the
// informers show them.
//
// The resourceVersions it wrote: the informer event its own write causes
// does not re-enqueue the owners, since that pass already knows the result
// and a second one would cost another source read for nothing. Every own
// write not yet seen counts, not only the last: two writes of one mirror
// before the informer delivers the first (a create, then another user's
// owner reference) made the first look like someone else's change. Any
// other change (someone else's edit, a deletion, a Job's status) carries
// another resourceVersion or is a delete, and still reaches the owners
// (M8).
//
// The newest version of each mirror it knows (SPEC P3, section 13): the
// answer to its own write, or an uncached read after a conflict, with the
// versions known to precede it. A reconcile that plans from a cache copy
// still at one of those versions plans from the newer one instead, so the
// users of a shared mirror that one reconcile just made current find
// nothing to write, rather than each sending a write preconditioned on a
// stale version (a Conflict and a re-read each) or a create that meets
// AlreadyExists. Only ever an optimisation: every write stays
// preconditioned, so a wrong guess costs a Conflict, never a lost change.
// Copies are trimmed like the cache's (no data, B1), and dropped as soon
// as the informer shows another version, or after knownTTL.
type echoes struct {
	clock   clock.PassiveClock
	mu      sync.Mutex
	written map[cache.ObjectName][]string
	known   map[cache.ObjectName]*known
}

// known is the newest version of a mirror the manager knows.
type known struct {
	secret *corev1.Secret
	// older holds the versions known to precede secret; "" stands for
	// "absent" (secret was created by this process).
	older map[string]bool
	// until is when the record stops being used.
	until time.Time
}

func newEchoes(clk clock.PassiveClock) *echoes {
	return &echoes{clock: clk, written: map[cache.ObjectName][]string{}, known: map[cache.ObjectName]*known{}}
}

// wrote records that the manager wrote key at resourceVersion rv.
func (e *echoes) wrote(key cache.ObjectName, rv string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wroteLocked(key, rv)
}

func (e *echoes) wroteLocked(key cache.ObjectName, rv string) {
	w := append(e.written[key], rv)
	if len(w) > maxEchoes {
		w = slices.Delete(w, 0, len(w)-maxEchoes)
	}
	e.written[key] = w
}

// wroteMirror records the manager's write of a mirror: stored is the API
// server's answer, planned the version the write was planned from (nil for
// a create).
func (e *echoes) wroteMirror(planned, stored *corev1.Secret) {
	key := cache.ObjectName{Namespace: stored.Namespace, Name: stored.Name}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.wroteLocked(key, stored.ResourceVersion)
	e.supersedeLocked(key, versionOf(planned), stored)
}

// readMirror records an uncached read of a mirror after a write planned
// from version stale was refused (a Conflict, or AlreadyExists with stale
// nil): fresh, when it exists, is newer than stale.
func (e *echoes) readMirror(key cache.ObjectName, stale, fresh *corev1.Secret) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fresh == nil {
		delete(e.known, key)
		return
	}
	e.supersedeLocked(key, versionOf(stale), fresh)
}

// supersedeLocked records that newer follows version prev.
func (e *echoes) supersedeLocked(key cache.ObjectName, prev string, newer *corev1.Secret) {
	older := map[string]bool{prev: true}
	if k := e.known[key]; k != nil && (k.older[prev] || k.secret.ResourceVersion == prev) {
		// A chain of the manager's own writes: everything before stays older.
		for rv := range k.older {
			older[rv] = true
		}
		older[k.secret.ResourceVersion] = true
	}
	e.known[key] = &known{secret: trimKnown(newer), older: older, until: e.clock.Now().Add(knownTTL)}
}

// latest returns the newest version of the mirror key the manager knows,
// given the cache's copy (nil when the cache has none): the recorded one
// when the cache still shows a version known to precede it (and the record
// is younger than knownTTL), else cached.
func (e *echoes) latest(key cache.ObjectName, cached *corev1.Secret) *corev1.Secret {
	e.mu.Lock()
	defer e.mu.Unlock()
	k := e.known[key]
	switch {
	case k == nil:
	case !e.clock.Now().Before(k.until):
		delete(e.known, key)
	case k.older[versionOf(cached)]:
		return k.secret
	}
	return cached
}

// isEcho reports whether an add or update event of key at rv is the echo of
// one of the manager's own writes, forgetting that write once seen. Any
// version the informer shows ends what latest knows of key unless it is
// one known to be older: the cache is then as new as the record, or
// newer, or shows a change the record knows nothing of.
func (e *echoes) isEcho(key cache.ObjectName, rv string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if k := e.known[key]; k != nil && !k.older[rv] {
		delete(e.known, key)
	}
	w := e.written[key]
	i := slices.Index(w, rv)
	if i < 0 {
		return false
	}
	if w = slices.Delete(w, i, i+1); len(w) == 0 {
		delete(e.written, key)
	} else {
		e.written[key] = w
	}
	return true
}

// forget drops key (it was deleted).
func (e *echoes) forget(key cache.ObjectName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.written, key)
	delete(e.known, key)
}

// versionOf is s's resourceVersion, "" for nil (absent).
func versionOf(s *corev1.Secret) string {
	if s == nil {
		return ""
	}
	return s.ResourceVersion
}

// trimKnown keeps of s what planning a mirror reads, as the cache would
// (B1: no data, its hash instead; B12: no one else's labels or
// annotations): identity, version, deletion, type, owner references and
// the manager's own labels and annotations.
func trimKnown(s *corev1.Secret) *corev1.Secret {
	out := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         s.Namespace,
			Name:              s.Name,
			UID:               s.UID,
			ResourceVersion:   s.ResourceVersion,
			DeletionTimestamp: s.DeletionTimestamp.DeepCopy(),
			OwnerReferences:   slices.Clone(s.OwnerReferences),
			Labels:            pick(s.Labels, v1alpha1.LabelMirrored, v1alpha1.LabelManaged),
			Annotations:       pick(s.Annotations, v1alpha1.AnnotationIdentity, v1alpha1.AnnotationSourceHash, credentials.CachedDataHashAnnotation),
		},
		Type: s.Type,
		Data: s.Data,
	}
	trimmed, _ := credentials.TrimSecretForCache(out)
	return trimmed.(*corev1.Secret)
}

// pick returns the entries of m under keys (nil when none is set).
func pick(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
