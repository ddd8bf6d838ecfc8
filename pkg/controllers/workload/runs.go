package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
)

// SPEC T7: outcomes are recorded in status (lastApply, lastDestroy), failed
// runs are retried with backoff, captf.io/retry runs once more, and finished
// Jobs are pruned.
const (
	// retryBackoffBase is the wait after a first failed attempt; each
	// further failed attempt of the same generation doubles it.
	retryBackoffBase = time.Minute
	// retryBackoffMax caps the wait.
	retryBackoffMax = 30 * time.Minute
	// keepFinished is how many succeeded, and how many failed, finished
	// Jobs of one object and action pruning keeps.
	keepFinished = 3
	// maxRetryToken is the longest captf.io/retry value kept as it is in
	// status.observedRetry and on the Job; a longer one is kept as a hash.
	maxRetryToken = 128
	// maxRecordedHash is the longest source hash a record keeps (the
	// schema's bound).
	maxRecordedHash = 128
)

// retryBackoff returns how long after the failure of attempt n (from 1)
// the next attempt starts: 1m, 2m, 4m, ... at most 30m (T7).
func retryBackoff(attempt int32) time.Duration {
	d := retryBackoffBase
	for i := int32(1); i < attempt && d < retryBackoffMax; i++ {
		d *= 2
	}
	return min(d, retryBackoffMax)
}

// runPlan says which Job to start.
type runPlan struct {
	// attempt numbers the Job among its action's and generation's (T7).
	attempt int
	// reapply numbers a re-apply on rotation (C6); 0 otherwise.
	reapply int
	// remediation numbers an apply in a row of drift remediations, or, on
	// a drift Job, the row so far (O7); 0 otherwise.
	remediation int
	// retry is the captf.io/retry token the Job acts on, "" when none.
	retry string
	// trigger says why the Job runs its generation's action again after a
	// recorded run (metrics.TriggerBackoff, TriggerAnnotation or
	// TriggerInterrupt), for captf_job_retries_total; "" for a first
	// attempt or a C6 re-apply.
	trigger string
	// interruptions counts the generation's interrupted attempts before
	// the Job (O2), which its backoff will not count.
	interruptions int
	// runner is the ServiceAccount the Job runs as when the caller made
	// sure of it already (T1); "" lets createJob do it.
	runner string
	// restore is the backup a restore Job pushes (O5); nil otherwise.
	restore *jobs.Restore
	// planName and planHash: the approved TerraformPlan an apply applies
	// and its fingerprint (O8); "" for none.
	planName, planHash string
	// guardDeletes: the apply stops before deletions or replacements
	// (O8's destructive guard, A3-64).
	guardDeletes bool
}

// recordOf returns the record of a finished Job; nil while it runs. A Job
// whose finish the Job controller did not time is taken to have finished
// now.
func recordOf(j *batchv1.Job, now time.Time) *v1alpha1.RunRecord {
	if !jobs.Finished(j) {
		return nil
	}
	out, _ := jobs.Status(j)
	outcome := v1alpha1.RunFailed
	switch out {
	case jobs.Succeeded:
		outcome = v1alpha1.RunSucceeded
	case jobs.DeadlineExceeded:
		outcome = v1alpha1.RunDeadlineExceeded
	}
	finish, ok := jobs.FinishTime(j)
	if !ok {
		finish = now
	}
	return runRecord(j, outcome, finish)
}

