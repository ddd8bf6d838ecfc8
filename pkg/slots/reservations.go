package slots

import "time"

// Reservations are the starts decided and not yet seen in the Job cache:
// counted as taken slots, so two workers that decide at once never both
// take the last slot. A reservation ends when its Job shows up in the
// cache (the count then has it), when the start fails, or, as a last
// resort against a leak (a Job deleted before the cache saw it), after a
// time to live. It is not safe for concurrent use.
type Reservations[K comparable] struct {
	m map[K]reservation
}

type reservation struct {
	cluster string
	at      time.Time
}

// NewReservations returns an empty set.
func NewReservations[K comparable]() *Reservations[K] {
	return &Reservations[K]{m: map[K]reservation{}}
}

// Len is the number of reservations.
func (r *Reservations[K]) Len() int { return len(r.m) }

// Reserve takes a slot for key's Job under cluster's cap ("" for none).
func (r *Reservations[K]) Reserve(key K, cluster string, now time.Time) {
	r.m[key] = reservation{cluster: cluster, at: now}
}

// Release ends key's reservation; false when it had none.
func (r *Reservations[K]) Release(key K) bool {
	_, ok := r.m[key]
	delete(r.m, key)
	return ok
}

// Expire ends the reservations older than ttl and returns the clusters
// they were under, one entry per reservation.
func (r *Reservations[K]) Expire(now time.Time, ttl time.Duration) (clusters []string) {
	for k, v := range r.m {
		if now.Sub(v.at) > ttl {
			delete(r.m, k)
			clusters = append(clusters, v.cluster)
		}
	}
	return clusters
}

// Active counts the slots taken under a cap: the keys whose Jobs run
// (active, from the cache) and the reservations not among them. With
// cluster "" it counts every reservation (the cluster-wide cap), else
// cluster's.
func (r *Reservations[K]) Active(active map[K]bool, cluster string) int {
	n := len(active)
	for k, v := range r.m {
		if (cluster == "" || v.cluster == cluster) && !active[k] {
			n++
		}
	}
	return n
}
