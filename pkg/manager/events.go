package manager

import (
	"context"

	"k8s.io/client-go/tools/record"
)

// eventCacheEntries bounds each of the three LRU caches of the event
// broadcaster's correlator (its spam filter's per-object token buckets, its
// aggregator's similar-event records, its logger's identical-event counts).
// client-go's default is 4,096 entries each, about 1 KB per event about a
// distinct object across the three: objects that churn through (created,
// reconciled, deleted under new names, each batch's mirror created and
// removed) fill them with entries of gone objects, up to 4 MiB that no
// object's deletion frees, against a heap of 5 to 8 MiB (SPEC B15). With
// 256 the caches cost at most about 0.25 MiB. What is given up: a burst of
// events about more than 256 distinct objects forgets the oldest objects'
// spam budgets and aggregation counts, so an object seen again after that
// gets a fresh budget and a repeated event a new Event instead of a count;
// captf records an event once per change, not per pass (SPEC section 10).
const eventCacheEntries = 256

// newBroadcaster returns the event broadcaster of the manager's recorder,
// its correlator's caches bounded by eventCacheEntries.
func newBroadcaster(ctx context.Context) record.EventBroadcaster {
	return record.NewBroadcaster(record.WithContext(ctx),
		record.WithCorrelatorOptions(record.CorrelatorOptions{LRUCacheSize: eventCacheEntries}))
}
