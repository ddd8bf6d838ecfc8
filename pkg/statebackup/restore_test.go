package statebackup

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDecideRestore: SPEC O5 (A3-44), row by row: once per value, a
// refusal for a value that names no kept backup or no serial, a wait
// while a Job runs.
func TestDecideRestore(t *testing.T) {
	kept := []int64{7, 6, 5}
	for _, tc := range []struct {
		name string
		in   RestoreInput
		want RestoreDecision
	}{
		{"no annotation", RestoreInput{Applied: true, Kept: kept}, RestoreDecision{Reason: RestoreNone}},
		{"no annotation, one acted on before", RestoreInput{Applied: true, Observed: "6", Kept: kept}, RestoreDecision{Reason: RestoreNone}},
		{"kept serial", RestoreInput{Applied: true, Value: "6", Set: true, Token: "6", Kept: kept}, RestoreDecision{Due: true, Reason: RestoreDue, Serial: 6}},
		{"serial 0 kept", RestoreInput{Applied: true, Value: "0", Set: true, Token: "0", Kept: []int64{0}}, RestoreDecision{Due: true, Reason: RestoreDue, Serial: 0}},
		{"acted on: a restart or resync", RestoreInput{Applied: true, Value: "6", Set: true, Token: "6", Observed: "6", Kept: kept}, RestoreDecision{Reason: RestoreDone}},
		{"acted on, backup pruned since", RestoreInput{Applied: true, Value: "2", Set: true, Token: "2", Observed: "2", Kept: kept}, RestoreDecision{Reason: RestoreDone}},
		{"refused before: not again", RestoreInput{Applied: true, Value: "9", Set: true, Token: "9", Observed: "9", Kept: kept}, RestoreDecision{Reason: RestoreDone}},
		{"a Job of the serial exists: write lost", RestoreInput{Applied: true, Value: "6", Set: true, Token: "6", JobSerials: []int64{6}, Kept: kept}, RestoreDecision{Reason: RestoreDone, Serial: 6}},
		{"a Job of another serial", RestoreInput{Applied: true, Value: "6", Set: true, Token: "6", Observed: "5", JobSerials: []int64{5}, Kept: kept}, RestoreDecision{Due: true, Reason: RestoreDue, Serial: 6}},
		{"not kept", RestoreInput{Applied: true, Value: "9", Set: true, Token: "9", Kept: kept}, RestoreDecision{Refused: true, Reason: RestoreBackupNotFound, Serial: 9}},
		{"no backups", RestoreInput{Applied: true, Value: "1", Set: true, Token: "1"}, RestoreDecision{Refused: true, Reason: RestoreBackupNotFound, Serial: 1}},
		{"empty value", RestoreInput{Applied: true, Value: "", Set: true, Token: "", Observed: "x", Kept: kept}, RestoreDecision{Refused: true, Reason: RestoreNotASerial}},
		{"not a number", RestoreInput{Applied: true, Value: "latest", Set: true, Token: "latest", Kept: kept}, RestoreDecision{Refused: true, Reason: RestoreNotASerial}},
		{"leading zero", RestoreInput{Applied: true, Value: "06", Set: true, Token: "06", Kept: kept}, RestoreDecision{Refused: true, Reason: RestoreNotASerial}},
		{"negative", RestoreInput{Applied: true, Value: "-6", Set: true, Token: "-6", Kept: kept}, RestoreDecision{Refused: true, Reason: RestoreNotASerial}},
		{"busy", RestoreInput{Applied: true, Value: "6", Set: true, Token: "6", Kept: kept, Busy: true}, RestoreDecision{Reason: RestoreBusy, Serial: 6}},
		{"never applied: waits, not refused", RestoreInput{Value: "6", Set: true, Token: "6"}, RestoreDecision{Reason: RestoreNotApplied, Serial: 6}},
		{"never applied, not a serial: waits", RestoreInput{Value: "x", Set: true, Token: "x"}, RestoreDecision{Reason: RestoreNotApplied}},
		{"busy, not kept: refused at once", RestoreInput{Applied: true, Value: "9", Set: true, Token: "9", Kept: kept, Busy: true}, RestoreDecision{Refused: true, Reason: RestoreBackupNotFound, Serial: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, DecideRestore(tc.in))
		})
	}
}
