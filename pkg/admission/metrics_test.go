package admission

import (
	"context"
	"errors"
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/component-base/metrics/legacyregistry"
)

// gathered returns the series of a metric family with exactly labels, read
// from legacyregistry the way /metrics exposes it; nil when absent.
func gathered(t *testing.T, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, family := range families {
		if family.GetName() != name {
			continue
		}
	metrics:
		for _, m := range family.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m
		}
	}
	return nil
}

// Not parallel: the metrics are process-wide. CONNECT, which no other test
// sends, keeps the counts apart anyway.
func TestMetricsCountRequestsByOperationAndResult(t *testing.T) {
	counter := func(op, result string) float64 {
		return gathered(t, "captf_admission_requests_total", map[string]string{"operation": op, "result": result}).GetCounter().GetValue()
	}
	observations := func(op string) uint64 {
		return gathered(t, "captf_admission_request_duration_seconds", map[string]string{"operation": op}).GetHistogram().GetSampleCount()
	}
	allowedBefore, deniedBefore, errorBefore := counter("CONNECT", resultAllowed), counter("CONNECT", resultDenied), counter("CONNECT", resultError)
	unknownBefore, observedBefore := counter(operationUnknown, resultError), observations("CONNECT")

	ts := startServer(t, identityRoute(func(_ context.Context, req *admissionv1.AdmissionRequest) Result {
		switch req.Name {
		case "allow":
			return Allow()
		case "deny":
			return Deny(field.ErrorList{field.Forbidden(field.NewPath("spec"), "no")})
		}
		return InternalError(errors.New("lister not synced"))
	}))
	for _, name := range []string{"allow", "deny", "error"} {
		ts.review(t, identityPath, identityRequest(t, admissionv1.Connect, name))
	}
	// An operation Kubernetes does not have is labelled unknown, so a
	// client cannot create series.
	odd := identityRequest(t, "EXPLODE", "allow")
	ts.review(t, identityPath, odd)
	resp, _ := ts.do(t, http.MethodPost, identityPath, "text/plain", nil)
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)

	require.Equal(t, allowedBefore+1, counter("CONNECT", resultAllowed))
	require.Equal(t, deniedBefore+1, counter("CONNECT", resultDenied))
	require.Equal(t, errorBefore+1, counter("CONNECT", resultError))
	require.Equal(t, observedBefore+3, observations("CONNECT"))
	require.GreaterOrEqual(t, counter(operationUnknown, resultError), unknownBefore+1)
	require.Equal(t, float64(0), counter("EXPLODE", resultAllowed))
}

func TestMetricsRecordSARDenial(t *testing.T) {
	before := gathered(t, "captf_sar_denials_total", nil).GetCounter().GetValue()
	RecordSARDenial()
	require.NotNil(t, gathered(t, "captf_sar_denials_total", nil), "registered in legacyregistry")
	require.Equal(t, before+1, gathered(t, "captf_sar_denials_total", nil).GetCounter().GetValue())
}
