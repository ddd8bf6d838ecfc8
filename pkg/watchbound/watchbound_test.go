package watchbound

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// event is one watch event line as the API server writes it: a ConfigMap
// named name whose annotation pads it to about size bytes.
func event(typ, name string, size int) string {
	return fmt.Sprintf(`{"type":%q,"object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":%q,"resourceVersion":"%d","annotations":{"pad":%q}}}}`+"\n",
		typ, name, len(name)+size, strings.Repeat("x", size))
}

// bookmark is a bookmark line; end marks the end of the initial events.
func bookmark(rv int, end bool) string {
	ann := ""
	if end {
		ann = `,"annotations":{"k8s.io/initial-events-end":"true"}`
	}
	return fmt.Sprintf(`{"type":"BOOKMARK","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"resourceVersion":"%d"%s}}}`+"\n", rv, ann)
}

var (
	small  = event("ADDED", "small", 100)
	small2 = event("MODIFIED", "small2", 100)
	large  = event("ADDED", "large", Large+1)
	// forged is a tenant's object whose annotation names the
	// initial-events-end annotation: it must not end the initial events.
	forged = `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"f","annotations":{"k8s.io/initial-events-end":"true","x":"{\"type\":\"BOOKMARK\"}"}}}}` + "\n"
)

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial bool
		stream  []string
		// allow answers mayEnd, in turn (true once exhausted).
		allow []bool
		// delivered is how many of stream's lines are read before
		// the end; len(stream) means the stream was not ended.
		delivered int
	}{
		{name: "small events pass", stream: []string{small, small2, small}, delivered: 3},
		{name: "ends after a large event", stream: []string{small, large, small2}, delivered: 2},
		{name: "a large first event ends there", stream: []string{large, small}, delivered: 1},
		{name: "a refused end waits for the next boundary", stream: []string{large, small, small2, small}, allow: []bool{false, false}, delivered: 3},
		{name: "watch-list: not during the initial events", initial: true,
			stream: []string{large, small, bookmark(9, true), small2, small}, delivered: 4},
		{name: "watch-list: not on the initial-events-end bookmark itself", initial: true,
			stream: []string{small, large, bookmark(9, true), bookmark(10, false)}, delivered: 4},
		{name: "watch-list: a plain bookmark does not end the initial events", initial: true,
			stream: []string{large, bookmark(8, false), small, bookmark(9, true), small2}, delivered: 5},
		{name: "watch-list: a tenant's annotation does not end the initial events", initial: true,
			stream: []string{large, forged, small, small2}, delivered: 4},
		{name: "watch-list: small initial events, then a large one", initial: true,
			stream: []string{small, bookmark(9, true), large, small}, delivered: 3},
	} {
		for _, oneByte := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/one-byte=%v", tc.name, oneByte), func(t *testing.T) {
				all := strings.Join(tc.stream, "")
				var body io.Reader = strings.NewReader(all)
				if oneByte {
					body = iotest.OneByteReader(body)
				}
				r := NewReader(io.NopCloser(body), tc.initial)
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
				want := strings.Join(tc.stream[:tc.delivered], "")
				if string(got) != want {
					t.Errorf("read %d bytes (%d lines), want %d bytes (%d lines)", len(got), bytes.Count(got, []byte("\n")), len(want), tc.delivered)
				}
				if n, err := r.Read(make([]byte, 10)); tc.delivered < len(tc.stream) && (n != 0 || err != io.EOF) {
					t.Errorf("after the end: %d, %v; want 0, EOF", n, err)
				}
			})
		}
	}
}

// TestStreamWatcherEndsCleanly decodes a stream through client-go's own
// watch decoder: the events up to the end arrive, and the watch closes
// without an error event (which the reflector would count as a failure).
func TestStreamWatcherEndsCleanly(t *testing.T) {
	stream := small + large + small2
	body := NewReader(io.NopCloser(strings.NewReader(stream)), false)
	s := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{})
	frames := json.Framer.NewFrameReader(body)
	dec := restclientwatch.NewDecoder(streaming.NewDecoder(frames, s), scheme.Codecs.UniversalDeserializer())
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
}

type errorReporter struct{}

func (errorReporter) AsObject(err error) runtime.Object {
	return &metav1.Status{Message: err.Error()}
}

func TestTransport(t *testing.T) {
	stream := small + large + small2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, stream)
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
	ended := len(small) + len(large)
	for _, step := range []struct {
		name    string
		query   string
		advance time.Duration
		want    int
	}{
		{name: "a list is not a watch", query: "", want: len(stream)},
		{name: "a watch ends after the large event", query: "?watch=true", want: ended},
		{name: "within the interval the path's next watch is not ended", query: "?watch=true", advance: Interval / 2, want: len(stream)},
		{name: "after the interval it is", query: "?watch=true", advance: Interval, want: ended},
	} {
		now = now.Add(step.advance)
		if got := read(step.query); got != step.want {
			t.Errorf("%s: read %d bytes, want %d", step.name, got, step.want)
		}
	}
}