// runRecord is the record of Job j's run, which ended with outcome at
// finish.
func runRecord(j *batchv1.Job, outcome v1alpha1.RunOutcome, finish time.Time) *v1alpha1.RunRecord {
	gen, _ := jobs.GenerationOf(j)
	hash := jobs.SourceHashOf(j)
	if a := jobs.ActionOf(j); a == v1alpha1.JobActionDrift || a == v1alpha1.JobActionRestore || a == v1alpha1.JobActionPlan {
		// O7, O5, O8: only an apply's hash is compared with the mirror's
		// (C6), and no other record keeps one (X1 allows it where C6
		// needs it).
		hash = ""
	}
	if len(hash) > maxRecordedHash {
		// Not a hash the manager wrote (M4: 64 hex characters); the
		// schema would refuse it.
		hash = ""
	}
	return &v1alpha1.RunRecord{
		Generation: gen,
		SourceHash: hash,
		JobName:    j.Name,
		Outcome:    outcome,
		FinishTime: metav1.NewTime(finish.UTC().Truncate(time.Second)),
		Attempt:    int32(jobs.AttemptOf(j)),
		InputsHash: jobs.InputsHashOf(j),
		// O7: the row of drift remediations the Job was part of.
		DriftRemediation: int32(jobs.DriftRemediationOf(j)),
	}
}

// newerRecord orders records by generation, then attempt, then finish
// time, then Job name.
func newerRecord(a, b *v1alpha1.RunRecord) bool {
	switch {
	case b == nil:
		return true
	case a.Generation != b.Generation:
		return a.Generation > b.Generation
	case a.Attempt != b.Attempt:
		return a.Attempt > b.Attempt
	case !a.FinishTime.Equal(&b.FinishTime):
		return b.FinishTime.Before(&a.FinishTime)
	}
	return a.JobName > b.JobName
}

// statusRecord returns st's field that records action's newest finished
// Job.
func statusRecord(st *v1alpha1.WorkloadStatus, action v1alpha1.JobAction) **v1alpha1.RunRecord {
	switch action {
	case v1alpha1.JobActionDestroy:
		return &st.LastDestroy
	case v1alpha1.JobActionDrift:
		return &st.LastDriftCheck // O7
	case v1alpha1.JobActionRestore:
		return &st.LastRestore // O5
	case v1alpha1.JobActionPlan:
		return &st.LastPlan // O8
	}
	return &st.LastApply
}

// recordRuns records in status the newest finished Job of action in set,
// when it is newer than the record (T7), and returns the record. The
// record, not the Job, is what later passes decide from, so a finished
// Job that disappears never runs again. A Job already recorded is never
// recorded again (its finish time, when taken from the clock, would
// change).
func recordRuns(w *workload, set jobSet, action v1alpha1.JobAction, now time.Time) *v1alpha1.RunRecord {
	slot := statusRecord(w.status, action)
	for _, j := range set.all {
		if jobs.ActionOf(j) != action || (*slot != nil && (*slot).JobName == j.Name) {
			continue
		}
		if r := recordOf(j, now); r != nil && newerRecord(r, *slot) {
			*slot = r
		}
	}
	return *slot
}

// countRecorded counts in captf_job_runs_total each run that written, a
// status this process has just stored, records and that was not recorded
// before: its Job differs from the record in before, the status the write
// replaced (the write carried the cached resourceVersion, so it succeeded
// only when the store held that status), and from the record in last,
// what this process wrote before (nil: nothing), in case a cache lags.
// A record already in status when the manager starts, or a pass that
// finds the same record again, counts nothing; a write that fails counts
// nothing, and the pass that later writes the record counts it (T7).
func countRecorded(written, before, last *v1alpha1.WorkloadStatus) {
	slots := func(st *v1alpha1.WorkloadStatus) [4]*v1alpha1.RunRecord {
		if st == nil {
			return [4]*v1alpha1.RunRecord{}
		}
		return [4]*v1alpha1.RunRecord{st.LastApply, st.LastDestroy, st.LastDriftCheck, st.LastRestore}
	}
	actions := [4]string{metrics.ActionApply, metrics.ActionDestroy, metrics.ActionDrift, metrics.ActionRestore}
	now, was, wrote := slots(written), slots(before), slots(last)
	for i, r := range now {
		if r == nil || sameRun(r, was[i]) || sameRun(r, wrote[i]) {
			continue
		}
		label := outcomeLabel(r.Outcome)
		switch {
		case interruptedRun(written.LastRun, r):
			label = metrics.OutcomeInterrupted // O2: not a failure
		case planChangedRun(written.LastRun, r):
			label = metrics.OutcomePlanChanged // O8: not a failure (A3-69)
		case destructiveRun(written.LastRun, r):
			label = metrics.OutcomeDestructive // O8: not a failure (A3-69)
		}
		metrics.JobRuns.WithLabelValues(actions[i], label).Inc()
	}
}

