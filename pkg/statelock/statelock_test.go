package statelock

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func info(who string) string {
	b, _ := json.Marshal(LockInfo{ID: "0d1e", Operation: "OperationTypeApply", Who: who, Created: time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC)})
	return string(b)
}

// SPEC O3 (A3-48, A3-49): only a lock of the object's own finished Job is
// released; a running Job's is waited for; anything else is never broken.
func TestDecide(t *testing.T) {
	long := strings.Repeat("x", 70)
	jobs := []Job{{Name: "c1-apply-1-abcd1234", Finished: true}, {Name: "c1-apply-2-ef567890"}, {Name: long, Finished: true}}
	for _, tt := range []struct {
		name   string
		lease  Lease
		action Action
		job    string
	}{
		{"no Lease", Lease{}, Proceed, ""},
		{"free", Lease{Exists: true, Info: info("@c1-apply-1-abcd1234-x7k2p")}, Proceed, ""},
		{"finished own Job", Lease{Exists: true, Holder: "0d1e", Info: info("@c1-apply-1-abcd1234-x7k2p")}, ForceUnlock, "c1-apply-1-abcd1234"},
		{"with a user name", Lease{Exists: true, Holder: "0d1e", Info: info("nobody@c1-apply-1-abcd1234-x7k2p")}, ForceUnlock, "c1-apply-1-abcd1234"},
		{"running own Job", Lease{Exists: true, Holder: "0d1e", Info: info("@c1-apply-2-ef567890-q1w2e")}, Wait, "c1-apply-2-ef567890"},
		{"long Job name cut at 58", Lease{Exists: true, Holder: "0d1e", Info: info("@" + long[:58] + "abcde")}, ForceUnlock, long},
		{"another object's Job", Lease{Exists: true, Holder: "0d1e", Info: info("@c2-apply-1-abcd1234-x7k2p")}, Locked, ""},
		{"a prefix is not a pod", Lease{Exists: true, Holder: "0d1e", Info: info("@c1-apply-1-abcd1234-x7k2p9")}, Locked, ""},
		{"a person", Lease{Exists: true, Holder: "0d1e", Info: info("alice@laptop")}, Locked, ""},
		{"no lock info", Lease{Exists: true, Holder: "0d1e"}, Locked, ""},
		{"garbage lock info", Lease{Exists: true, Holder: "0d1e", Info: "{not json"}, Locked, ""},
		{"huge lock info", Lease{Exists: true, Holder: "0d1e", Info: strings.Repeat(" ", maxLockInfo+1)}, Locked, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.lease, jobs)
			require.Equal(t, tt.action, d.Action, d.Message)
			require.Equal(t, tt.job, d.Job)
			if tt.action == Locked || tt.action == ForceUnlock {
				require.NotEmpty(t, d.Message)
				require.Less(t, len(d.Message), 400)
			}
		})
	}
}

func TestDescribe(t *testing.T) {
	d := Decide(Lease{Exists: true, Holder: "0d1e", Info: info("alice@laptop")}, nil)
	require.Equal(t, "lock 0d1e held by alice@laptop for OperationTypeApply since 2026-12-02T03:04:05Z", d.Message)
}
