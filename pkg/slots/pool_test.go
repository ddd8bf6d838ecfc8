package slots

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeCache is the Job cache as the Pool sees it: the keys whose Jobs run,
// with their cluster.
type fakeCache struct {
	mu  sync.Mutex
	run map[string]string
}

func (c *fakeCache) active(cluster string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for k, cl := range c.run {
		if cluster == "" || cl == cluster {
			out[k] = true
		}
	}
	return out
}

func (c *fakeCache) set(key, cluster string, running bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if running {
		c.run[key] = cluster
	} else {
		delete(c.run, key)
	}
}

// O4: many workers deciding at once never take more slots than the cap:
// each start is reserved under the same lock as its count, until its Job
// is in the cache.
func TestPoolConcurrentTakes(t *testing.T) {
	cache := &fakeCache{run: map[string]string{"old-1": "a", "old-2": ""}}
	var mu sync.Mutex
	var woken []string
	p := NewPool(Config[string]{
		GlobalLimit:  5,
		ClusterLimit: func(string) int { return 2 },
		Active:       cache.active,
		Wake:         func(k []string) { mu.Lock(); woken = append(woken, k...); mu.Unlock() },
		TTL:          time.Minute,
	})
	var started sync.Map
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			key := fmt.Sprintf("k-%02d", i)
			cluster := []string{"a", "b", ""}[i%3]
			if o := p.Take(Ask[string]{Key: key, Class: Apply, Cluster: cluster}, t0); o.Start {
				started.Store(key, cluster)
			}
		})
	}
	wg.Wait()
	var got []string
	perCluster := map[string]int{"a": 1}
	started.Range(func(k, v any) bool {
		got = append(got, k.(string))
		perCluster[v.(string)]++
		return true
	})
	require.Len(t, got, 3, "5 slots, 2 taken by Jobs in the cache: %v", got)
	require.LessOrEqual(t, perCluster["a"], 2, "cluster a's cap")
	require.LessOrEqual(t, perCluster["b"], 2, "cluster b's cap")
	require.Equal(t, 3, p.Reserved())
	require.Equal(t, 61, p.waiters.Len())

	// The started Jobs show up in the cache: the reservations end and the
	// count stays the same, so nobody else starts.
	for _, k := range got {
		cl, _ := started.Load(k)
		cache.set(k, cl.(string), true)
		p.Seen(k)
	}
	require.Zero(t, p.Reserved())
	o := p.Take(Ask[string]{Key: "late", Class: Destroy}, t0.Add(time.Second))
	require.False(t, o.Start)
	require.Equal(t, Decision{Scope: Global, Hold: Full}, o.Decision)
	require.Equal(t, 5, o.Limit)

	// A Job finishing wakes exactly as many waiters as slots are free, the
	// destroy first.
	cache.set("old-2", "", false)
	p.Freed("", t0.Add(2*time.Second))
	require.Equal(t, []string{"late"}, woken)
}

// O4: a reservation whose Job never shows in the cache ends after the TTL,
// and one whose start failed at once; each wakes the next waiter.
func TestPoolReservationsDoNotLeak(t *testing.T) {
	cache := &fakeCache{run: map[string]string{}}
	var woken []string
	p := NewPool(Config[string]{
		GlobalLimit:  1,
		ClusterLimit: func(string) int { return 0 },
		Active:       cache.active,
		Wake:         func(k []string) { woken = append(woken, k...) },
		TTL:          time.Minute,
	})
	require.True(t, p.Take(Ask[string]{Key: "x", Class: Apply}, t0).Start)
	require.False(t, p.Take(Ask[string]{Key: "y", Class: Apply}, t0).Start)
	p.Release("x", "", t0)
	require.Equal(t, []string{"y"}, woken)
	require.True(t, p.Take(Ask[string]{Key: "y", Class: Apply}, t0).Start)
	require.False(t, p.Waiting("y"))
	require.False(t, p.Take(Ask[string]{Key: "z", Class: Apply}, t0.Add(59*time.Second)).Start)
	woken = nil
	// y's Job never appears: a minute later its slot is free again.
	o := p.Peek(Ask[string]{Key: "z", Class: Apply}, t0.Add(61*time.Second))
	require.True(t, o.Start)
	require.Equal(t, []string{"z"}, woken, "the expiry wakes the next waiter")
	require.Equal(t, t0.Add(59*time.Second), o.Since)
	require.True(t, p.Waiting("z"), "Peek reserves nothing and keeps the place")
	require.Zero(t, p.Reserved())
	// Forget moves the waiters up.
	require.True(t, p.Take(Ask[string]{Key: "z", Class: Apply}, t0.Add(62*time.Second)).Start)
	require.False(t, p.Take(Ask[string]{Key: "w", Class: Apply}, t0.Add(63*time.Second)).Start)
	require.False(t, p.Take(Ask[string]{Key: "v", Class: Apply}, t0.Add(64*time.Second)).Start)
	p.Release("z", "", t0.Add(65*time.Second))
	woken = nil
	p.Forget("w", t0.Add(66*time.Second))
	require.Equal(t, []string{"v"}, woken)
}

