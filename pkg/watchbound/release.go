package watchbound

import (
	"sync"

	"k8s.io/apimachinery/pkg/watch"
)

// Release returns a watch that delivers w's events and lets go of w once
// w's result channel closes, so that what w holds (client-go's decoding
// buffers, as large as the largest event it decoded) is garbage as soon as
// the stream ends, even while the caller keeps the returned watch (SPEC
// B12).
//
// client-go's reflector keeps the first watch of a watch-list (the stream
// that carried the initial events) in a variable of
// ListAndWatchWithContext until the informer lists again, which may be
// never: after a tenant's large object went through that stream, its
// decoder kept about 4 MiB (JSON) or 2 MiB (protobuf) per informer for the
// life of the process, although the stream itself had ended. The returned
// watch costs one goroutine, which ends with the stream or Stop.
//
// It takes Watch's results as they are, so that a client's Watch can
// return Release(inner.Watch(ctx, opts)); an error or a nil watch passes
// through unchanged.
func Release(w watch.Interface, err error) (watch.Interface, error) {
	if err != nil || w == nil {
		return w, err
	}
	r := &released{inner: w, result: make(chan watch.Event), done: make(chan struct{})}
	go r.forward(w.ResultChan())
	return r, nil
}

// released is the watch Release returns.
type released struct {
	mu sync.Mutex
	// inner is the watch it delivers, nil once its stream has ended.
	inner  watch.Interface
	result chan watch.Event
	// done is closed by Stop.
	done chan struct{}
	stop sync.Once
}

// forward delivers the events of in until it closes or Stop is called,
// then lets go of the inner watch and closes the result channel.
func (r *released) forward(in <-chan watch.Event) {
	defer close(r.result)
	defer r.drop()
	for {
		select {
		case <-r.done:
			return
		case e, ok := <-in:
			if !ok {
				return
			}
			select {
			case r.result <- e:
			case <-r.done:
				return
			}
		}
	}
}

// drop stops the inner watch (it may not have ended, when Stop came first)
// and forgets it.
func (r *released) drop() {
	r.mu.Lock()
	inner := r.inner
	r.inner = nil
	r.mu.Unlock()
	if inner != nil {
		inner.Stop()
	}
}

// Stop implements watch.Interface.
func (r *released) Stop() {
	r.stop.Do(func() { close(r.done) })
	r.drop()
}

// ResultChan implements watch.Interface.
func (r *released) ResultChan() <-chan watch.Event { return r.result }
