package drift

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

// O7: the interval's sources, in order; 0 is off, negatives read as off.
func TestInterval(t *testing.T) {
	for _, tc := range []struct {
		name           string
		own, inherited *int32
		def, want      time.Duration
	}{
		{"flag default", nil, nil, DefaultInterval, DefaultInterval},
		{"own wins", ptr.To[int32](60), ptr.To[int32](120), DefaultInterval, time.Minute},
		{"own 0 is off, over an inherited value", ptr.To[int32](0), ptr.To[int32](120), DefaultInterval, 0},
		{"inherited over the flag", nil, ptr.To[int32](120), DefaultInterval, 2 * time.Minute},
		{"inherited 0 is off", nil, ptr.To[int32](0), DefaultInterval, 0},
		{"flag 0 is off", nil, nil, 0, 0},
		{"negative flag is off", nil, nil, -time.Second, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Interval(tc.own, tc.inherited, tc.def))
		})
	}
}

// O7: the jitter is fixed per UID, below MaxJitterPercent of the interval,
// and spreads objects.
func TestJitter(t *testing.T) {
	const interval = 30 * time.Minute
	bound := interval * MaxJitterPercent / 100
	seen := map[time.Duration]bool{}
	for i := range 1000 {
		uid := fmt.Sprintf("uid-%d", i)
		j := Jitter(uid, interval)
		require.GreaterOrEqual(t, j, time.Duration(0))
		require.Less(t, j, bound)
		require.Equal(t, j, Jitter(uid, interval), "the same UID must get the same jitter")
		seen[j] = true
	}
	// 1,000 UIDs over 180 one-second slots: a hash that spreads fills most.
	require.Greater(t, len(seen), 150, "the jitter does not spread objects")
	require.Zero(t, Jitter("u", 5*time.Second), "an interval under 10s has no whole second of jitter")
	require.Zero(t, Jitter("u", 0))
}

// O7: the decision table, row by row.
func TestDecide(t *testing.T) {
	const interval = 30 * time.Minute
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	uid := "0b7e1a4e-0000-4000-8000-000000000001"
	due := last.Add(interval + Jitter(uid, interval))
	in := func(mod func(*Input)) Input {
		i := Input{Interval: interval, UID: uid, Applied: true, LastRun: last}
		if mod != nil {
			mod(&i)
		}
		return i
	}
	for _, tc := range []struct {
		name string
		in   Input
		now  time.Time
		want Decision
	}{
		{"off", in(func(i *Input) { i.Interval = 0 }), due.Add(time.Hour), Decision{Reason: Off}},
		{"not applied", in(func(i *Input) { i.Applied = false }), due.Add(time.Hour), Decision{Reason: NotApplied}},
		{"a Job runs", in(func(i *Input) { i.Busy = true }), due.Add(time.Hour), Decision{Reason: Busy}},
		{"just after the last run", in(nil), last.Add(time.Second), Decision{Reason: NotDue, Next: due}},
		{"at the interval, before the jitter", in(nil), last.Add(interval), Decision{Reason: NotDue, Next: due}},
		{"one second before due", in(nil), due.Add(-time.Second), Decision{Reason: NotDue, Next: due}},
		{"due", in(nil), due, Decision{Due: true, Reason: Due, Next: due}},
		{"long overdue", in(nil), due.Add(24 * time.Hour), Decision{Due: true, Reason: Due, Next: due}},
		{"a newer run moves it", in(func(i *Input) { i.LastRun = due }), due, Decision{Reason: NotDue, Next: due.Add(interval + Jitter(uid, interval))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Decide(tc.in, tc.now))
		})
	}
	require.Greater(t, due, last.Add(interval-time.Nanosecond), "never due before the interval")
}

// O7 (A3-59): Remediate applies after drift, at most MaxRemediations in a
// row.
func TestRemediate(t *testing.T) {
	for _, tc := range []struct {
		remediate, found bool
		inARow           int
		want             bool
	}{
		{false, true, 0, false},
		{true, false, 0, false},
		{true, true, 0, true},
		{true, true, MaxRemediations - 1, true},
		{true, true, MaxRemediations, false},
		{true, true, MaxRemediations + 5, false},
	} {
		t.Run(fmt.Sprintf("%v/%v/%d", tc.remediate, tc.found, tc.inARow), func(t *testing.T) {
			require.Equal(t, tc.want, Remediate(tc.remediate, tc.found, tc.inARow))
		})
	}
}
