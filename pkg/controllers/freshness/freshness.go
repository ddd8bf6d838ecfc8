// Package freshness orders the two events SPEC P1 compares: a workload
// key being added to its queue, and a read of a source Secret beginning. A
// reconcile may use a read that began after its key was last added. The
// order is a process-wide logical clock, not wall time, so two events in
// the same nanosecond (or on a fake clock that does not move) are still
// strictly ordered.
package freshness

import "sync/atomic"

// Stamp is a point on the logical clock; later events have larger stamps.
type Stamp uint64

var clock atomic.Uint64

// Now returns a new stamp, larger than every stamp returned before.
func Now() Stamp { return Stamp(clock.Add(1)) }
