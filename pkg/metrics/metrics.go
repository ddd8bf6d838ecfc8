// Package metrics defines captf's own Prometheus metrics (SPEC section 13),
// registered in component-base's legacy registry beside the client-go,
// workqueue and leader-election metrics that `captf manager` serves on
// --metrics-bind-address. No label ever carries a Secret value or a hash
// (SPEC X1): labels are results, reasons, Job actions, outcomes and retry
// triggers from fixed sets, never an object, namespace or identity name.
package metrics

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Results of a mirror write.
const (
	WriteCreated  = "created"
	WriteUpdated  = "updated"
	WriteDeleted  = "deleted"
	WriteConflict = "conflict" // an optimistic-concurrency conflict, retried from a fresh read
	WriteRefused  = "refused"  // a foreign Secret holds the name (M7): never written
	WriteError    = "error"
)

// Results of a source read.
const (
	ReadFound    = "found"
	ReadNotFound = "not_found"
	ReadError    = "error"
)

var (
	// MirrorWrites counts writes to mirror Secrets by result.
	MirrorWrites = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "captf_mirror_writes_total",
		Help:           "Writes to mirror Secrets by result: created, updated, deleted, conflict (retried), refused (a foreign Secret holds the name), error.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// SourceReads counts uncached reads of source Secrets by result.
	SourceReads = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "captf_source_reads_total",
		Help:           "Uncached GETs of identities' source Secrets by result: found, not_found, error. Concurrent reconciles share one read.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// IdentityDenied counts reconciles that found a workload object's
	// identity unusable, by the IdentityAllowed reason.
	IdentityDenied = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "captf_identity_denied_total",
		Help:           "Reconciles where a workload object's identity could not be used, by reason (IdentityNotFound, NamespaceNotAllowed, SecretNotFound, ...).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	// MirrorStaleness is the age of the oldest mirror known to differ from
	// its source.
	MirrorStaleness = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "captf_mirror_staleness_seconds",
		Help:           "Seconds since the oldest mirror that differs from its source Secret was first seen stale; 0 when every mirror is current.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Source watches (SPEC P2). No label: the sources are named by tenants.
var (
	// SourceWatches is the number of source Secrets watched.
	SourceWatches = metrics.NewGauge(&metrics.GaugeOpts{
		Name:           "captf_source_watches",
		Help:           "Source Secrets the manager watches by name (one watch per distinct spec.secretRef of the identities; leader only).",
		StabilityLevel: metrics.ALPHA,
	})

	// SourceWatchErrors counts failed lists and watches of source Secrets.
	SourceWatchErrors = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "captf_source_watch_errors_total",
		Help:           "Failed lists or watches of source Secrets; each is retried with backoff, and --sync-period and --identity-resync bound rotation meanwhile.",
		StabilityLevel: metrics.ALPHA,
	})

	// SourceChanges counts source changes a watch saw.
	SourceChanges = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "captf_source_changes_total",
		Help:           "Changes of watched source Secrets (data, type, consent or mirrored label; creation; deletion), each enqueueing the users of the identities naming the source.",
		StabilityLevel: metrics.ALPHA,
	})
)

// Terraform Job runs (SPEC T7). Labels come from fixed sets: the action,
// the outcome, the trigger. No object, namespace or identity is named (a
// tenant's object count would become the series count); the Job names are
// in the objects' status.lastApply and status.lastDestroy.
const (
	// Actions of a Job.
	ActionApply   = "apply"
	ActionDestroy = "destroy"
	// ActionDrift is a drift check (SPEC O7).
	ActionDrift = "drift"
	// ActionRestore is a state restore (SPEC O5).
	ActionRestore = "restore"

	// Outcomes of a recorded run (status.lastApply.outcome and
	// status.lastDestroy.outcome, in snake case).
	OutcomeSucceeded        = "succeeded"
	OutcomeFailed           = "failed"
	OutcomeDeadlineExceeded = "deadline_exceeded"
	// OutcomeInterrupted: a Failed record whose run was interrupted
	// (status.lastRun.error.kind interrupted, SPEC O2): not a failure.
	OutcomeInterrupted = "interrupted"
	// OutcomePlanChanged: a Failed apply record whose run found another
	// plan than the approved one and applied nothing
	// (status.lastRun.error.kind plan-changed, SPEC O8): not a failure
	// (upstream A3-69: no alert).
	OutcomePlanChanged = "plan_changed"
	// OutcomeDestructive: a Failed apply record whose guarded run planned
	// deletions or replacements and applied nothing
	// (status.lastRun.error.kind destructive, SPEC O8): not a failure.
	OutcomeDestructive = "destructive"

	// Why a retry Job started.
	TriggerBackoff    = "backoff"     // the failed run's backoff (1m doubling to 30m) ended
	TriggerAnnotation = "annotation"  // a new value of captf.io/retry
	TriggerInterrupt  = "interrupted" // the run was interrupted: retried at once (SPEC O2)
)

