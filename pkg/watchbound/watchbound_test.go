package watchbound

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// frame is one watch event, framed as the API server frames it: a
// ConfigMap named name whose annotations are ann, padded to about size
// bytes.
type frame struct {
	typ, name string
	size      int
	ann       map[string]string
}

func (f frame) object() *corev1.ConfigMap {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: f.name, ResourceVersion: "7", Annotations: map[string]string{}},
	}
	for k, v := range f.ann {
		cm.Annotations[k] = v
	}
	if f.size > 0 {
		cm.Annotations["pad"] = strings.Repeat("x", f.size)
	}
	return cm
}

// encode frames f as framing does.
func (f frame) encode(t *testing.T, framing Framing) []byte {
	t.Helper()
	switch framing {
	case Lines:
		b, err := json.Marshal(map[string]any{"type": f.typ, "object": f.object()})
		if err != nil {
			t.Fatal(err)
		}
		return append(b, '\n')
	case LengthPrefixed:
		var obj bytes.Buffer
		if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(f.object(), &obj); err != nil {
			t.Fatal(err)
		}
		e := metav1.WatchEvent{Type: f.typ, Object: runtime.RawExtension{Raw: obj.Bytes()}}
		b, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
	}
	t.Fatalf("framing %d", framing)
	return nil
}

func bookmark(end bool) frame {
	f := frame{typ: "BOOKMARK"}
	if end {
		f.ann = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	}
	return f
}

var (
	small  = frame{typ: "ADDED", name: "small", size: 100}
	small2 = frame{typ: "MODIFIED", name: "small2", size: 100}
	large  = frame{typ: "ADDED", name: "large", size: Large + 1}
	// forged is a tenant's object carrying the initial-events-end
	// annotation: it must not end the initial events.
	forged = frame{typ: "ADDED", name: "f", ann: map[string]string{metav1.InitialEventsAnnotationKey: "true", "x": `{"type":"BOOKMARK"}`}}
)

var framings = map[Framing]string{Lines: "json", LengthPrefixed: "protobuf"}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial bool
		stream  []frame
		// allow answers mayEnd, in turn (true once exhausted).
		allow []bool
		// delivered is how many of stream's lines are read before
		// the end; len(stream) means the stream was not ended.
		delivered int
	}{
		{name: "small events pass", stream: []frame{small, small2, small}, delivered: 3},
		{name: "ends after a large event", stream: []frame{small, large, small2}, delivered: 2},
		{name: "a large first event ends there", stream: []frame{large, small}, delivered: 1},
		{name: "a refused end waits for the next boundary", stream: []frame{large, small, small2, small}, allow: []bool{false, false}, delivered: 3},
		{name: "watch-list: not during the initial events", initial: true,
			stream: []frame{large, small, bookmark(true), small2, small}, delivered: 4},
		{name: "watch-list: not on the initial-events-end bookmark itself", initial: true,
			stream: []frame{small, large, bookmark(true), bookmark(false)}, delivered: 4},
		{name: "watch-list: a plain bookmark does not end the initial events", initial: true,
			stream: []frame{large, bookmark(false), small, bookmark(true), small2}, delivered: 5},
		{name: "watch-list: a tenant's annotation does not end the initial events", initial: true,
			stream: []frame{large, forged, small, small2}, delivered: 4},
		{name: "watch-list: small initial events, then a large one", initial: true,
			stream: []frame{small, bookmark(true), large, small}, delivered: 3},
	} {
		for framing, fname := range framings {
			for _, oneByte := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/one-byte=%v", tc.name, fname, oneByte), func(t *testing.T) {
					var all, want []byte
					for i, f := range tc.stream {
						b := f.encode(t, framing)
						all = append(all, b...)
						if i < tc.delivered {
							want = append(want, b...)
						}
					}
					var body io.Reader = bytes.NewReader(all)
					if oneByte {
						body = iotest.OneByteReader(body)
					}
					r := NewReader(io.NopCloser(body), framing, tc.initial)
					allow := tc.allow
					r.mayEnd = func() bool {
						if len(allow) == 0 {
							return true
						}
						a := allow[0]
						allow = allow[1:]
						return a
					}
					got, err := io.ReadAll(r)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Errorf("read %d bytes, want %d bytes (%d of %d frames)", len(got), len(want), tc.delivered, len(tc.stream))
					}
					if n, err := r.Read(make([]byte, 10)); tc.delivered < len(tc.stream) && (n != 0 || err != io.EOF) {
						t.Errorf("after the end: %d, %v; want 0, EOF", n, err)
					}
				})
			}
		}
	}
}

