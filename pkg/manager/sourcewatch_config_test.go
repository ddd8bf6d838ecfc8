package manager

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/captf/captf/pkg/controllers/workload"
)

// Issue 25 (SPEC P2, P3): the source watches' client asks for
// uncompressed responses (an open gzip stream holds a decompressor of
// about 45 KB per source, for one small Secret) and spends the core
// client's budget: the same rate limiter, so --kube-api-qps still bounds
// the core client's requests and the watches together. Everything else
// (the server, the credentials, the request counting and watch wrappers,
// the user agent) is the core client's.
func TestSourceWatchClientIsUncompressedOnTheCoreBudget(t *testing.T) {
	cfg := &rest.Config{Host: "https://api.example", QPS: 50, Burst: 100, UserAgent: "captf/test", BearerToken: "t"}
	wrapped := 0
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { wrapped++; return rt })
	core, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	limiter := core.CoreV1().RESTClient().GetRateLimiter()
	require.NotNil(t, limiter)

	c := sourceWatchConfig(cfg, limiter)
	require.True(t, c.DisableCompression, "the source watches must not ask for gzip")
	require.False(t, cfg.DisableCompression, "the core client's configuration is left as it is")
	require.Same(t, limiter, c.RateLimiter)
	require.Equal(t, cfg.Host, c.Host)
	require.Equal(t, cfg.UserAgent, c.UserAgent)
	require.Equal(t, cfg.BearerToken, c.BearerToken)
	require.NotNil(t, c.WrapTransport)

	watches, err := kubernetes.NewForConfig(c)
	require.NoError(t, err)
	var got flowcontrol.RateLimiter = watches.CoreV1().RESTClient().GetRateLimiter()
	require.Same(t, limiter, got, "the watches spend the core client's tokens")
	require.Equal(t, 2, wrapped, "both clients keep the request-counting wrappers")
}

// B11: the source Secrets are read on every pass through the uncached
// clients, whose every response has a size budget; Kube only serves tests
// that build Deps without them.
func TestSourceReadsHaveASizeBudget(t *testing.T) {
	cfg := &rest.Config{Host: "https://api.example", QPS: 50, Burst: 100}
	core, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	d := &Deps{Kube: core}
	require.Same(t, core, d.sourceKube(), "without uncached clients, Kube")
	d.Uncached, err = workload.NewUncached(cfg, core)
	require.NoError(t, err)
	require.Same(t, d.Uncached.Kube, d.sourceKube())
}
