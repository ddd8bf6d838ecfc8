package watchbound

import (
	"errors"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// bigWatch is a watch that holds a large buffer, as client-go's stream
// watcher holds its decoding buffers.
type bigWatch struct {
	*watch.FakeWatcher
	buf []byte
}

func event(name string) watch.Event {
	return watch.Event{Type: watch.Added, Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}}
}

// B12: Release delivers the inner watch's events in order and, once its
// stream ends, no longer references it, so that its buffers are garbage
// while the caller (client-go's reflector, for a watch-list's first
// stream) keeps the returned watch.
func TestReleaseLetsGoOfAnEndedWatch(t *testing.T) {
	inner := &bigWatch{FakeWatcher: watch.NewFake(), buf: make([]byte, 4<<20)}
	collected := make(chan struct{})
	runtime.AddCleanup(inner, func(c chan struct{}) { close(c) }, collected)
	w, err := Release(inner, nil)
	if err != nil {
		t.Fatal(err)
	}
	go func(f *watch.FakeWatcher) {
		for _, n := range []string{"a", "b", "c"} {
			f.Add(event(n).Object)
		}
		f.Stop() // the stream ends: its result channel closes
	}(inner.FakeWatcher)
	inner = nil
	var got []string
	for e := range w.ResultChan() {
		got = append(got, e.Object.(*corev1.Secret).Name)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("events %v, want [a b c]", got)
	}
	// The returned watch is still referenced (as the reflector does);
	// the ended inner watch must be collectable. A deadline, not a bound.
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			runtime.KeepAlive(w)
			return
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("B12: the ended inner watch (and its 4 MiB) is still referenced by the watch Release returned")
		}
	}
}

// Stop before the stream ends stops the inner watch and closes the result
// channel; a second Stop is harmless.
func TestReleaseStop(t *testing.T) {
	inner := watch.NewFake()
	w, _ := Release(inner, nil)
	w.Stop()
	w.Stop()
	select {
	case _, ok := <-w.ResultChan():
		if ok {
			t.Fatal("an event after Stop")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the result channel stayed open after Stop")
	}
	if !inner.IsStopped() {
		t.Fatal("the inner watch was not stopped")
	}
}

// An error or a nil watch passes through.
func TestReleasePassesErrorsThrough(t *testing.T) {
	boom := errors.New("boom")
	if w, err := Release(nil, boom); w != nil || !errors.Is(err, boom) {
		t.Fatalf("Release(nil, err) = %v, %v", w, err)
	}
	if w, err := Release(nil, nil); w != nil || err != nil {
		t.Fatalf("Release(nil, nil) = %v, %v", w, err)
	}
}
