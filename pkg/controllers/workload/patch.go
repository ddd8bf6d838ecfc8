package workload

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
)

// ownedPatch is a JSON merge patch of what the manager owns on a workload
// object: its finalizer, the Cluster API fields it sets from the outputs and
// the annotation that names the generation of that write (T5). The object
// it is decided on comes from the cache, which keeps only the labels and
// annotations the manager reads (SPEC B12): an Update built from it would
// erase everything else, so the manager never updates a workload object
// whole. The patch carries the resourceVersion the decision was made on, so
// the API server refuses it with a Conflict, as it would an Update, when the
// object changed meanwhile (the finalizer list is replaced whole, and the
// annotation names a generation computed from that version).
type ownedPatch struct {
	Metadata ownedMetadata              `json:"metadata"`
	Spec     map[string]json.RawMessage `json:"spec,omitempty"`
}

type ownedMetadata struct {
	ResourceVersion string `json:"resourceVersion"`
	// Finalizers, when set, replaces the list (an empty list removes the
	// last one).
	Finalizers *[]string `json:"finalizers,omitempty"`
	// Annotations are merged key by key: no other annotation is touched;
	// a nil value removes the key.
	Annotations map[string]*string `json:"annotations,omitempty"`
}

// metaPatch writes what changed from the finalizers and annotations before
// to those after: the finalizer list whole when it changed, each annotation
// set or removed, if the object is still at resourceVersion rv. Both
// annotation maps are the trimmed copy's, so only keys the manager reads
// can differ.
func metaPatch(rv string, finalizersBefore, finalizersAfter []string, annotationsBefore, annotationsAfter map[string]string) ([]byte, error) {
	m := ownedMetadata{ResourceVersion: rv}
	if !slices.Equal(finalizersBefore, finalizersAfter) {
		fs := finalizersAfter
		if fs == nil {
			fs = []string{} // an empty list removes the last one
		}
		m.Finalizers = &fs
	}
	for k, v := range annotationsAfter {
		if old, ok := annotationsBefore[k]; !ok || old != v {
			if m.Annotations == nil {
				m.Annotations = map[string]*string{}
			}
			m.Annotations[k] = &v
		}
	}
	for k := range annotationsBefore {
		if _, ok := annotationsAfter[k]; !ok {
			if m.Annotations == nil {
				m.Annotations = map[string]*string{}
			}
			m.Annotations[k] = nil
		}
	}
	return json.Marshal(ownedPatch{Metadata: m})
}

// providerFieldsPatch sets obj's spec field (a path "spec.<name>", as
// providerField names it) to the value obj now holds, or removes it when
// obj holds none, and the annotation key to value, if the object is still
// at obj's resourceVersion.
func providerFieldsPatch(obj runtime.Object, rv, field, key, value string) ([]byte, error) {
	name, ok := strings.CutPrefix(field, "spec.")
	if !ok || strings.Contains(name, ".") {
		return nil, fmt.Errorf("cannot patch field %s: not a top-level spec field", field)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var whole struct {
		Spec map[string]json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil {
		return nil, err
	}
	v, ok := whole.Spec[name]
	if !ok {
		v = json.RawMessage("null") // unset (a pool's emptied list): removed
	}
	return json.Marshal(ownedPatch{
		Metadata: ownedMetadata{ResourceVersion: rv, Annotations: map[string]*string{key: &value}},
		Spec:     map[string]json.RawMessage{name: v},
	})
}
