// Package metrics defines captf's own Prometheus metrics (SPEC section 13),
// registered in component-base's legacy registry beside the client-go,
// workqueue and leader-election metrics that `captf manager` serves on
// --metrics-bind-address. No label ever carries a Secret value or a hash
// (SPEC X1): labels are results and reasons from fixed sets.
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

var registerOnce sync.Once

// Register registers the metrics once; safe to call from every constructor.
func Register() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(MirrorWrites, SourceReads, IdentityDenied, MirrorStaleness, APIRequests,
			SourceWatches, SourceWatchErrors, SourceChanges)
	})
}
