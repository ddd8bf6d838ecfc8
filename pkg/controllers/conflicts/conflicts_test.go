package conflicts

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestRecordsExpireUnlessSeenAgain: a conflict whose last user went away
// clears itself after the TTL; one re-seen each sync period stays (M7, 13).
func TestRecordsExpireUnlessSeenAgain(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	var changed []string
	tr := New(clk, 20*time.Minute)
	tr.OnChange = func(id string) { changed = append(changed, id) }

	tr.Set("aws", "b", true)
	tr.Set("aws", "a", true)
	require.Equal(t, []string{"a", "b"}, tr.Namespaces("aws"))
	require.Equal(t, []string{"aws", "aws"}, changed)

	clk.SetTime(clk.Now().Add(15 * time.Minute))
	tr.Set("aws", "a", true) // a's user still meets the foreign Secret
	require.Equal(t, []string{"aws", "aws"}, changed, "re-seeing a conflict is not a change")
	clk.SetTime(clk.Now().Add(10 * time.Minute))
	require.Equal(t, []string{"a"}, tr.Namespaces("aws"), "b was not seen for 25m > TTL")

	tr.Set("aws", "a", false)
	require.Empty(t, tr.Namespaces("aws"))
	require.Equal(t, []string{"aws", "aws", "aws"}, changed)

	tr.Set("gcp", "x", true)
	tr.Forget("gcp")
	require.Empty(t, tr.Namespaces("gcp"))
}

// B15: a record nobody reads any more (its identity was deleted while a
// user's reconcile still recorded it) is dropped within two TTLs by the
// sweep of a later Set; Forget drops an identity's records at once.
func TestRecordsOfGoneIdentitiesAreSwept(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	tr := New(clk, 20*time.Minute)
	for i := range 100 {
		tr.Set("gone", "ns-"+string(rune('a'+i%26))+string(rune('a'+i/26)), true)
	}
	tr.Set("forgotten", "x", true)
	tr.Forget("forgotten")
	require.Equal(t, 100, tr.Len())

	clk.SetTime(clk.Now().Add(41 * time.Minute))
	tr.Set("live", "x", true) // never reads "gone"
	require.Equal(t, 1, tr.Len(), "only the live record is left")
	require.Equal(t, []string{"x"}, tr.Namespaces("live"))
}
