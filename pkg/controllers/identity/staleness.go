package identity

import (
	"time"

	"github.com/captf/captf/pkg/metrics"
)

// recordStaleness updates captf_mirror_staleness_seconds: the age of the
// oldest mirror seen stale and not yet seen current again, over every
// identity. stale is the set of identity's namespaces whose mirror is stale
// on this pass; a namespace that stays stale keeps the time it was first
// seen stale, so the gauge measures how long a rotation has been landing.
func (c *Controller) recordStaleness(identity string, stale map[string]bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.staleSince[identity]
	next := map[string]time.Time{}
	for ns := range stale {
		if t, ok := prev[ns]; ok {
			next[ns] = t
		} else {
			next[ns] = now
		}
	}
	if len(next) == 0 {
		delete(c.staleSince, identity)
	} else {
		c.staleSince[identity] = next
	}
	var oldest time.Time
	for _, byNS := range c.staleSince {
		for _, t := range byNS {
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
	}
	if oldest.IsZero() {
		metrics.MirrorStaleness.Set(0)
		return
	}
	metrics.MirrorStaleness.Set(now.Sub(oldest).Seconds())
}
