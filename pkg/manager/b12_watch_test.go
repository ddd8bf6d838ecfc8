package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/watchbound"
)

// floodServer serves one kind as the API server does to a watch-list
// informer: an empty list, then watches (the first one streaming its
// initial events, none, and the bookmark that ends them) that carry each
// flooded object once, from the resourceVersion asked.
type floodServer struct {
	kind, apiVersion string
	object           func(i, rv int) any
	mu               sync.Mutex
	cond             *sync.Cond
	// rv is the current resourceVersion; the event of resourceVersion
	// base+i+1 carries flooded object i.
	rv, base int
}

// floodedMeta is flooded object i's metadata: 3,000 labels of
// 63-character values under long keys, four 60 KiB annotations and a
// managed-fields entry for every label (about 1.4 MB of JSON, as
// test/faults/trust's B12 flood).
func floodedMeta(i, rv int) metav1.ObjectMeta {
	prefix := strings.Repeat("a", 60) + "." + strings.Repeat("b", 30) + ".example/"
	l, a := map[string]string{}, map[string]string{}
	var f strings.Builder
	f.WriteString(`{"f:metadata":{"f:labels":{`)
	for j := range 3000 {
		k := prefix + fmt.Sprintf("k%05d-", j) + strings.Repeat("n", 56)
		l[k] = fmt.Sprintf("%04d-", i) + strings.Repeat("v", 58)
		if j > 0 {
			f.WriteString(",")
		}
		f.WriteString(`"f:` + k + `":{}`)
	}
	f.WriteString(`}}}`)
	for j := range 4 {
		a[fmt.Sprintf("t.example/a%d", j)] = strings.Repeat("x", 60<<10)
	}
	return metav1.ObjectMeta{Namespace: "flood", Name: fmt.Sprintf("big-%03d", i), ResourceVersion: strconv.Itoa(rv),
		Labels: l, Annotations: a, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tenant", Operation: metav1.ManagedFieldsOperationUpdate,
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(f.String())}}}}
}

func (s *floodServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	from := s.rv
	s.mu.Unlock()
	if q.Get("watch") != "true" {
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": s.kind + "List", "apiVersion": s.apiVersion,
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(from)}, "items": []any{}})
		return
	}
	if v, err := strconv.Atoi(q.Get("resourceVersion")); err == nil && v > 0 {
		from = v
	}
	enc, flush := json.NewEncoder(w), w.(http.Flusher).Flush
	if q.Get("sendInitialEvents") == "true" {
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": s.kind, "apiVersion": s.apiVersion,
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(from), "annotations": map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}})
	}
	flush()
	ctx := r.Context()
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	for {
		s.mu.Lock()
		for s.rv <= from && ctx.Err() == nil {
			s.cond.Wait()
		}
		s.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		from++
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": s.object(from-s.base-1, from)})
		flush()
	}
}

// heapInUse is the Go heap in use after two collections.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// B12: after a tenant's large objects went through the caches' informers,
// the manager's heap returns to where it was, but for the trimmed copies:
// the watch that carried them is ended (watchbound.Wrap), and its decoding
// buffers are garbage although client-go's reflector keeps that watch, the
// first stream of its watch-list, until it lists again
// (watchbound.Release). Without Release, about 4.4 MiB (the framer's and
// the streaming decoder's buffers, each the size of the largest event)
// stayed for the life of each informer.
func TestB12InformerLetsGoOfFloodedWatchBuffers(t *testing.T) {
	for _, c := range []struct {
		kind, apiVersion string
		object           func(i, rv int) any
		informer         func(*Deps) (cache.SharedIndexInformer, func() int)
	}{
		{v1alpha1.KindTerraformCluster, v1alpha1.SchemeGroupVersion.String(),
			func(i, rv int) any { return &v1alpha1.TerraformCluster{ObjectMeta: floodedMeta(i, rv)} },
			func(d *Deps) (cache.SharedIndexInformer, func() int) {
				i := d.CaptfInformers.Infrastructure().V1alpha1().TerraformClusters()
				return i.Informer(), func() int { l, _ := i.Lister().List(labels.Everything()); return len(l) }
			}},
		{"Secret", "v1",
			func(i, rv int) any { return &corev1.Secret{ObjectMeta: floodedMeta(i, rv)} },
			func(d *Deps) (cache.SharedIndexInformer, func() int) {
				i := d.MirrorInformers.Core().V1().Secrets()
				return i.Informer(), func() int { l, _ := i.Lister().List(labels.Everything()); return len(l) }
			}},
		{"Job", "batch/v1",
			func(i, rv int) any { return &batchv1.Job{ObjectMeta: floodedMeta(i, rv)} },
			func(d *Deps) (cache.SharedIndexInformer, func() int) {
				i := d.JobInformers.Batch().V1().Jobs()
				return i.Informer(), func() int { l, _ := i.Lister().List(labels.Everything()); return len(l) }
			}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			s := &floodServer{kind: c.kind, apiVersion: c.apiVersion, object: func(i, rv int) any {
				o := c.object(i, rv)
				b, _ := json.Marshal(o)
				var m map[string]any
				_ = json.Unmarshal(b, &m)
				m["kind"], m["apiVersion"] = c.kind, c.apiVersion
				return m
			}, rv: 100, base: 100}
			testInformerFlood(t, s, c.informer)
		})
	}
}

func testInformerFlood(t *testing.T, s *floodServer, informer func(*Deps) (cache.SharedIndexInformer, func() int)) {
	s.cond = sync.NewCond(&s.mu)
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
	cfg.Wrap(watchbound.Wrap) // as restConfig does
	d, err := newDeps(cfg, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	inf, cached := informer(d)
	ctx, cancel := context.WithCancel(context.Background())
	for _, f := range []interface{ Start(<-chan struct{}) }{d.Informers, d.JobInformers, d.MirrorInformers, d.CaptfInformers} {
		f.Start(ctx.Done())
	}
	defer func() {
		cancel() // before Shutdown, which waits for the informers to stop
		d.Informers.Shutdown()
		d.JobInformers.Shutdown()
		d.MirrorInformers.Shutdown()
		d.CaptfInformers.Shutdown()
	}()
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	before := heapInUse()

	const n = 5
	for range n {
		s.mu.Lock()
		s.rv++
		s.cond.Broadcast()
		s.mu.Unlock()
	}
	// Deadlines, not bounds: the informer has every object, then the
	// heap settles (the large event's watch ends within watchbound's
	// Interval).
	deadline := time.Now().Add(30 * time.Second)
	for cached() < n {
		if time.Now().After(deadline) {
			t.Fatal("the informer did not get the flooded objects")
		}
		time.Sleep(50 * time.Millisecond)
	}
	const bound = 2 << 20 // five trimmed copies are a few KiB
	grew := heapInUse() - before
	for grew >= bound && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		grew = heapInUse() - before
	}
	t.Logf("heap in use after %d flooded objects of about 1.4 MB: %+.2f MiB", n, float64(grew)/(1<<20))
	if grew >= bound {
		t.Errorf("B12: the heap stayed %.1f MiB above where it was after the flood went through the informer (bound %.0f MiB)", float64(grew)/(1<<20), float64(bound)/(1<<20))
	}
}
