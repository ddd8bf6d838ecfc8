package slots

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// O4: the cap arithmetic, row by row.
func TestDecide(t *testing.T) {
	start := Decision{Start: true}
	for _, tc := range []struct {
		name string
		r    Request
		want Decision
	}{
		{"no caps", Request{Class: Apply}, start},
		{"global 0 is no cap", Request{Class: Apply, Global: Cap{Limit: 0, Active: 1000}}, start},
		{"below global", Request{Class: Apply, Global: Cap{Limit: 5, Active: 4}}, start},
		{"global full", Request{Class: Apply, Global: Cap{Limit: 5, Active: 5}}, Decision{Scope: Global, Hold: Full}},
		{"global over (cap lowered)", Request{Class: Destroy, Global: Cap{Limit: 5, Active: 9}}, Decision{Scope: Global, Hold: Full}},
		{"destroy waits on a full cap too", Request{Class: Destroy, Global: Cap{Limit: 5, Active: 5}}, Decision{Scope: Global, Hold: Full}},
		{"one free, one ahead", Request{Class: Apply, Global: Cap{Limit: 5, Active: 4, Ahead: 1}}, Decision{Scope: Global, Hold: Yield}},
		{"two free, one ahead", Request{Class: Apply, Global: Cap{Limit: 5, Active: 3, Ahead: 1}}, start},
		{"two free, two ahead", Request{Class: Apply, Global: Cap{Limit: 5, Active: 3, Ahead: 2}}, Decision{Scope: Global, Hold: Yield}},
		{"cluster full", Request{Class: Apply, Global: Cap{Limit: 200, Active: 10}, Cluster: Cap{Limit: 3, Active: 3}}, Decision{Scope: Cluster, Hold: Full}},
		{"cluster has room", Request{Class: Apply, Global: Cap{Limit: 200, Active: 10}, Cluster: Cap{Limit: 3, Active: 2}}, start},
		{"cluster room taken by a waiter ahead", Request{Class: Apply, Global: Cap{Limit: 200}, Cluster: Cap{Limit: 3, Active: 2, Ahead: 1}}, Decision{Scope: Cluster, Hold: Yield}},
		{"both full: the cluster is named", Request{Class: Apply, Global: Cap{Limit: 5, Active: 5}, Cluster: Cap{Limit: 2, Active: 2}}, Decision{Scope: Cluster, Hold: Full}},
		{"global full, cluster yields: the full one is named", Request{Class: Apply, Global: Cap{Limit: 5, Active: 5}, Cluster: Cap{Limit: 2, Active: 1, Ahead: 1}}, Decision{Scope: Global, Hold: Full}},
		{"global yields, cluster has room", Request{Class: Apply, Global: Cap{Limit: 5, Active: 4, Ahead: 3}, Cluster: Cap{Limit: 2}}, Decision{Scope: Global, Hold: Yield}},
		{"no global cap, cluster full", Request{Class: Destroy, Cluster: Cap{Limit: 1, Active: 1}}, Decision{Scope: Cluster, Hold: Full}},

		// Background: only below 80% of each cap, and behind every waiter.
		{"background below 80%", Request{Class: Background, Global: Cap{Limit: 10, Active: 7}}, start},
		{"background at 80%", Request{Class: Background, Global: Cap{Limit: 10, Active: 8}}, Decision{Scope: Global, Hold: Reserved}},
		{"background cap 5: 3 taken", Request{Class: Background, Global: Cap{Limit: 5, Active: 3}}, start},
		{"background cap 5: 4 taken", Request{Class: Background, Global: Cap{Limit: 5, Active: 4}}, Decision{Scope: Global, Hold: Reserved}},
		{"background cap 1: empty", Request{Class: Background, Global: Cap{Limit: 1}}, start},
		{"background cluster at 80%", Request{Class: Background, Global: Cap{Limit: 200}, Cluster: Cap{Limit: 5, Active: 4}}, Decision{Scope: Cluster, Hold: Reserved}},
		{"background behind waiters", Request{Class: Background, Global: Cap{Limit: 10, Active: 5, Ahead: 5}}, Decision{Scope: Global, Hold: Yield}},
		{"background below 80% with room after the waiters", Request{Class: Background, Global: Cap{Limit: 10, Active: 5, Ahead: 4}}, start},
		{"apply at 90% starts", Request{Class: Apply, Global: Cap{Limit: 10, Active: 9}}, start},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Decide(tc.r))
		})
	}
}

// O4: whatever the numbers, a Job that starts leaves every cap at or
// below its limit, and a Background Job leaves it at or below 80% plus
// the one slot it takes.
func TestDecideNeverExceeds(t *testing.T) {
	for limit := 0; limit <= 12; limit++ {
		for active := 0; active <= 14; active++ {
			for ahead := 0; ahead <= 14; ahead++ {
				for _, class := range Classes {
					for _, scope := range Scopes {
						c := Cap{Limit: limit, Active: active, Ahead: ahead}
						r := Request{Class: class}
						if scope == Global {
							r.Global = c
						} else {
							r.Cluster = c
						}
						d := Decide(r)
						what := fmt.Sprintf("%s %s %+v", class, scope, c)
						if limit <= 0 {
							require.True(t, d.Start, what)
							continue
						}
						require.Equal(t, active+ahead < limit && (class != Background || active*100 < limit*BackgroundPercent), d.Start, what)
						if d.Start {
							require.LessOrEqual(t, active+1, limit, what)
						} else {
							require.Equal(t, scope, d.Scope, what)
						}
					}
				}
			}
		}
	}
}

func TestFree(t *testing.T) {
	require.Equal(t, -1, Cap{}.Free())
	require.Equal(t, 2, Cap{Limit: 5, Active: 3}.Free())
	require.Equal(t, 0, Cap{Limit: 5, Active: 7}.Free())
}
