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
// stream's frames (JSON: one event per line, as the API server writes
// them; protobuf, which client-go uses for Kubernetes' own kinds: each
// event after its length) and, after a frame larger than Large, ends the
// stream cleanly at the next frame boundary where the reflector accepts an
// end. The reflector then
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
//     boundary, or for Interval, after which the stream is closed where
//     it is (the reflector takes that as a normal end, and the next watch
//     carries again whatever part of an event was cut).
package watchbound

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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

// Framing is how a watch stream delimits its events.
type Framing int

const (
	// Unframed is a stream this package does not follow: it is never
	// ended.
	Unframed Framing = iota
	// Lines is JSON, one event per line.
	Lines
	// LengthPrefixed is protobuf, each event after its length as four
	// bytes, big-endian.
	LengthPrefixed
)

// framingOf returns the framing of a watch response of content type ct.
func framingOf(ct string) Framing {
	mt, params, err := mime.ParseMediaType(ct)
	switch {
	case err != nil:
		return Unframed
	case mt == "application/json":
		return Lines
	case mt == "application/vnd.kubernetes.protobuf" && params["stream"] == "watch":
		return LengthPrefixed
	}
	return Unframed
}

// protoPrefix begins an object the protobuf serializer encoded, before its
// runtime.Unknown envelope.
var protoPrefix = []byte("k8s\x00")

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
	framing := framingOf(resp.Header.Get("Content-Type"))
	if framing == Unframed {
		return resp, nil
	}
	path := req.URL.Path
	r := NewReader(resp.Body, framing, q.Get("sendInitialEvents") == "true")
	r.mayEnd = func() bool { return t.takeEnd(path) }
	r.retry = Interval
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

// Reader reads a watch stream and ends it (io.EOF at a frame's end) once a
// frame larger than Large went by and an end is safe (the package comment
// says when).
type Reader struct {
	body    io.ReadCloser
	framing Framing
	// mayEnd is asked once an end is due and safe; false defers the end
	// to a later frame boundary, or to retry later, whichever comes
	// first. Nil means always.
	mayEnd func() bool
	// retry is how long a deferred end waits for a frame boundary before
	// the stream is closed where it is (0: only at a boundary).
	retry time.Duration
	// timer closes the body once a deferred end is due; closed records
	// that it did, so that the error the read then gets is a clean end.
	mu     sync.Mutex
	timer  *time.Timer
	closed atomic.Bool

	// initial is true while a watch-list's initial events stream.
	initial bool
	// large is true when a frame over Large went by since the stream
	// began.
	large bool
	// frameLen is the length of the current frame so far.
	frameLen int
	// header and headerLen hold a length-prefixed frame's length while
	// it is read; left is what remains of its frame after it.
	header    [4]byte
	headerLen int
	left      int
	// head keeps the start of the current frame while the initial events
	// stream (up to maxBookmark bytes), to find the bookmark that ends
	// them.
	head []byte
	// ended is true once the stream was ended.
	ended bool
}

// NewReader reads body, framed as framing; initial says the request asked
// for the initial events (sendInitialEvents=true).
func NewReader(body io.ReadCloser, framing Framing, initial bool) *Reader {
	return &Reader{body: body, framing: framing, initial: initial}
}

// Read implements io.Reader. Bytes read from the body past the frame
// boundary where the stream ends are dropped: they begin an event that the
// next watch, from the last resourceVersion delivered, carries again.
func (r *Reader) Read(p []byte) (int, error) {
	if r.ended {
		return 0, io.EOF
	}
	n, err := r.body.Read(p)
	if r.framing == Unframed {
		return n, err
	}
	if err != nil && r.closed.Load() {
		// The deferred end: whatever part of a frame was read before is
		// carried again by the next watch, from the last resourceVersion
		// delivered (client-go drops a cut frame without an error event).
		r.ended = true
		return n, io.EOF
	}
	for i := 0; i < n; {
		used, end := r.next(p[i:n])
		i += used
		if end && r.frameEnd() {
			r.ended = true
			return i, nil
		}
	}
	return n, err
}

// next takes in the start of b: up to the end of the current frame, or all
// of b. It returns how many bytes it took and whether a frame ended there.
func (r *Reader) next(b []byte) (int, bool) {
	if r.framing == Lines {
		j := bytes.IndexByte(b, '\n')
		if j < 0 {
			r.see(b)
			return len(b), false
		}
		r.see(b[:j])
		return j + 1, true
	}
	if r.headerLen < len(r.header) {
		k := copy(r.header[r.headerLen:], b)
		r.headerLen += k
		if r.headerLen < len(r.header) {
			return k, false
		}
		r.left = int(binary.BigEndian.Uint32(r.header[:]))
		return k, r.left == 0
	}
	k := min(len(b), r.left)
	r.see(b[:k])
	r.left -= k
	return k, r.left == 0
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
	endsInitial := r.initial && r.frameLen <= maxBookmark && endsInitialEvents(r.head, r.framing)
	r.frameLen, r.head, r.headerLen = 0, r.head[:0], 0
	if r.initial {
		if endsInitial {
			r.initial = false
		}
		return false
	}
	// This frame is an event of the phase, so the reflector accepts the
	// end (it refuses a watch that ends with none).
	if !r.large {
		return false
	}
	if r.mayEnd == nil || r.mayEnd() {
		return true
	}
	r.deferEnd()
	return false
}

// deferEnd closes the stream after retry unless it ends before. Closing
// the body mid-frame is safe here: this phase has delivered an event, so
// the reflector takes the end as a normal one and watches again.
func (r *Reader) deferEnd() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer != nil || r.retry <= 0 {
		return
	}
	r.timer = time.AfterFunc(r.retry, func() {
		if r.mayEnd != nil {
			_ = r.mayEnd() // records the end for the path's interval
		}
		r.closed.Store(true)
		_ = r.body.Close()
	})
}

// endsInitialEvents reports whether frame is the bookmark that ends a
// watch-list's initial events: decoded, so that no tenant's data in an
// event can pass for it.
func endsInitialEvents(frame []byte, framing Framing) bool {
	var typ string
	var annotations map[string]string
	switch framing {
	case Lines:
		var e struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"object"`
		}
		if json.Unmarshal(frame, &e) != nil {
			return false
		}
		typ, annotations = e.Type, e.Object.Metadata.Annotations
	case LengthPrefixed:
		// A raw metav1.WatchEvent whose object is a protobuf-encoded
		// runtime.Unknown; every Kubernetes kind's field 1 is its
		// ObjectMeta, which PartialObjectMetadata reads.
		var e metav1.WatchEvent
		var u runtime.Unknown
		var m metav1.PartialObjectMetadata
		if e.Unmarshal(frame) != nil || !bytes.HasPrefix(e.Object.Raw, protoPrefix) ||
			u.Unmarshal(e.Object.Raw[len(protoPrefix):]) != nil || m.Unmarshal(u.Raw) != nil {
			return false
		}
		typ, annotations = e.Type, m.Annotations
	}
	return typ == string(watch.Bookmark) && annotations[metav1.InitialEventsAnnotationKey] == "true"
}

// Close implements io.Closer.
func (r *Reader) Close() error {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
	return r.body.Close()
}
