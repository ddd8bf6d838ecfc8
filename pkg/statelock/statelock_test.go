package statelock

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	jobnames "github.com/captf/captf/pkg/controllers/jobs"
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
			d := Decide(tt.lease, jobs, Object{Kind: "TerraformCluster", Name: "c1", UID: "u1"})
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
	d := Decide(Lease{Exists: true, Holder: "0d1e", Info: info("alice@laptop")}, nil, Object{})
	require.Equal(t, "lock 0d1e held by alice@laptop for OperationTypeApply since 2026-12-02T03:04:05Z", d.Message)
}

// SPEC O3 (A3-48, A3-89): a lock left by a Job of the object that was
// deleted while it ran is the object's when the holder's name is one of
// its Job names (the hash covers its kind, name and UID) and its pod no
// longer runs; it is waited for while the pod or another Job of the
// object runs; anything not provably the object's stays foreign.
func TestDecideDeletedJob(t *testing.T) {
	const kind = "TerraformCluster"
	obj := Object{Kind: kind, Name: "c1", UID: "u1"}
	apply := jobnames.Name(kind, "c1", "u1", v1alpha1.JobActionApply, 3)
	attempt := jobnames.AttemptName(kind, "c1", "u1", v1alpha1.JobActionApply, 3, 2)
	reapply := jobnames.ReapplyName(kind, "c1", "u1", 3, 1)
	drift := jobnames.Name(kind, "c1", "u1", v1alpha1.JobActionDrift, 3)
	destroy := jobnames.AttemptName(kind, "c1", "u1", v1alpha1.JobActionDestroy, 4, 12)
	longName := strings.Repeat("a-very-long-cluster-name", 3)[:60]
	longObj := Object{Kind: kind, Name: longName, UID: "u1"}
	long := jobnames.AttemptName(kind, longName, "u1", v1alpha1.JobActionApply, 1234567, 99)
	require.Greater(t, len(long), 58, "the pod's name keeps only 58 characters of it")
	pod := func(job string) string {
		p := job + "-"
		if len(p) > 58 {
			p = p[:58]
		}
		return p + "x7k2p"
	}
	held := func(who string, p Pod) Lease {
		return Lease{Exists: true, Holder: "0d1e", Info: info(who), Pod: p}
	}
	finished := []Job{{Name: jobnames.Name(kind, "c1", "u1", v1alpha1.JobActionApply, 2), Finished: true}}
	running := append([]Job{{Name: jobnames.Name(kind, "c1", "u1", v1alpha1.JobActionApply, 4)}}, finished...)
	other := Object{Kind: kind, Name: "c1", UID: "u2"}
	flip := map[byte]string{'0': "1"}[apply[len(apply)-1]]
	if flip == "" {
		flip = "0"
	}
	tampered := pod(apply[:len(apply)-1] + flip)
	for _, tt := range []struct {
		name    string
		lease   Lease
		obj     Object
		jobs    []Job
		action  Action
		job     string
		requeue bool
	}{
		{"deleted Job, pod not read yet", held("@"+pod(apply), PodUnread), obj, finished, ReadPod, apply, false},
		{"deleted Job, pod gone", held("@"+pod(apply), PodGone), obj, finished, ForceUnlock, apply, false},
		{"deleted Job, no Job left", held("@"+pod(apply), PodGone), obj, nil, ForceUnlock, apply, false},
		{"deleted Job, pod still runs", held("@"+pod(apply), PodRuns), obj, finished, Wait, apply, true},
		{"deleted Job while another runs", held("@"+pod(apply), PodGone), obj, running, Wait, apply, false},
		{"an attempt", held("root@"+pod(attempt), PodGone), obj, finished, ForceUnlock, attempt, false},
		{"a re-apply", held("@"+pod(reapply), PodGone), obj, finished, ForceUnlock, reapply, false},
		{"a drift check", held("@"+pod(drift), PodGone), obj, finished, ForceUnlock, drift, false},
		{"a destroy", held("@"+pod(destroy), PodGone), obj, finished, ForceUnlock, destroy, false},
		{"a long name cut at 58", held("@"+pod(long), PodGone), longObj, nil, ForceUnlock, long, false},
		{"the object re-created (another UID)", held("@"+pod(apply), PodGone), other, finished, Locked, "", false},
		{"another object's Job", held("@"+pod(jobnames.Name(kind, "c2", "u1", v1alpha1.JobActionApply, 3)), PodGone), obj, finished, Locked, "", false},
		{"another kind's Job", held("@"+pod(jobnames.Name("TerraformMachine", "c1", "u1", v1alpha1.JobActionApply, 3)), PodGone), obj, finished, Locked, "", false},
		{"a hash that does not match", held("@"+tampered, PodGone), obj, finished, Locked, "", false},
		{"the Job's name without a pod suffix", held("@"+apply, PodGone), obj, finished, Locked, "", false},
		{"a person", held("alice@laptop", PodGone), obj, nil, Locked, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := Decide(tt.lease, tt.jobs, tt.obj)
			require.Equal(t, tt.action, d.Action, d.Message)
			require.Equal(t, tt.job, d.Job)
			require.Equal(t, tt.requeue, d.Requeue)
			if tt.action == ReadPod {
				require.Equal(t, pod(apply), d.Pod)
			}
			if tt.action == ForceUnlock {
				require.True(t, d.Deleted)
			}
		})
	}
}
