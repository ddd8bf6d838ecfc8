package drift

import (
	"hash/fnv"
	"time"
)

// DefaultInterval is --drift-default-interval's default (SPEC O7).
const DefaultInterval = 30 * time.Minute

// MaxJitterPercent bounds the jitter: a check is due at most this share of
// the interval after the interval has passed.
const MaxJitterPercent = 10

// MaxRemediations is how many Remediate applies may follow drift checks in
// a row (upstream A3-59: the failed-Job history limit, which captf keeps
// fixed at 3, SPEC T7). A module whose apply does not remove its drift
// then reports it, and stops re-applying.
const MaxRemediations = 3

// Interval is the object's drift interval: own (spec.drift.intervalSeconds)
// when set, else inherited (its cluster's spec.defaults.drift), else def
// (--drift-default-interval). 0 means no drift checks.
func Interval(own, inherited *int32, def time.Duration) time.Duration {
	switch {
	case own != nil:
		return seconds(*own)
	case inherited != nil:
		return seconds(*inherited)
	}
	return max(def, 0)
}

func seconds(s int32) time.Duration { return time.Duration(max(s, 0)) * time.Second }

// Jitter is uid's fixed delay past the interval: an FNV-1a hash of the
// UID, scaled to [0, MaxJitterPercent% of interval). Whole seconds, so the
// schedule reads well in a status and a log.
func Jitter(uid string, interval time.Duration) time.Duration {
	span := int64(interval / time.Second * MaxJitterPercent / 100)
	if span <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(uid))
	return time.Duration(h.Sum64()%uint64(span)) * time.Second
}

// Reason says why a check is or is not due.
type Reason string

const (
	// Off: the interval is 0.
	Off Reason = "Off"
	// NotApplied: no apply has succeeded; there is nothing to compare.
	NotApplied Reason = "NotApplied"
	// Busy: a Job of the object runs; its end is the next run.
	Busy Reason = "Busy"
	// NotDue: the interval (and the jitter) has not passed since the
	// newest run; Decision.Next says when it will.
	NotDue Reason = "NotDue"
	// Due: start the drift Job (upstream's DriftDue).
	Due Reason = "DriftDue"
)

// Input is what the controller gathers for one object.
type Input struct {
	// Interval is [Interval]'s result.
	Interval time.Duration
	// UID is the object's metadata.uid: the seed of its jitter.
	UID string
	// Applied: an apply of the object has succeeded (status.lastApply).
	Applied bool
	// Busy: a Job of the object has not finished.
	Busy bool
	// LastRun is when the newest finished run of the object (apply,
	// destroy or drift) finished.
	LastRun time.Time
}

// Decision is whether to start a drift Job now, and if not, when to look
// again.
type Decision struct {
	Due    bool
	Reason Reason
	// Next is when the check is due, zero when no time makes it due (off,
	// not applied, busy: another event brings the object back).
	Next time.Time
}

// Decide says whether in's drift check is due at now: not while off, not
// applied or busy, and only once LastRun + Interval + Jitter has passed.
func Decide(in Input, now time.Time) Decision {
	switch {
	case in.Interval <= 0:
		return Decision{Reason: Off}
	case !in.Applied:
		return Decision{Reason: NotApplied}
	case in.Busy:
		return Decision{Reason: Busy}
	}
	next := in.LastRun.Add(in.Interval + Jitter(in.UID, in.Interval))
	if now.Before(next) {
		return Decision{Reason: NotDue, Next: next}
	}
	return Decision{Due: true, Reason: Due, Next: next}
}

// Remediate says whether a drift check that found drift starts an apply:
// only under the Remediate action, and only while fewer than
// MaxRemediations applies have followed drift checks in a row.
func Remediate(remediate, found bool, inARow int) bool {
	return remediate && found && inARow < MaxRemediations
}
