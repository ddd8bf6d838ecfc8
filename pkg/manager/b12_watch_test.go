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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	"github.com/captf/captf/pkg/watchbound"
)

// floodServer serves TerraformClusters as the API server does to a
// watch-list informer: an empty list, then watches (the first one
// streaming its initial events, none, and the bookmark that ends them)
// that carry each flooded object once, from the resourceVersion asked.
type floodServer struct {
	mu   sync.Mutex
	cond *sync.Cond
	// rv is the current resourceVersion; the event of resourceVersion
	// base+i+1 carries flooded object i.
	rv, base int
}

// floodedCluster is flooded object i: 3,000 labels of 63-character values
// under long keys, four 60 KiB annotations and a managed-fields entry for
// every label (about 1.4 MB of JSON, as test/faults/trust's B12 flood).
func floodedCluster(i, rv int) *v1alpha1.TerraformCluster {
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
	return &v1alpha1.TerraformCluster{
		TypeMeta: metav1.TypeMeta{Kind: v1alpha1.KindTerraformCluster, APIVersion: v1alpha1.SchemeGroupVersion.String()},
		ObjectMeta: metav1.ObjectMeta{Namespace: "flood", Name: fmt.Sprintf("big-%03d", i), ResourceVersion: strconv.Itoa(rv),
			Labels: l, Annotations: a, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "tenant", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(f.String())}}}},
	}
}

func (s *floodServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	w.Header().Set("Content-Type", "application/json")
	s.mu.Lock()
	from := s.rv
	s.mu.Unlock()
	if q.Get("watch") != "true" {
		_ = json.NewEncoder(w).Encode(map[string]any{"kind": "TerraformClusterList", "apiVersion": v1alpha1.SchemeGroupVersion.String(),
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(from)}, "items": []any{}})
		return
	}
	if v, err := strconv.Atoi(q.Get("resourceVersion")); err == nil && v > 0 {
		from = v
	}
	enc, flush := json.NewEncoder(w), w.(http.Flusher).Flush
	if q.Get("sendInitialEvents") == "true" {
		_ = enc.Encode(map[string]any{"type": "BOOKMARK", "object": map[string]any{"kind": v1alpha1.KindTerraformCluster, "apiVersion": v1alpha1.SchemeGroupVersion.String(),
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
		_ = enc.Encode(map[string]any{"type": "ADDED", "object": floodedCluster(from-s.base-1, from)})
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
// stayed for the life of the informer.
func TestB12InformerLetsGoOfFloodedWatchBuffers(t *testing.T) {
	s := &floodServer{rv: 100, base: 100}
	s.cond = sync.NewCond(&s.mu)
	srv := httptest.NewUnstartedServer(s)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: -1}
	cfg.Wrap(watchbound.Wrap) // as restConfig does
	captf, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := withCaches(&Deps{Captf: captf})
	inf := d.CaptfInformers.Infrastructure().V1alpha1().TerraformClusters()
	_ = inf.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	d.CaptfInformers.Start(ctx.Done())
	defer func() {
		cancel() // before Shutdown, which waits for the informers to stop
		d.CaptfInformers.Shutdown()
	}()
	d.CaptfInformers.WaitForCacheSync(ctx.Done())
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
	for {
		if l, _ := inf.Lister().List(labels.Everything()); len(l) == n {
			break
		}
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
