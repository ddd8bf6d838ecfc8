package manager

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// B14: the webhook's client is its own copy of the manager's configuration:
// its own rate limiter, budget and user agent; the controllers' is untouched.
func TestB14WebhookConfigIsItsOwn(t *testing.T) {
	o := NewOptions()
	o.WebhookQPS, o.WebhookBurst = 3, 7
	shared := flowcontrol.NewTokenBucketRateLimiter(50, 100)
	cfg := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 50, Burst: 100, UserAgent: "captf-manager/test", RateLimiter: shared}
	got := webhookConfig(cfg, o)
	require.InDelta(t, 3, got.QPS, 0)
	require.Equal(t, 7, got.Burst)
	require.Nil(t, got.RateLimiter, "never the controllers' limiter: client-go builds one from QPS and Burst")
	require.True(t, strings.HasSuffix(got.UserAgent, " admission"), got.UserAgent)
	require.Equal(t, WebhookUserAgent(), got.UserAgent)
	require.Equal(t, cfg.Host, got.Host)
	require.InDelta(t, 50, cfg.QPS, 0, "the controllers' configuration is unchanged")
	require.Equal(t, "captf-manager/test", cfg.UserAgent)
	require.Same(t, shared, cfg.RateLimiter)
}

func TestB14WebhookOptionsValidate(t *testing.T) {
	o := NewOptions()
	require.NoError(t, o.Validate())
	o.WebhookQPS, o.WebhookBurst = 0, 0
	err := o.Validate()
	require.ErrorContains(t, err, "--webhook-kube-api-qps")
	require.ErrorContains(t, err, "--webhook-kube-api-burst")
	o = NewOptions()
	o.WebhookPort, o.WebhookClientCA = 0, "/ca.crt"
	require.ErrorContains(t, o.Validate(), "--webhook-client-ca needs the webhook server")
}