// sameRun reports whether two records are of one Job. The name says it:
// Job names are deterministic per action, generation and attempt, and a
// recorded Job is never recorded again (its finish time might differ).
func sameRun(a, b *v1alpha1.RunRecord) bool {
	return b != nil && a.JobName == b.JobName
}

// outcomeLabel is a record's outcome as captf_job_runs_total labels it.
func outcomeLabel(o v1alpha1.RunOutcome) string {
	switch o {
	case v1alpha1.RunSucceeded:
		return metrics.OutcomeSucceeded
	case v1alpha1.RunDeadlineExceeded:
		return metrics.OutcomeDeadlineExceeded
	}
	return metrics.OutcomeFailed
}

// actionLabel is a Job's action as the Job metrics label it: apply,
// destroy, or unknown for a Job whose captf.io/action annotation is not
// one the manager writes (a bounded set whatever the annotation says).
func actionLabel(a v1alpha1.JobAction) string {
	switch a {
	case v1alpha1.JobActionApply:
		return metrics.ActionApply
	case v1alpha1.JobActionDestroy:
		return metrics.ActionDestroy
	case v1alpha1.JobActionDrift:
		return metrics.ActionDrift
	case v1alpha1.JobActionRestore:
		return metrics.ActionRestore
	}
	return "unknown"
}

// nextAttempt returns the attempt number of the next Job of action for
// generation gen: one more than any Job of it in set and than its record.
// The count restarts at 1 with a new generation (T7).
func nextAttempt(w *workload, set jobSet, action v1alpha1.JobAction, gen int64) int {
	n := 0
	for _, j := range set.all {
		if g, _ := jobs.GenerationOf(j); jobs.ActionOf(j) == action && g == gen {
			n = max(n, jobs.AttemptOf(j))
		}
	}
	if r := *statusRecord(w.status, action); r != nil && r.Generation == gen {
		n = max(n, int(r.Attempt))
	}
	return n + 1
}