// TestStreamWatcherEndsCleanly decodes a stream through client-go's own
// watch decoders, JSON and protobuf: the events up to the end arrive, and
// the watch closes without an error event (which the reflector would count
// as a failure).
func TestStreamWatcherEndsCleanly(t *testing.T) {
	for framing, fname := range framings {
		t.Run(fname, func(t *testing.T) {
			var stream []byte
			for _, f := range []frame{small, large, small2} {
				stream = append(stream, f.encode(t, framing)...)
			}
			body := NewReader(io.NopCloser(bytes.NewReader(stream)), framing, false)
			var events *streaming.Decoder
			if framing == Lines {
				s := kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{})
				d := streaming.NewDecoder(kjson.Framer.NewFrameReader(body), s)
				events = &d
			} else {
				d := streaming.NewDecoder(protobuf.LengthDelimitedFramer.NewFrameReader(body), protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme))
				events = &d
			}
			dec := restclientwatch.NewDecoder(*events, scheme.Codecs.UniversalDeserializer())
			w := watch.NewStreamWatcher(dec, errorReporter{})
			var got []string
			for e := range w.ResultChan() {
				if e.Type == watch.Error {
					t.Fatalf("error event: %v", e.Object)
				}
				got = append(got, string(e.Type)+" "+e.Object.(*corev1.ConfigMap).Name)
			}
			if want := []string{"ADDED small", "ADDED large"}; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("events %v, want %v", got, want)
			}
		})
	}
}

type errorReporter struct{}

func (errorReporter) AsObject(err error) runtime.Object {
	return &metav1.Status{Message: err.Error()}
}

func TestTransport(t *testing.T) {
	var stream []byte
	for _, f := range []frame{small, large, small2} {
		stream = append(stream, f.encode(t, Lines)...)
	}
	contentType := "application/json"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(stream)
	}))
	defer srv.Close()
	now := time.Unix(1000, 0)
	tr := Wrap(http.DefaultTransport).(*transport)
	tr.now = func() time.Time { return now }
	read := func(query string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/configmaps"+query, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	ended := len(small.encode(t, Lines)) + len(large.encode(t, Lines))
	for _, step := range []struct {
		name    string
		query   string
		ctype   string
		advance time.Duration
		want    int
	}{
		{name: "a list is not a watch", query: "", want: len(stream)},
		{name: "a watch ends after the large event", query: "?watch=true", want: ended},
		{name: "within the interval the path's next watch is not ended", query: "?watch=true", advance: Interval / 2, want: len(stream)},
		{name: "after the interval it is", query: "?watch=true", advance: Interval, want: ended},
		{name: "a stream of unknown framing is never ended", query: "?watch=true", ctype: "application/cbor", advance: Interval, want: len(stream)},
	} {
		now = now.Add(step.advance)
		contentType = "application/json"
		if step.ctype != "" {
			contentType = step.ctype
		}
		if got := read(step.query); got != step.want {
			t.Errorf("%s: read %d bytes, want %d", step.name, got, step.want)
		}
	}
}

// TestDeferredEndClosesAQuietStream: an end refused by the interval, with
// no frame after it, is taken after retry by closing the body; the reader
// reports a clean end, and client-go's decoder closes the watch without an
// error event.
func TestDeferredEndClosesAQuietStream(t *testing.T) {
	for framing, fname := range framings {
		t.Run(fname, func(t *testing.T) {
			pr, pw := io.Pipe()
			body := NewReader(pr, framing, false)
			var asked atomic.Int32
			body.mayEnd = func() bool { return asked.Add(1) > 1 } // the first ask is refused
			body.retry = 20 * time.Millisecond
			go func() {
				for _, f := range []frame{small, large} {
					_, _ = pw.Write(f.encode(t, framing))
				}
				// Then nothing: the stream stays open, as a quiet watch does.
			}()
			got, err := io.ReadAll(body)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			want := append(small.encode(t, framing), large.encode(t, framing)...)
			if !bytes.Equal(got, want) {
				t.Errorf("read %d bytes, want %d", len(got), len(want))
			}
			if asked.Load() != 2 {
				t.Errorf("mayEnd asked %d times, want 2 (at the frame, then when the deferred end was taken)", asked.Load())
			}
		})
	}
}