var (
	// JobRuns counts run outcomes this manager recorded in status.
	JobRuns = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "captf_job_runs_total",
		Help: "Finished apply, destroy, drift and restore Jobs whose outcome this manager process recorded in status.lastApply, status.lastDestroy, status.lastDriftCheck or status.lastRestore, by action (apply, destroy, drift, restore) and outcome (succeeded, failed, deadline_exceeded, interrupted: the pod was evicted, preempted, deleted or lost, not a failure). " +
			"Counted once, when the status write that records the run succeeds; a record already in status when the manager starts is not counted again.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "outcome"})

	// JobRetries counts retry Jobs created.
	JobRetries = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "captf_job_retries_total",
		Help: "Jobs this manager created to run a generation's apply, or a pending destroy, again after a recorded run, by action (apply, destroy) and trigger: " +
			"backoff (the failed run's backoff ended), annotation (a new captf.io/retry value) or interrupted (the run was interrupted: retried at once). Re-applies on rotation and first attempts of a generation are not retries.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action", "trigger"})

	// JobsPruned counts finished Jobs pruned.
	JobsPruned = metrics.NewCounterVec(&metrics.CounterOpts{
		Name:           "captf_jobs_pruned_total",
		Help:           "Finished Jobs this manager deleted beyond the newest 3 succeeded and 3 failed per object and action, by action (apply, destroy).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"action"})

	// ForceUnlocks counts state locks released because a finished Job of
	// the object held them (SPEC O3; upstream A7-48's name).
	ForceUnlocks = metrics.NewCounter(&metrics.CounterOpts{
		Name:           "captf_lock_force_unlocks_total",
		Help:           "State locks this manager released before a Job because a finished Job of the same object held them (its pod was killed while Terraform held the lock).",
		StabilityLevel: metrics.ALPHA,
	})

	// StateBackups counts state backups written and pruned (SPEC O5,
	// upstream A7-42).
	StateBackups = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "captf_state_backups_total",
		Help: "State backup Secrets this manager wrote for a new state serial (result created) and deleted beyond --state-backups (result pruned), " +
			"counting a split state's backup once; skipped counts backups not made because the state changed since it was read or a Secret that is not a backup holds the name.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})

	// StateRestores counts the captf.io/restore-state requests this
	// manager saw end (SPEC O5, upstream A7-42).
	StateRestores = metrics.NewCounterVec(&metrics.CounterOpts{
		Name: "captf_state_restores_total",
		Help: "State restores (annotation captf.io/restore-state) this manager recorded, by result: succeeded and failed (the restore Job's outcome, recorded in status.lastRestore), " +
			"refused (the value names no kept backup, status.stateBackups, or is not a serial: no Job ran). Counted once, when the status write that records it succeeds.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"result"})
)

// Results of captf_state_restores_total.
const (
	RestoreSucceeded = "succeeded"
	RestoreFailed    = "failed"
	RestoreRefused   = "refused"
)

// Results of captf_state_backups_total.
const (
	BackupCreated = "created"
	BackupPruned  = "pruned"
	BackupSkipped = "skipped"
)

var registerOnce sync.Once

// all are the metrics Register registers. None has a label whose values
// follow objects (SPEC B15): a series per object, namespace or identity
// would outlive its object unless every deletion path forgot it, so the
// labels are fixed sets (TestNoLabelFollowsObjects).
var all = []metrics.Registerable{MirrorWrites, SourceReads, IdentityDenied, MirrorStaleness, APIRequests,
	SourceWatches, SourceWatchErrors, SourceChanges, JobRuns, JobRetries, JobsPruned, ForceUnlocks, StateBackups, StateRestores}

// Register registers the metrics once; safe to call from every constructor.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(all...)
		// Every series of the Job counters exists from the start at 0, so
		// a rate or a ratio (failed over all runs) has both sides before
		// the first failure.
		for _, action := range []string{ActionApply, ActionDestroy, ActionDrift, ActionRestore} {
			for _, outcome := range []string{OutcomeSucceeded, OutcomeFailed, OutcomeDeadlineExceeded, OutcomeInterrupted} {
				JobRuns.WithLabelValues(action, outcome)
			}
			if action == ActionApply { // only an apply applies an approved plan (O8)
				JobRuns.WithLabelValues(action, OutcomePlanChanged)
				JobRuns.WithLabelValues(action, OutcomeDestructive)
			}
			if action != ActionDrift && action != ActionRestore { // never retried (O7, O5)
				for _, trigger := range []string{TriggerBackoff, TriggerAnnotation, TriggerInterrupt} {
					JobRetries.WithLabelValues(action, trigger)
				}
			}
			JobsPruned.WithLabelValues(action)
		}
		for _, result := range []string{BackupCreated, BackupPruned, BackupSkipped} {
			StateBackups.WithLabelValues(result)
		}
		for _, result := range []string{RestoreSucceeded, RestoreFailed, RestoreRefused} {
			StateRestores.WithLabelValues(result)
		}
		registerSlots()
	})
}
