package loop

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// notShown is a cache without the object's write.
func notShown() metav1.Object { return nil }

// copyAt is the informer's copy of ns/a of uid at resourceVersion rv.
func copyAt(uid types.UID, rv string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: uid, ResourceVersion: rv}
}

func TestWritten(t *testing.T) {
	w := NewWritten[string]()
	a := cache.ObjectName{Namespace: "ns", Name: "a"}
	require.False(t, w.NeedsWrite(a, "uid-1", "ok", "ok"), "equal to the cache, nothing written before")
	require.True(t, w.NeedsWrite(a, "uid-1", "ok", "failed"), "differs from the cache")

	// The manager wrote "failed"; the cache still shows "ok" (it lags).
	w.Record(a, "uid-1", "10", "failed", notShown)
	require.True(t, w.NeedsWrite(a, "uid-1", "ok", "ok"), "the store holds what was last written, not the cache's copy")
	require.False(t, w.NeedsWrite(a, "uid-1", "failed", "failed"))

	w.Record(a, "uid-1", "11", "ok", notShown)
	require.False(t, w.NeedsWrite(a, "uid-1", "ok", "ok"))
	w.Forget(a)
	require.False(t, w.NeedsWrite(a, "uid-1", "ok", "ok"))
}

// B15: a record is of one object: a new object of the same name does not
// inherit it, its first write replaces it, and forgetting the key leaves
// nothing behind.
func TestWrittenIsPerObject(t *testing.T) {
	w := NewWritten[string]()
	a := cache.ObjectName{Namespace: "ns", Name: "a"}
	w.Record(a, "uid-1", "10", "failed", notShown)
	require.False(t, w.NeedsWrite(a, "uid-2", "ok", "ok"), "the record of the earlier object of that name does not count")
	_, ok := w.Last(a, "uid-2")
	require.False(t, ok)
	w.Record(a, "uid-2", "11", "ok", notShown)
	require.Equal(t, 1, w.Len(), "one record per key")
	w.Forget(a)
	require.Zero(t, w.Len())
}

// Issue 25 (P3): a record lasts only until the cache shows its write, in
// whichever order the informer's event and the record come, and no
// other version, nor another object of the name, ends it.
func TestWrittenRecordGoesOnceTheCacheShowsIt(t *testing.T) {
	a := cache.ObjectName{Namespace: "ns", Name: "a"}
	for _, tc := range []struct {
		name string
		// shown is the cache's copy read right after the record.
		shown metav1.Object
		// observed are the informer's events after the record.
		observed []metav1.Object
		kept     bool
	}{
		{name: "event after the record", shown: nil, observed: []metav1.Object{copyAt("uid-1", "10")}, kept: false},
		{name: "event before the record: the cache already shows it", shown: copyAt("uid-1", "10"), kept: false},
		{name: "cache still at the version before", shown: copyAt("uid-1", "9"), kept: true},
		{name: "an event of an older version", observed: []metav1.Object{copyAt("uid-1", "9")}, kept: true},
		{name: "another object of the name at that version", observed: []metav1.Object{copyAt("uid-2", "10")}, kept: true},
		{name: "older, then the write's", observed: []metav1.Object{copyAt("uid-1", "9"), copyAt("uid-1", "10")}, kept: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := NewWritten[string]()
			w.Record(a, "uid-1", "10", "failed", func() metav1.Object {
				if tc.shown == nil {
					return nil
				}
				return tc.shown
			})
			for _, o := range tc.observed {
				w.Observe(o)
			}
			_, ok := w.Last(a, "uid-1")
			require.Equal(t, tc.kept, ok)
			if !tc.kept {
				// Judged against the cache alone, which shows the write.
				require.False(t, w.NeedsWrite(a, "uid-1", "failed", "failed"))
				require.True(t, w.NeedsWrite(a, "uid-1", "failed", "ok"))
			}
		})
	}
}

func TestShownReadsTheStore(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	a := cache.ObjectName{Namespace: "ns", Name: "a"}
	require.Nil(t, Shown(store, a)())
	require.NoError(t, store.Add(copyAt("uid-1", "10")))
	require.Equal(t, "10", Shown(store, a)().GetResourceVersion())
}
