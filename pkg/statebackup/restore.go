package statebackup

import (
	"slices"
	"strconv"
)

// RestoreReason says why a restore is or is not due (SPEC O5, upstream
// A3-44).
type RestoreReason string

const (
	// RestoreNone: the object carries no captf.io/restore-state.
	RestoreNone RestoreReason = "None"
	// RestoreDone: the value was acted on already (a restore Job started
	// for it, whatever its outcome, or it was refused): a restore runs
	// once per value, and a restart or resync does not run it again.
	RestoreDone RestoreReason = "Done"
	// RestoreNotASerial: the value is not a serial (a decimal number);
	// refused, no Job.
	RestoreNotASerial RestoreReason = "NotASerial"
	// RestoreBackupNotFound: the serial is not among the kept backups
	// (status.stateBackups); refused, no Job.
	RestoreBackupNotFound RestoreReason = "RestoreBackupNotFound"
	// RestoreNotApplied: no apply of the object has finished yet, so its
	// backups are not known (an adoption of a retained state lists them
	// on the first apply): the value waits, neither acted on nor refused.
	RestoreNotApplied RestoreReason = "NotApplied"
	// RestoreBusy: a Job of the object runs: the restore waits for it
	// (never two Jobs on one state).
	RestoreBusy RestoreReason = "Busy"
	// RestoreDue: start the restore Job of Serial.
	RestoreDue RestoreReason = "RestoreDue"
)

// RestoreInput is what the controller gathers for one object.
type RestoreInput struct {
	// Value is the annotation's value; Set is false without the
	// annotation.
	Value string
	Set   bool
	// Observed is status.observedRestore, compared with Value as the
	// caller keeps it (Token).
	Observed string
	// Token is the form of Value kept in status.observedRestore.
	Token string
	// JobSerials are the serials of the object's restore Jobs that
	// exist: a Job for the serial counts as acted on even when the status
	// write that recorded it was lost.
	JobSerials []int64
	// Kept are the serials of status.stateBackups.
	Kept []int64
	// Busy: a Job of the object has not finished.
	Busy bool
	// Applied: an apply of the object has finished (status.lastApply).
	Applied bool
}

// RestoreDecision is whether to start a restore Job now, and of which
// serial; Refused says the value is to be recorded as acted on with no
// Job (RestoreNotASerial, RestoreBackupNotFound).
type RestoreDecision struct {
	Due     bool
	Refused bool
	Reason  RestoreReason
	Serial  int64
}

// DecideRestore decides in's restore: nothing without the annotation or
// for a value acted on; a wait until an apply has finished; a refusal for a value that is not a serial or
// names no kept backup; a wait while a Job runs; else due. A value acted
// on stays so while the annotation keeps it, even when its backup was
// pruned since.
func DecideRestore(in RestoreInput) RestoreDecision {
	if !in.Set {
		return RestoreDecision{Reason: RestoreNone}
	}
	if in.Token == in.Observed {
		return RestoreDecision{Reason: RestoreDone}
	}
	serial, ok := ParseSerial(in.Value)
	if !in.Applied {
		return RestoreDecision{Reason: RestoreNotApplied, Serial: serial}
	}
	if !ok {
		return RestoreDecision{Refused: true, Reason: RestoreNotASerial}
	}
	if slices.Contains(in.JobSerials, serial) {
		return RestoreDecision{Reason: RestoreDone, Serial: serial}
	}
	if !slices.Contains(in.Kept, serial) {
		return RestoreDecision{Refused: true, Reason: RestoreBackupNotFound, Serial: serial}
	}
	if in.Busy {
		return RestoreDecision{Reason: RestoreBusy, Serial: serial}
	}
	return RestoreDecision{Due: true, Reason: RestoreDue, Serial: serial}
}

// ParseSerial reads a serial as the annotation gives it: a decimal
// number of 0 or more without sign or leading zeros (surrounding spaces
// are not trimmed: the value is compared as written).
func ParseSerial(v string) (int64, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != v {
		return 0, false
	}
	return n, true
}
