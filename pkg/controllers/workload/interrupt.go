package workload

import (
	"context"
	"time"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runclass"
)

// SPEC O2 (A3-86): a run whose pod was evicted, preempted, deleted or lost
// with its node is interrupted: retried at once and not counted towards
// the failure backoff. The classification is runclass's, recorded in
// status.lastRun (lastrun.go); this file decides from it, and words the
// reasons of ApplyJobSucceeded it gives (JobInterrupted, ImagePullFailed,
// ImageInvalid).

// maxFreeInterruptions bounds the interruptions of one generation and
// action that are retried at once and not counted: past it an interrupted
// run waits its backoff like a failure, so a pod that something deletes as
// soon as it starts cannot drive a hot loop of Jobs.
const maxFreeInterruptions = 5

// runCount says how a recorded run counts towards the backoff (T7, O2).
type runCount struct {
	// interrupted: the run was interrupted and is retried at once.
	interrupted bool
	// free counts the interrupted attempts of the record's generation up
	// to and including it, which the backoff does not count.
	free int
}

// countRun decides how rec, the newest record of its action, counts: the
// interruptions its Job carries (captf.io/interruptions; none when the Job
// is gone) and rec itself when status.lastRun, which the pass recorded
// before deciding (classifyRuns), says it was interrupted.
func countRun(w *workload, set jobSet, rec *v1alpha1.RunRecord) runCount {
	var before int
	for _, j := range set.all {
		if j.Name == rec.JobName {
			before = jobs.InterruptionsOf(j)
		}
	}
	if !interruptedRun(w.status.LastRun, rec) || before >= maxFreeInterruptions {
		return runCount{free: before}
	}
	return runCount{interrupted: true, free: before + 1}
}

// interruptedRun reports whether l, status.lastRun, records rec's run as
// interrupted (runclass: the pod's DisruptionTarget condition or deletion,
// or the runner stopped by a signal).
func interruptedRun(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord) bool {
	return rec != nil && rec.Outcome == v1alpha1.RunFailed && describes(l, rec) &&
		l.Error != nil && l.Error.Kind == v1alpha1.RunErrorInterrupted
}

// retryAt returns when the next attempt after the failed rec starts: its
// finish time plus the backoff of its attempt less the attempts that were
// interrupted (T7, O2).
func retryAt(rec *v1alpha1.RunRecord, n runCount) time.Time {
	return rec.FinishTime.Add(retryBackoff(max(rec.Attempt-int32(n.free), 1)))
}

// nextInterruptions is the captf.io/interruptions of the next Job of
// generation gen after rec: rec's count for the same generation, none for a
// new one (the count restarts with the generation, T7).
func nextInterruptions(rec *v1alpha1.RunRecord, n runCount, gen int64) int {
	if rec == nil || rec.Generation != gen {
		return 0
	}
	return n.free
}

// classifyRuns records the newest finished Jobs of actions in status
// (T7) and then status.lastRun of the newest record (O1), so the decisions
// of the pass see whether it was interrupted (O2). lastRunStep reads a Job
// once; the call at the end of the pass then finds it done.
func (c *Controller) classifyRuns(ctx context.Context, w *workload, set jobSet, now time.Time, actions ...v1alpha1.JobAction) error {
	for _, a := range actions {
		recordRuns(w, set, a, now)
	}
	return c.lastRunStep(ctx, w)
}

// classifiedReason returns the reason of ApplyJobSucceeded for rec's
// failed run as l, status.lastRun, classifies it (O2): JobInterrupted for
// an interruption retried at once (next is zero), ImagePullFailed,
// ImageInvalid; "" for any other (the action's Failed reason). headline is
// runclass's words, from the redacted record alone (X1).
func classifiedReason(l *v1alpha1.LastRun, rec *v1alpha1.RunRecord, next time.Time) (v1alpha1.ConditionReason, string) {
	if !describes(l, rec) || l.Error == nil {
		return "", ""
	}
	var reason v1alpha1.ConditionReason
	switch l.Error.Kind {
	case v1alpha1.RunErrorInterrupted:
		if next.IsZero() {
			reason = v1alpha1.ReasonJobInterrupted
		}
	case v1alpha1.RunErrorImagePull:
		reason = v1alpha1.ReasonImagePullFailed
	case v1alpha1.RunErrorImageLayout:
		reason = v1alpha1.ReasonImageInvalid
	}
	if reason == "" {
		return "", ""
	}
	return reason, runclass.Headline(l)
}
