package manager

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// countingSink takes every event and keeps none.
type countingSink struct{ n atomic.Int64 }

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	s.n.Add(1)
	return e, nil
}
func (s *countingSink) Update(e *corev1.Event) (*corev1.Event, error) { return e, nil }
func (s *countingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	return e, nil
}

// heapLive returns the bytes a forced GC marked live.
func heapLive() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// TestB15EventCachesBounded records one event about each of thousands of
// distinct objects, as a churn of uniquely named objects does (each batch's
// mirrors created and removed), through the manager's broadcaster: past
// the first few hundred, its correlator keeps no more (SPEC B15). With
// client-go's default caches (4,096 entries each) the heap grew about
// 0.9 to 1 KB per object.
func TestB15EventCachesBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sink := &countingSink{}
	b := newBroadcaster(ctx)
	defer b.Shutdown()
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(eventScheme(), corev1.EventSource{Component: "captf-manager"})
	emit := func(from, to int) {
		for i := from; i < to; i++ {
			name := fmt.Sprintf("churn-%d-%d", i/500, i)
			obj := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "churn-x7k2p", Name: name, UID: types.UID(fmt.Sprintf("6f1c2d3e-0000-4000-8000-%012d", i))}}
			rec.Eventf(obj, corev1.EventTypeNormal, v1alpha1.EventMirrorCreated, "Created mirror Secret %s of TerraformClusterIdentity %s", "captf-mirror-"+name, "churn-identity")
			if i%100 == 99 || i == to-1 {
				// The broadcaster drops what it cannot queue: keep pace.
				deadline := time.Now().Add(time.Minute)
				for sink.n.Load() < int64(i+1) && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				if got := sink.n.Load(); got < int64(i+1) {
					t.Fatalf("the sink got %d of %d events", got, i+1)
				}
			}
		}
	}
	const warm, churned = 1000, 5000
	emit(0, warm)
	before := heapLive()
	emit(warm, warm+churned)
	after := heapLive()
	perObject := float64(after-before) / churned
	t.Logf("heap live %d -> %d bytes after events about %d more objects: %+.0f bytes each", before, after, churned, perObject)
	if perObject > 64 {
		t.Errorf("B15: the event correlator kept %.0f bytes per object past the first %d (caches of %d entries)", perObject, warm, eventCacheEntries)
	}
}
