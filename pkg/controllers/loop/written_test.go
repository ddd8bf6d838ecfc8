package loop

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWritten(t *testing.T) {
	w := NewWritten[string]()
	require.False(t, w.NeedsWrite("a", "ok", "ok"), "equal to the cache, nothing written before")
	require.True(t, w.NeedsWrite("a", "ok", "failed"), "differs from the cache")

	// The manager wrote "failed"; the cache still shows "ok" (it lags).
	w.Record("a", "failed")
	require.True(t, w.NeedsWrite("a", "ok", "ok"), "the store holds what was last written, not the cache's copy")
	require.False(t, w.NeedsWrite("a", "failed", "failed"))

	w.Record("a", "ok")
	require.False(t, w.NeedsWrite("a", "ok", "ok"))
	w.Forget("a")
	require.False(t, w.NeedsWrite("a", "ok", "ok"))
}
