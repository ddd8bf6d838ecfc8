package runclass

import (
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/captf/captf/pkg/controllers/jobs"
)

// PullGrace is how long after its start a Job whose pod cannot pull an
// image is left to the kubelet's retries (its pull backoff of 10 s, 20 s:
// two or three attempts) before the manager ends it ([StopForPull]). SPEC
// O2 wants ImagePullFailed within a minute: the manager looks at the Job
// at PullGrace, then a few times more before the minute ends.
const PullGrace = 30 * time.Second

// StopForPull reports whether the manager ends a running Job whose pod
// cannot pull an image (pf): when its generation is older than the
// object's (a fixed image must not wait for the deadline), or once it has
// waited PullGrace since it started. Its pod never ran Terraform (it is
// Pending), so nothing holds the state lock.
func StopForPull(job *batchv1.Job, pf *PullFailure, generation int64, now time.Time) bool {
	if pf == nil {
		return false
	}
	if g, ok := jobs.GenerationOf(job); ok && g < generation {
		return true
	}
	start := job.CreationTimestamp
	if job.Status.StartTime != nil {
		start = *job.Status.StartTime
	}
	return !now.Before(start.Add(PullGrace))
}

// Pulled is the classification of a Job the manager ended because its
// image cannot be pulled.
func Pulled(pf *PullFailure) Run {
	return Run{Outcome: Failed, Kind: ErrorImagePull, Image: pf.Image,
		Summary: bounded(PullMessage(pf), MaxSummary), Document: DocumentUnread}
}

// PullMessage words a pull failure, naming the image.
func PullMessage(pf *PullFailure) string {
	who := "module image"
	if pf.Container == jobs.InitContainerName {
		who = "runner image (--runner-image)"
	}
	msg := fmt.Sprintf("the %s %q cannot be pulled (%s)", who, pf.Image, pf.Reason)
	if pf.Message != "" {
		msg += ": " + pf.Message
	}
	return msg
}
