// Package statelock decides what to do about the lock of a Terraform state
// before a Job of its object starts (SPEC O3, upstream A3-48, A3-49): pure
// code, given the lock Lease the kubernetes backend keeps and the object's
// Jobs.
//
// The backend (Terraform's and OpenTofu's "kubernetes") holds the lock in
// the Lease lock-tfstate-default-<suffix>: spec.holderIdentity is the lock
// ID, and the annotation app.terraform.io/lock-info the lock's JSON, whose
// Who is "<user>@<hostname>". In a Job's pod the hostname is the pod's
// name: the Job's name and "-" (cut to 58 characters, as the API server
// cuts a generateName) and five random characters. A lock whose holder is
// a pod of one of the object's own Jobs that has finished can only be
// stale: its process is gone. So is one whose holder's name is that of a
// pod of a Job of the object (jobs.JobOfPod: the name's hash covers the
// object's UID) that is gone, deleted while it ran, when no pod of that
// name runs and no Job of the object does. Anything else (a running Job,
// another object's Job, a person at a terminal) is never broken.
package statelock

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	jobnames "github.com/captf/captf/pkg/controllers/jobs"
)

// AnnotationLockInfo is where the backend keeps the lock's JSON.
const AnnotationLockInfo = "app.terraform.io/lock-info"

// maxLockInfo bounds the lock JSON read (B10): the backend writes a few
// hundred bytes.
const maxLockInfo = 16 << 10

// LockInfo is what the backend records of a lock.
type LockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Who       string    `json:"Who"`
	Created   time.Time `json:"Created"`
}

// Lease is what the controller read of the lock Lease.
type Lease struct {
	// Exists: the Lease exists; Holder its spec.holderIdentity ("" when
	// the lock is free).
	Exists bool
	Holder string
	// Info is its lock-info annotation, raw.
	Info string
	// Pod is what was read of the holder's pod (after ReadPod).
	Pod Pod
}

// Job is one of the object's Jobs.
type Job struct {
	Name     string
	Finished bool
}

// Object is the object whose Job would start: what its Jobs' names are
// made of (jobs.Name), so that a holder can be proven one of its Jobs when
// the Job is gone.
type Object struct {
	Kind, Name string
	UID        types.UID
}

// Pod is what the controller read of the holder's pod, asked for
// (ReadPod) only when the holder is a pod of a Job of the object that is
// not among its Jobs (deleted while it ran).
type Pod int

const (
	// PodUnread: not read yet.
	PodUnread Pod = iota
	// PodGone: no pod has the holder's name, or it has ended (Succeeded,
	// Failed): its process no longer runs.
	PodGone
	// PodRuns: a pod with the holder's name has not ended (it may be
	// terminating, or orphaned by its Job's deletion): it may still hold
	// the lock.
	PodRuns
)

// Action is what to do before the Job starts.
type Action int

const (
	// Proceed: no lock, or one the next Job may take (free).
	Proceed Action = iota
	// ForceUnlock: the lock is held by a Job of the object that no longer
	// runs: release it (ForceUnlocked), then proceed.
	ForceUnlock
	// Wait: held by a Job of the object that still runs, or by the pod,
	// still running, of one that is gone, or held by a gone Job's pod
	// while another Job of the object runs; no new Job would start
	// anyway (J1).
	Wait
	// Locked: held by anything else; never broken (StateLocked).
	Locked
	// ReadPod: held by a pod of a Job of the object that is gone, and no
	// Job of the object runs: read the pod (Decision.Pod) and decide
	// again with Lease.Pod set.
	ReadPod
)

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Job is the object's Job that holds the lock (ForceUnlock, Wait,
	// ReadPod).
	Job string
	// Deleted: Job is not among the object's Jobs (ForceUnlock, Wait,
	// ReadPod).
	Deleted bool
	// Pod is the holder's pod name (ReadPod).
	Pod string
	// Requeue (Wait): nothing reports the holder's end (its Job is gone
	// and no other Job of the object runs): look again later.
	Requeue bool
	// Message describes the holder, for events and conditions: the lock
	// ID, who, the operation and since when (no value of the state).
	Message string
}

// Decide decides what to do about lease before a Job of obj, whose Jobs
// are jobs, starts. A holder is the object's when it is a pod of one of
// jobs, or, when that Job is gone (deleted while it ran, A3-89), when its
// name is one jobs.Name gives obj (jobs.JobOfPod) and its pod no longer
// runs; a gone Job's lock is not touched while any Job of obj runs.
func Decide(lease Lease, jobs []Job, obj Object) Decision {
	if !lease.Exists || lease.Holder == "" {
		return Decision{Action: Proceed}
	}
	info, err := ParseInfo(lease.Info)
	desc := describe(lease.Holder, info, err)
	if err != nil {
		return Decision{Action: Locked, Message: desc}
	}
	host := info.Who[strings.LastIndex(info.Who, "@")+1:]
	for _, j := range jobs {
		if !jobnames.PodOfJob(host, j.Name) {
			continue
		}
		if j.Finished {
			return Decision{Action: ForceUnlock, Job: j.Name, Message: desc}
		}
		return Decision{Action: Wait, Job: j.Name, Message: desc}
	}
	job, ok := jobnames.JobOfPod(obj.Kind, obj.Name, obj.UID, host)
	if !ok {
		return Decision{Action: Locked, Message: desc}
	}
	d := Decision{Job: job, Deleted: true, Pod: host, Message: desc}
	for _, j := range jobs {
		if !j.Finished {
			// J1: no Job starts beside it; its end wakes the object.
			d.Action = Wait
			return d
		}
	}
	switch lease.Pod {
	case PodGone:
		d.Action = ForceUnlock
	case PodRuns:
		d.Action, d.Requeue = Wait, true
	default:
		d.Action = ReadPod
	}
	return d
}

// ParseInfo reads a lock-info annotation within bounds.
func ParseInfo(s string) (LockInfo, error) {
	var info LockInfo
	if s == "" {
		return info, fmt.Errorf("the lock has no %s annotation", AnnotationLockInfo)
	}
	if len(s) > maxLockInfo {
		return info, fmt.Errorf("the lock's %s annotation is %d bytes, more than %d", AnnotationLockInfo, len(s), maxLockInfo)
	}
	if err := json.Unmarshal([]byte(s), &info); err != nil {
		return info, fmt.Errorf("the lock's %s annotation is not the backend's JSON", AnnotationLockInfo)
	}
	if !strings.Contains(info.Who, "@") {
		return info, fmt.Errorf("the lock's holder %q names no host", clip(info.Who))
	}
	return info, nil
}

func describe(holder string, info LockInfo, err error) string {
	if err != nil {
		return fmt.Sprintf("lock %s (%v)", clip(holder), err)
	}
	s := fmt.Sprintf("lock %s held by %s", clip(info.ID), clip(info.Who))
	if info.Operation != "" {
		s += " for " + clip(info.Operation)
	}
	if !info.Created.IsZero() {
		s += " since " + info.Created.UTC().Format(time.RFC3339)
	}
	return s
}

// clip bounds a tenant-written string in a message (B14's rule for names).
func clip(s string) string {
	if len(s) > 128 {
		return s[:128] + "..."
	}
	return s
}
