package slots

// Class is a Job's priority: a lower class gets a free slot first.
type Class int

const (
	// Destroy is a deleting object's destroy Job: the infrastructure it
	// removes frees what the others wait for, and a deletion should not
	// wait behind a herd of applies.
	Destroy Class = iota
	// Apply is an apply Job for a spec change or a first apply, and its
	// retries and re-applies (rotation, changed inputs).
	Apply
	// Background is a drift detection or a refresh: it starts only while
	// fewer than BackgroundPercent percent of a cap's slots are taken, so
	// it never fills the slots spec changes and destroys need.
	Background
)

// Classes lists every class in priority order.
var Classes = []Class{Destroy, Apply, Background}

// String is the class's name in metrics and messages.
func (c Class) String() string {
	switch c {
	case Destroy:
		return "destroy"
	case Apply:
		return "apply"
	case Background:
		return "background"
	}
	return "unknown"
}

// BackgroundPercent: a Background Job starts only while fewer than this
// share of a cap's slots are taken (SPEC O4: "below 80% of the cap").
const BackgroundPercent = 80

// Scope names a cap.
type Scope int

const (
	// NoScope: no cap holds the Job.
	NoScope Scope = iota
	// Global is --max-active-jobs, over every Job of the manager.
	Global
	// Cluster is a cluster's spec.maxActiveJobs (default
	// --cluster-max-active-jobs), over the Jobs of a TerraformCluster and
	// of its machines and pools.
	Cluster
)

// Scopes lists the caps.
var Scopes = []Scope{Global, Cluster}

// String is the scope's name in metrics.
func (s Scope) String() string {
	switch s {
	case Global:
		return "global"
	case Cluster:
		return "cluster"
	}
	return "none"
}

// Hold says why a cap keeps a Job from starting.
type Hold int

const (
	// NotHeld: the cap has a slot for the Job.
	NotHeld Hold = iota
	// Full: every slot of the cap is taken.
	Full
	// Yield: slots are free, but at least as many waiters go first.
	Yield
	// Reserved: a Background Job, and BackgroundPercent of the slots or
	// more are taken.
	Reserved
)

// Cap is one cap as gathered for a request.
type Cap struct {
	// Limit: at most this many Jobs run under the cap; 0 or less is no cap.
	Limit int
	// Active counts the Jobs under the cap that have not finished (a
	// suspended Job the manager is starting too) and the starts reserved
	// but not yet in the Job cache.
	Active int
	// Ahead counts the waiters under the cap that go before the request
	// (Waiters.Ahead).
	Ahead int
}

// Free is how many slots of c are not taken; -1 when c is no cap.
func (c Cap) Free() int {
	if c.Limit <= 0 {
		return -1
	}
	return max(c.Limit-c.Active, 0)
}

// Request is a Job about to start, with the caps it is under.
type Request struct {
	Class   Class
	Global  Cap
	Cluster Cap
}

// Decision is whether the Job starts, and if not, which cap holds it.
type Decision struct {
	Start bool
	// Scope is the cap that holds the Job (NoScope when it starts).
	Scope Scope
	// Hold is why.
	Hold Hold
}

// Decide says whether the Job of r starts now. It starts when each cap
// has a slot for it: the cap is not full, fewer waiters go before it than
// slots are free, and, for a Background Job, fewer than BackgroundPercent
// percent of the slots are taken. When both caps hold it, the one that is
// full is named, the cluster's first: its owner can raise it.
func Decide(r Request) Decision {
	cl, gl := hold(r.Class, r.Cluster), hold(r.Class, r.Global)
	switch {
	case cl == Full:
		return Decision{Scope: Cluster, Hold: cl}
	case gl == Full:
		return Decision{Scope: Global, Hold: gl}
	case cl != NotHeld:
		return Decision{Scope: Cluster, Hold: cl}
	case gl != NotHeld:
		return Decision{Scope: Global, Hold: gl}
	}
	return Decision{Start: true}
}

func hold(class Class, c Cap) Hold {
	if c.Limit <= 0 {
		return NotHeld
	}
	if c.Active >= c.Limit {
		return Full
	}
	if class == Background && c.Active*100 >= c.Limit*BackgroundPercent {
		return Reserved
	}
	if c.Ahead >= c.Limit-c.Active {
		return Yield
	}
	return NotHeld
}
