package workload

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/credentials"
)

// M8 and section 13: the echo of the manager's own write is recognised once;
// any other resourceVersion, or a deletion, is not an echo.
func TestEchoes(t *testing.T) {
	e := newEchoes(clocktesting.NewFakeClock(epoch))
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

	// Two own writes before the informer shows the first: both are echoes.
	e.wrote(key, "20")
	e.wrote(key, "21")
	require.True(t, e.isEcho(key, "20"))
	require.True(t, e.isEcho(key, "21"))

	// A write whose event never comes is not kept for ever.
	for i := range 10 {
		e.wrote(key, string(rune('a'+i)))
	}
	require.LessOrEqual(t, len(e.written[key]), maxEchoes)
}

// P3, section 13: a reconcile plans from the manager's own newest write of
// a mirror while the cache still shows a version before it, and from the
// cache again once it shows anything else or the record is too old.
func TestEchoesLatest(t *testing.T) {
	clk := clocktesting.NewFakeClock(epoch)
	e := newEchoes(clk)
	key := cache.ObjectName{Namespace: testNS, Name: mirrorName}
	version := func(rv string, data map[string][]byte, owners ...metav1.OwnerReference) *corev1.Secret {
		s := newMirror(identityName, testNS, data, owners...)
		s.ResourceVersion = rv
		s.Labels["tenant"] = "not kept"
		return s
	}
	a, b := refOf("TerraformCluster", newCluster("a")), refOf("TerraformCluster", newCluster("b"))
	v1 := version("1", sourceData(), a)
	cached := controllerCached(v1)
	require.Same(t, cached, e.latest(key, cached), "nothing known: the cache")

	// A create this process made, not yet in the cache.
	e.wroteMirror(nil, v1)
	got := e.latest(key, nil)
	require.Equal(t, "1", got.ResourceVersion)
	require.Nil(t, got.Data, "B1: no data kept")
	require.NotContains(t, got.Labels, "tenant", "B12: only what the manager reads")
	require.Equal(t, credentials.MirrorCurrent, credentials.PlanMirror(got, credentials.DesiredMirror(identityName, testNS, sourceData()), []metav1.OwnerReference{a}).Action,
		"the kept copy plans like the cache's")

	// A chain of own writes: 1 -> 2 -> 3 while the cache still shows 1.
	v2 := version("2", sourceData(), a, b)
	e.wroteMirror(got, v2)
	v3 := version("3", map[string][]byte{"K": []byte("rotated")}, a, b)
	e.wroteMirror(controllerCached(v2), v3)
	require.Equal(t, "3", e.latest(key, nil).ResourceVersion)
	require.Equal(t, "3", e.latest(key, cached).ResourceVersion)
	require.Equal(t, "3", e.latest(key, controllerCached(v2)).ResourceVersion)

	// The informer shows 1 and 2 (echoes, still older), then 3.
	require.True(t, e.isEcho(key, "1"))
	require.Equal(t, "3", e.latest(key, cached).ResourceVersion)
	require.True(t, e.isEcho(key, "2"))
	require.True(t, e.isEcho(key, "3"))
	c3 := controllerCached(v3)
	require.Same(t, c3, e.latest(key, c3), "the cache caught up: the record is gone")
	require.Empty(t, e.known)

	// Someone else's version the record knows nothing of ends it.
	e.wroteMirror(c3, version("4", sourceData(), a))
	require.False(t, e.isEcho(key, "9"))
	c9 := controllerCached(version("9", sourceData(), a))
	require.Same(t, c9, e.latest(key, c9))
	require.Same(t, cached, e.latest(key, cached), "record ended: the cache, whatever it shows")

	// A refused write: the fresh read is newer than the version planned from.
	e.readMirror(key, cached, version("5", sourceData(), a, b))
	require.Equal(t, "5", e.latest(key, cached).ResourceVersion)
	e.readMirror(key, cached, nil)
	require.Same(t, cached, e.latest(key, cached), "gone: nothing known")

	// M8: a record whose event never came stops hiding the cache.
	e.wroteMirror(nil, v1)
	clk.Step(knownTTL)
	require.Nil(t, e.latest(key, nil), "the cache's word after knownTTL: absent, so created again")

	// Deletion forgets.
	e.wroteMirror(nil, v1)
	e.forget(key)
	require.Nil(t, e.latest(key, nil))
}

// controllerCached is s as the mirror informer holds it.
func controllerCached(s *corev1.Secret) *corev1.Secret {
	out, _ := credentials.TrimSecretForCache(s.DeepCopy())
	return out.(*corev1.Secret)
}
