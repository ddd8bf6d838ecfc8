package bounded

import (
	"io"
	"net/http"

	"k8s.io/client-go/rest"
)

// LimitResponses returns a copy of cfg whose clients read at most max
// bytes of any response body (SPEC B11): past it, or when the response
// announces a longer body, reading fails with KindInput, which client-go
// returns wrapped from the request; the client never holds more than max
// bytes of one response. It is for the clients of uncached reads of
// tenant-written objects (one object, or one page of a LIST with a
// limit), never for watches, whose bodies are long-lived streams.
func LimitResponses(cfg *rest.Config, max int64) *rest.Config {
	out := rest.CopyConfig(cfg)
	inner := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return &limitTransport{rt: rt, max: max}
	}
	return out
}

type limitTransport struct {
	rt  http.RoundTripper
	max int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = &limitedBody{body: resp.Body, left: t.max, max: t.max, announced: resp.ContentLength}
	return resp, nil
}

// WrappedRoundTripper lets client-go's debugging wrappers see through.
func (t *limitTransport) WrappedRoundTripper() http.RoundTripper { return t.rt }

type limitedBody struct {
	body      io.ReadCloser
	left, max int64
	announced int64
	err       error
}

func (b *limitedBody) over() error {
	b.err = fail(KindInput, -1, "a response of the API server exceeds the budget of %d bytes for one uncached read", b.max)
	return b.err
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.announced > b.max {
		return 0, b.over()
	}
	if b.left <= 0 {
		// At the budget: the body must end here.
		var one [1]byte
		n, err := b.body.Read(one[:])
		if n > 0 {
			return 0, b.over()
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.body.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }
