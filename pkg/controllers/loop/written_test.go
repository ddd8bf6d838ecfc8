package loop

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
)

func TestWritten(t *testing.T) {
	w := NewWritten[string]()
	a := cache.ObjectName{Namespace: "ns", Name: "a"}
	require.False(t, w.NeedsWrite(a, "uid-1", "ok", "ok"), "equal to the cache, nothing written before")
	require.True(t, w.NeedsWrite(a, "uid-1", "ok", "failed"), "differs from the cache")

	// The manager wrote "failed"; the cache still shows "ok" (it lags).
	w.Record(a, "uid-1", "failed")
	require.True(t, w.NeedsWrite(a, "uid-1", "ok", "ok"), "the store holds what was last written, not the cache's copy")
	require.False(t, w.NeedsWrite(a, "uid-1", "failed", "failed"))

	w.Record(a, "uid-1", "ok")
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
	w.Record(a, "uid-1", "failed")
	require.False(t, w.NeedsWrite(a, "uid-2", "ok", "ok"), "the record of the earlier object of that name does not count")
	_, ok := w.Last(a, "uid-2")
	require.False(t, ok)
	w.Record(a, "uid-2", "ok")
	require.Equal(t, 1, w.Len(), "one record per key")
	w.Forget(a)
	require.Zero(t, w.Len())
}
