package admission

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/captf/captf/pkg/admission/certs"
)

// TestB5InFlightCapAnswers429 sends MaxInFlight slow requests, then one
// more while they are all inside the validator: the extra one is answered
// 429 with Retry-After at once (it does not wait for a slot), the others
// succeed once released, the server keeps serving, and
// captf_admission_requests_total counts each request once.
//
// Not parallel: it reads the process-wide metrics; CONNECT, which only the
// metrics test also sends (not in parallel either), keeps the counts apart.
func TestB5InFlightCapAnswers429(t *testing.T) {
	const maxInFlight = 3
	counter := func(op, result string) float64 {
		return gathered(t, "captf_admission_requests_total", map[string]string{"operation": op, "result": result}).GetCounter().GetValue()
	}
	allowedBefore, throttledBefore := counter("CONNECT", resultAllowed), counter(operationUnknown, resultThrottled)

	entered := make(chan struct{}, maxInFlight+1)
	release := make(chan struct{})
	dir := t.TempDir()
	caPEM, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	ts := startServerOpts(t, Options{Addr: "127.0.0.1:0", CertDir: dir, MaxInFlight: maxInFlight}, caPEM,
		identityRoute(func(ctx context.Context, req *admissionv1.AdmissionRequest) Result {
			if req.Name == "slow" {
				entered <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return InternalError(ctx.Err())
				}
			}
			return Allow()
		}))
	// Registered after the server's cleanup, so it runs first: a failed
	// assertion does not leave the slow requests waiting for the shutdown.
	releaseAll := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseAll)

	// post sends one review outside the test goroutine (no require there).
	type answer struct {
		status     int
		retryAfter string
		body       string
		err        error
	}
	post := func(body []byte) answer {
		resp, err := ts.client.Post(ts.base+identityPath, "application/json", bytes.NewReader(body))
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(data), err: err}
	}

	var wg sync.WaitGroup
	slow := make([]answer, maxInFlight)
	for i := range maxInFlight {
		body := reviewJSON(t, identityRequest(t, admissionv1.Connect, "slow"))
		wg.Go(func() { slow[i] = post(body) })
	}
	// Every slot is taken once each slow request is inside the validator.
	for range maxInFlight {
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the slow requests did not all reach the validator")
		}
	}

	// One more: refused at once, while the others still hold their slots.
	extra := post(reviewJSON(t, identityRequest(t, admissionv1.Connect, "fine")))
	require.NoError(t, extra.err)
	require.Equal(t, http.StatusTooManyRequests, extra.status, "body: %s", extra.body)
	require.Equal(t, "1", extra.retryAfter)
	require.Contains(t, extra.body, "too many concurrent admission requests")
	require.NotContains(t, extra.body, secretValue)

	releaseAll()
	wg.Wait()
	for i, a := range slow {
		require.NoError(t, a.err, "slow request %d", i)
		require.Equal(t, http.StatusOK, a.status, "slow request %d: %s", i, a.body)
	}
	// The slots are free again.
	require.True(t, ts.review(t, identityPath, identityRequest(t, admissionv1.Connect, "after")).Allowed)

	require.Equal(t, allowedBefore+maxInFlight+1, counter("CONNECT", resultAllowed))
	require.Equal(t, throttledBefore+1, counter(operationUnknown, resultThrottled))
}

// TestB5DefaultInFlightCap: zero means DefaultMaxInFlight.
func TestB5DefaultInFlightCap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := certs.WriteSelfSigned(dir, []string{"127.0.0.1"})
	require.NoError(t, err)
	srv, err := NewServer(Options{Addr: "127.0.0.1:0", CertDir: dir}, identityRoute(func(context.Context, *admissionv1.AdmissionRequest) Result { return Allow() }))
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	limit, ok := srv.srv.Handler.(*inFlightLimit)
	require.True(t, ok, "the server's handler is the in-flight limit")
	require.Equal(t, DefaultMaxInFlight, cap(limit.slots))
}
