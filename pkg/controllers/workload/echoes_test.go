package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/cache"
)

// M8 and section 13: the echo of the manager's own write is recognised once;
// any other resourceVersion, or a deletion, is not an echo.
func TestEchoes(t *testing.T) {
	e := newEchoes()
	key := cache.ObjectName{Namespace: "team-a", Name: "captf-creds-aws"}
	require.False(t, e.isEcho(key, "10"), "nothing written yet")

	e.wrote(key, "11")
	require.False(t, e.isEcho(key, "10"), "an older event is not the echo")
	require.True(t, e.isEcho(key, "11"))
	require.False(t, e.isEcho(key, "11"), "an echo is consumed once")

	e.wrote(key, "12")
	require.False(t, e.isEcho(key, "13"), "someone else's later write reaches the owners")
	e.forget(key)
	require.False(t, e.isEcho(key, "12"), "forgotten on delete")
}