// retryToken is how a captf.io/retry value is kept in status and on the
// Job: as it is, or, when longer than maxRetryToken, as "sha256:" and 32
// hex characters of its hash, so status stays small.
func retryToken(v string) string {
	if len(v) <= maxRetryToken {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// retryRequested returns the token of the object's captf.io/retry value
// and whether it is new: not the value last acted on (status.observedRetry)
// and not the value a Job in set was started for. The latter heals a pass
// that created the retry Job but failed to write status (T7).
func retryRequested(w *workload, set jobSet) (token string, isNew bool) {
	v, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationRetry]
	if !ok || v == "" {
		return "", false
	}
	token = retryToken(v)
	if token == w.status.ObservedRetry {
		return token, false
	}
	for _, j := range set.all {
		if jobs.RetryOf(j) == token {
			w.status.ObservedRetry = token
			return token, false
		}
	}
	return token, true
}

// requeueAt makes the object's key come back at t (the queue runs on the
// controller's clock): a backed-off retry, a drift check, a plan's retry
// or the image-pull check is due. A scheduled look is not a change, so it
// reuses the source read its key's last add allows (P1).
func (c *Controller) requeueAt(w *workload, t, now time.Time) {
	c.queues[w.kind.name].Wake(w.key(), max(t.Sub(now), 0))
}

// reportRecord sets ApplyJobSucceeded from a finished run (J7, T7, O2).
// detail is the Job controller's message when the Job still exists. For a
// failure, next is when the next attempt starts (zero: not decided here).
// status.lastRun, when it describes rec, names an interruption
// (JobInterrupted), an image that cannot be pulled (ImagePullFailed) or
// that holds no module (ImageInvalid) with runclass's headline.
func (c *Controller) reportRecord(w *workload, action v1alpha1.JobAction, rec *v1alpha1.RunRecord, detail string, next, now time.Time) {
	what := fmt.Sprintf("%s Job %s (generation %d, attempt %d)", action, rec.JobName, rec.Generation, rec.Attempt)
	if rec.Outcome == v1alpha1.RunSucceeded {
		reason := v1alpha1.ReasonApplySucceeded
		if action == v1alpha1.JobActionDestroy {
			reason = v1alpha1.ReasonDestroySucceeded
		}
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, reason, "%s succeeded", what)
		return
	}
	if detail != "" {
		detail = ": " + detail
	}
	retry := fmt.Sprintf("set annotation %s to a new value to run it again at once", v1alpha1.AnnotationRetry)
	if !next.IsZero() {
		retry = fmt.Sprintf("a new %s Job starts at %s (backoff %s); %s", action, next.UTC().Format(time.RFC3339), max(next.Sub(rec.FinishTime.Time), 0), retry)
	}
	if rec.Outcome == v1alpha1.RunDeadlineExceeded {
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonJobDeadlineExceeded,
			"%s ran past spec.jobs.activeDeadlineSeconds%s; %s", what, detail, retry)
		return
	}
	if reason, headline := classifiedReason(w.status.LastRun, rec, next); reason != "" {
		status := metav1.ConditionFalse
		if reason == v1alpha1.ReasonJobInterrupted {
			status = metav1.ConditionUnknown
			retry = fmt.Sprintf("not counted as a failure: a new %s Job starts at once", action)
		}
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, status, reason, "%s: %s; %s", what, headline, retry)
		return
	}
	reason := v1alpha1.ReasonApplyFailed
	if action == v1alpha1.JobActionDestroy {
		reason = v1alpha1.ReasonDestroyFailed
	}
	setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, reason, "%s failed%s; see its logs; %s", what, detail, retry)
}

// reportRunning sets ApplyJobSucceeded while set.running runs: from the
// record when the manager ended it (O2: its image cannot be pulled; its
// deletion completes first, J1); as the apply's record says during a drift
// check of the applied generation (O7); as running for the apply of this
// generation; and for any other Job, that it holds the generation's apply
// until it ends.
func (c *Controller) reportRunning(w *workload, set jobSet, rec *v1alpha1.RunRecord, now time.Time) {
	j, gen := set.running, w.obj.GetGeneration()
	g, _ := jobs.GenerationOf(j)
	switch {
	case endedRun(j, rec):
		c.reportRecord(w, v1alpha1.JobActionApply, rec, "", retryAt(rec, countRun(w, set, rec)), now)
	case (runningDrift(set) || runningRestore(set)) && coversGeneration(w, rec):
		var next time.Time
		if rec.Outcome != v1alpha1.RunSucceeded {
			next = retryAt(rec, countRun(w, set, rec))
		}
		c.reportRecord(w, v1alpha1.JobActionApply, rec, detailOf(set, rec), next, now)
	case jobs.ActionOf(j) == v1alpha1.JobActionApply && g == gen:
		c.reportJob(w, j, now)
	case jobs.ActionOf(j) == v1alpha1.JobActionPlan && g == gen:
		// O8: the apply waits for the plan, then for its approval.
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonPlanAwaitingApproval,
			"plan Job %s of generation %d (applyPolicy Manual) is running; its plan then waits for approval", j.Name, g)
	default:
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
			"%s Job %s (generation %d) is running; generation %d is applied after it ends", jobs.ActionOf(j), j.Name, g, gen)
	}
}

// detailOf returns the Job controller's message of the recorded Job when
// it is still in set, "" otherwise.
func detailOf(set jobSet, rec *v1alpha1.RunRecord) string {
	for _, j := range set.all {
		if j.Name == rec.JobName {
			_, msg := jobs.Status(j)
			return msg
		}
	}
	return ""
}