type countingObserver struct {
	waiting map[[2]int]int
	began   int
	ended   []time.Duration
}

func (o *countingObserver) Waiting(c Class, s Scope, n int) { o.waiting[[2]int{int(c), int(s)}] = n }
func (o *countingObserver) WaitBegan(Class, Scope)          { o.began++ }
func (o *countingObserver) WaitEnded(_ Class, d time.Duration) {
	o.ended = append(o.ended, d)
}

// O4 as the controller runs it: objects become due (applies, and destroys
// of objects deleted meanwhile), each asks when its key is processed,
// Jobs show in the cache late and finish in any order. Throughout, the
// slots taken never exceed a cap; an apply starts only when fewer
// destroys wait than slots are free; every Job runs in the end, and no
// wait or reservation is left.
func TestPoolSimulation(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { simulate(t, seed) })
	}
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	const global = 5
	limits := map[string]int{"a": 2, "b": 3, "c": 0}
	clusters := []string{"a", "b", "c", ""}
	cache := &fakeCache{run: map[string]string{}}
	var queue []string
	enqueue := func(keys ...string) {
		for _, k := range keys {
			if !slices.Contains(queue, k) {
				queue = append(queue, k)
			}
		}
	}
	obs := &countingObserver{waiting: map[[2]int]int{}}
	p := NewPool(Config[string]{
		GlobalLimit:  global,
		ClusterLimit: func(c string) int { return limits[c] },
		Active:       cache.active,
		Wake:         func(k []string) { enqueue(k...) },
		TTL:          time.Hour,
		Observer:     obs,
	})
	type object struct {
		cluster string
		class   Class
		due     bool
	}
	objects := map[string]*object{}
	var pending []string // created, not yet in the cache
	now := t0
	ran := 0
	check := func() {
		for _, cl := range append(clusters[:3:3], "") {
			limit := global
			if cl != "" {
				limit = limits[cl]
			}
			if limit == 0 {
				continue
			}
			require.LessOrEqual(t, p.reserved.Active(cache.active(cl), cl), limit, "cap of %q", cl)
		}
	}
	process := func() {
		k := queue[0]
		queue = queue[1:]
		o := objects[k]
		if !o.due {
			p.Forget(k, now)
			return
		}
		a := Ask[string]{Key: k, Class: o.class, Cluster: o.cluster}
		if !p.Peek(a, now).Start {
			return
		}
		destroys := p.waiters.Count(Destroy, Global)
		free := Cap{Limit: global, Active: p.reserved.Active(cache.active(""), "")}.Free()
		if p.Take(a, now).Start {
			if o.class == Apply {
				require.Less(t, destroys, free, "an apply started while as many destroys waited as slots were free")
			}
			o.due = false
			pending = append(pending, k)
			ran++
		}
	}
	total := 0
	for step := 0; step < 2000 || len(queue) > 0 || len(pending) > 0 || len(cache.run) > 0; step++ {
		now = now.Add(time.Duration(rng.IntN(3)) * time.Second)
		switch r := rng.IntN(10); {
		case r < 2 && step < 2000:
			k := fmt.Sprintf("o-%d", len(objects))
			objects[k] = &object{cluster: clusters[rng.IntN(len(clusters))], class: Apply, due: true}
			total++
			enqueue(k)
		case r < 3 && step < 2000:
			// A due apply's object is deleted: it needs a destroy now.
			for k, o := range objects {
				if o.due && o.class == Apply {
					o.class = Destroy
					enqueue(k)
					break
				}
			}
		case r < 4 && step < 2000:
			// An object's Job is no longer due (paused, say).
			for k, o := range objects {
				if o.due && rng.IntN(4) == 0 {
					o.due = false
					total--
					enqueue(k)
					break
				}
			}
		case r < 6 && len(pending) > 0:
			i := rng.IntN(len(pending))
			k := pending[i]
			pending = slices.Delete(pending, i, i+1)
			cache.set(k, objects[k].cluster, true)
			p.Seen(k)
		case r < 8 && len(cache.run) > 0:
			for k, cl := range cache.run {
				cache.set(k, cl, false)
				p.Freed(cl, now)
				break
			}
		case len(queue) > 0:
			process()
		}
		check()
	}
	require.Equal(t, total, ran, "every due Job ran")
	require.Zero(t, p.waiters.Len(), "no wait left")
	require.Zero(t, p.Reserved(), "no reservation left")
	for k, n := range obs.waiting {
		require.Zero(t, n, "gauge %v", k)
	}
	require.Positive(t, len(obs.ended), "Jobs waited and then ran")
	require.GreaterOrEqual(t, obs.began, len(obs.ended))
}
