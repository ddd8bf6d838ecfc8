package trim

import (
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Interning (issue 25, SPEC P3): every object a watch decodes comes with
// its own copy of each string, so 15,000 workload objects hold 15,000
// copies of "Ready", of "infrastructure.cluster.x-k8s.io/v1alpha1" and of
// the same condition messages, and 15,000 mirrors as many copies of their
// identity's name and source hash. [ForCache] replaces such strings by one
// shared copy. Nothing is dropped and no value changes: a status written
// from the cached copy (trim's package comment) is byte for byte what it
// was, so interning needs no reader's consent, unlike a keep-list.
//
// The table is a two-way set-associative cache of internSlots strings: a
// string hashes to a pair of slots and, when it is in neither, takes the
// first, moving the one there to the second and evicting the second's. Its
// memory is bounded (internSlots strings of at most internMaxLen bytes)
// whatever tenants write, and a string repeated across many objects stays
// in its pair, or comes back to it, so nearly every copy shares one. A
// string an eviction left behind stays valid: the objects holding it keep
// it alive. The hash is FNV-1a, so which strings share a pair does not
// change from one process to the next (the tests rely on it).
const (
	internSlots  = 1 << 13
	internMaxLen = 256
)

var strs struct {
	mu    sync.Mutex
	slots [internSlots]string
}

// Intern returns a copy of s equal to it, shared with the other strings
// interned equal to it while it holds its slot.
func Intern(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	i := fnv1a(s) & (internSlots - 2) // the first of the pair, even
	strs.mu.Lock()
	defer strs.mu.Unlock()
	switch {
	case strs.slots[i] == s:
		return strs.slots[i]
	case strs.slots[i+1] == s:
		// Used again: first of the pair again.
		strs.slots[i], strs.slots[i+1] = strs.slots[i+1], strs.slots[i]
		return strs.slots[i]
	}
	// A clone: s may share its bytes with a larger buffer the decoder
	// made, which the table must not keep alive.
	s = strings.Clone(s)
	strs.slots[i+1], strs.slots[i] = strs.slots[i], s
	return s
}

func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// internMeta interns the metadata strings many cached objects repeat: the
// name (a mirror's is its identity's in every namespace; tenants reuse
// names across namespaces), the namespace, the kept labels and annotations
// (keys and values), the owner references' group, kind and name, and the
// finalizers. UIDs and resource versions are each object's own.
func internMeta(m *metav1.ObjectMeta) {
	m.Name, m.Namespace = Intern(m.Name), Intern(m.Namespace)
	m.Labels = internMap(m.Labels)
	m.Annotations = internMap(m.Annotations)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = Intern(r.APIVersion), Intern(r.Kind), Intern(r.Name)
	}
	for i, f := range m.Finalizers {
		m.Finalizers[i] = Intern(f)
	}
}

// internMap returns in with its keys and values interned: values in
// place, keys by a new map (a map's keys cannot be replaced).
func internMap(in map[string]string) map[string]string {
	if len(in) == 0 {
		return in
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		out[Intern(k)] = Intern(v)
	}
	return out
}

// internConditions interns the type, status, reason and message of each
// condition: the manager writes the same few of each on every object.
func internConditions(conds []metav1.Condition) {
	for i := range conds {
		c := &conds[i]
		c.Type, c.Status, c.Reason, c.Message = Intern(c.Type), metav1.ConditionStatus(Intern(string(c.Status))), Intern(c.Reason), Intern(c.Message)
	}
}
