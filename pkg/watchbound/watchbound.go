// Package watchbound ends a watch stream soon after it carried a large
// event, so that the memory client-go keeps for decoding that watch is
// freed (SPEC B12).
//
// client-go decodes a JSON watch stream through two buffers that grow to
// the largest event the stream carried and keep that size for the life of
// the watch (the framer's JSON decoder and the streaming decoder's frame
// buffer): a tenant's object with 1.4 MiB of labels leaves about 4 MiB per
// watch, for five to ten minutes, although the informers' transforms drop
// the labels at once. This package wraps the manager's HTTP transport: the
// body of a watch response is read through a Reader that follows the
// stream's frames (one JSON event per line, as the API server writes them)
// and, after a frame larger than Large, ends the stream cleanly at the next
// frame boundary where the reflector accepts an end. The reflector then
// watches again from the last resourceVersion it saw: no event is lost and
// nothing is listed again, and the old stream's buffers are garbage.
//
// Where an end is safe:
//   - Never during a watch-list's initial events (sendInitialEvents=true,
//     before the bookmark annotated k8s.io/initial-events-end): the
//     reflector would list again.
//   - Never before the first event of a phase (the stream's start, or the
//     initial-events-end bookmark): the reflector takes a watch that ends
//     within a second with no event as an error and lists again.
//   - At most once per Interval per resource path, so a stream of large
//     events costs at most one new watch request per Interval; the large
//     frames between are delivered, and the end waits for the next frame
//     boundary after the interval (the API server sends a bookmark about
//     every minute).
package watchbound

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

const (
	// Large is the size of an event after which a watch is ended: far
	// above any object the manager writes (its largest, a cluster with
	// its conditions and outputs, is a few KiB), below what a tenant can
	// put in one object's metadata.
	Large = 256 << 10
	// Interval is the least time between two ends of the watches of one
	// resource path.
	Interval = time.Second
	// maxBookmark bounds the part of a bookmark frame kept to find the
	// initial-events-end annotation; a bookmark carries only its
	// resourceVersion and that annotation.
	maxBookmark = 4 << 10
)

var (
	// bookmarkStart is how the API server begins a bookmark event.
	bookmarkStart = []byte(`{"type":"BOOKMARK"`)
	// initialEventsEnd is metav1.InitialEventsAnnotationKey set to true,
	// as JSON writes it.
	initialEventsEnd = []byte(`"k8s.io/initial-events-end":"true"`)
)

// Wrap returns a RoundTripper that reads every watch response of rt
// through a Reader. It fits rest.Config.Wrap.
func Wrap(rt http.RoundTripper) http.RoundTripper {
	return &transport{next: rt, now: time.Now, lastEnd: map[string]time.Time{}}
}

type transport struct {
	next http.RoundTripper
	now  func() time.Time

	mu sync.Mutex
	// lastEnd is when a watch of each resource path was last ended.
	lastEnd map[string]time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	q := req.URL.Query()
	if err != nil || resp.StatusCode != http.StatusOK || q.Get("watch") != "true" {
		return resp, err
	}
	path := req.URL.Path
	r := NewReader(resp.Body, q.Get("sendInitialEvents") == "true")
	r.mayEnd = func() bool { return t.takeEnd(path) }
	resp.Body = r
	return resp, nil
}

// takeEnd reports whether a watch of path may end now, and if so records
// the end.
func (t *transport) takeEnd(path string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if last, ok := t.lastEnd[path]; ok && now.Sub(last) < Interval {
		return false
	}
	// The map holds one entry per resource path the manager watches: a
	// handful, fixed by its informers.
	t.lastEnd[path] = now
	return true
}

// Reader reads a JSON watch stream, one event per line, and ends it (io.EOF
// at a line's end) once a frame larger than Large went by and an end is
// safe (the package comment says when).
type Reader struct {
	body io.ReadCloser
	// mayEnd is asked once an end is due and safe; false defers the end
	// to a later frame boundary. Nil means always.
	mayEnd func() bool

	// initial is true while a watch-list's initial events stream.
	initial bool
	// large is true when a frame over Large went by since the stream
	// began.
	large bool
	// frameLen is the length of the current frame so far.
	frameLen int
	// head keeps the start of the current frame while it may be a
	// bookmark (up to maxBookmark bytes), for the initial-events-end
	// annotation.
	head []byte
	// ended is true once the stream was ended.
	ended bool
}

// NewReader reads body; initial says the request asked for the initial
// events (sendInitialEvents=true).
func NewReader(body io.ReadCloser, initial bool) *Reader {
	return &Reader{body: body, initial: initial}
}

// Read implements io.Reader. Bytes read from the body past the frame
// boundary where the stream ends are dropped: they begin an event that the
// next watch, from the last resourceVersion delivered, carries again.
func (r *Reader) Read(p []byte) (int, error) {
	if r.ended {
		return 0, io.EOF
	}
	n, err := r.body.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			r.see(p[i:n])
			break
		}
		r.see(p[i : i+j])
		if r.frameEnd() {
			r.ended = true
			return i + j + 1, nil
		}
		i += j + 1
	}
	return n, err
}

// see takes in the bytes b of the current frame (no newline).
func (r *Reader) see(b []byte) {
	r.frameLen += len(b)
	if r.initial && len(r.head) < maxBookmark {
		r.head = append(r.head, b[:min(len(b), maxBookmark-len(r.head))]...)
	}
}

// frameEnd takes in the end of a frame and reports whether the stream
// ends there.
func (r *Reader) frameEnd() bool {
	if r.frameLen > Large {
		r.large = true
	}
	// A tenant's data cannot begin a frame, so only the API server's
	// bookmark can end the initial events.
	endsInitial := r.initial && bytes.HasPrefix(r.head, bookmarkStart) && bytes.Contains(r.head, initialEventsEnd)
	r.frameLen, r.head = 0, r.head[:0]
	if r.initial {
		if endsInitial {
			r.initial = false
		}
		return false
	}
	// This frame is an event of the phase, so the reflector accepts the
	// end (it refuses a watch that ends with none).
	return r.large && (r.mayEnd == nil || r.mayEnd())
}

// Close implements io.Closer.
func (r *Reader) Close() error { return r.body.Close() }
