// Package workload is the shared reconcile of TerraformCluster,
// TerraformMachine and TerraformMachinePool: one reconcile, three thin
// adapters (kinds.go), one queue per kind.
//
// On every pass of a non-deleting object (SPEC M6) it resolves the identity
// (I1-I3), releases mirrors of an identity the object no longer uses (V4),
// checks the namespace (N1-N6) and revokes when it is not allowed (V1), reads
// the source Secret uncached, writes the namespace's mirror only when
// something differs (M2-M8) with one request: an update is a patch
// preconditioned on the cached resourceVersion, re-planned from an uncached
// read on a Conflict (P3, mirror.go), and starts the apply Job for an unapplied
// generation once credentials are ready (J1-J5, J7). When status.lastApply
// records a successful apply that the last read did not follow (T7: the
// record, not the Job cache), it reads the state once, uncached, and
// publishes its outputs (T4, outputs.go, decoding in pkg/tfstate) and marks
// the object provisioned (T5). A deleting object with
// the finalizer gets a current mirror and a destroy Job, then cleanup (J8,
// V2, V3). Conditions and events are those of SPEC section 10.
//
// T7 (runs.go): finished Jobs are recorded in status.lastApply and
// status.lastDestroy, and decisions come from those records, so a finished
// Job that disappears never runs its generation again; failed runs are
// retried after 1m doubling to 30m; a new captf.io/retry value runs once
// more at once (status.observedRetry); finished Jobs are pruned to the
// newest 3 succeeded and 3 failed per action, from the cache.
//
// O1, O6 (lastrun.go): once per recorded Job, the Job's own pod is read
// uncached and its termination message (the runner's result document)
// becomes status.lastRun, with RunFinished and PlanSummary events; a
// successful apply's pod imageID pins status.source.imageDigest, which a
// machine's later Jobs run by digest (decisions in pkg/runclass).
//
// Event handlers only map events to keys: an identity change reaches exactly
// its users (I4), a namespace relabel the objects in it (N5), a mirror event
// its owners (M8), a Job event its controller. A resync ticker re-enqueues
// every object once per --sync-period (R2).
package workload
