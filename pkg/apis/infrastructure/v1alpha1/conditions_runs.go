package v1alpha1

// Reasons of RestoreJobSucceeded (SPEC O5, upstream A1-159).
const (
	// ReasonStateRestored: the restore Job pushed the backup and read the
	// state back.
	ReasonStateRestored ConditionReason = "StateRestored"
	// ReasonRestoreFailed: the restore Job failed; it is not retried for
	// the same serial.
	ReasonRestoreFailed ConditionReason = "RestoreFailed"
	// ReasonRestoreBackupNotFound: the annotation names no serial of
	// status.stateBackups (or no serial at all); no Job ran.
	ReasonRestoreBackupNotFound ConditionReason = "RestoreBackupNotFound"
	// ReasonRestoreWaiting: the restore waits for a running Job of the
	// object, or for a Job slot (O4).
	ReasonRestoreWaiting ConditionReason = "RestoreWaiting"
	// ReasonRestoreRunning: the restore Job runs.
	ReasonRestoreRunning ConditionReason = "RestoreRunning"
)

// Reasons of DriftDetected (SPEC O7, upstream A1-163).
const (
	// ReasonNoDrift: the newest drift check found no change to make.
	ReasonNoDrift ConditionReason = "NoDrift"
	// ReasonDriftReported: the newest drift check found changes; they are
	// reported, not applied.
	ReasonDriftReported ConditionReason = "DriftReported"
	// ReasonDriftNotChecked: the newest drift Job did not finish its plan
	// (it failed or ran past its deadline).
	ReasonDriftNotChecked ConditionReason = "DriftNotChecked"
	// ReasonDriftRemediating: the newest drift check found changes and,
	// under action Remediate, an apply puts them back.
	ReasonDriftRemediating ConditionReason = "DriftRemediating"
)
