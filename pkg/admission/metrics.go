package admission

import (
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

// Values of the result label of captf_admission_requests_total.
const (
	resultAllowed = "allowed" // the validator allowed the request
	resultDenied  = "denied"  // the validator refused it with field errors
	// resultError covers everything else: internal errors (A5) and panics,
	// and requests refused before a validator ran (method, content type,
	// size, malformed review, v1beta1, wrong resource or kind).
	resultError = "error"
	// resultThrottled is a request answered 429 over the in-flight cap
	// (SPEC B5), before anything of it was read (operation "unknown").
	resultThrottled = "throttled"
)

// operationUnknown labels requests whose operation is not known: refused
// before decoding, or naming an operation Kubernetes does not have. Label
// values come from a fixed set so a client cannot grow the series.
const operationUnknown = "unknown"

var (
	requestsTotal = metrics.NewCounterVec(&metrics.CounterOpts{
		Namespace:      "captf",
		Subsystem:      "admission",
		Name:           "requests_total",
		Help:           "Admission requests answered by the captf webhook, by operation and result (allowed, denied, error, throttled: refused with 429 over the in-flight cap).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation", "result"})

	requestDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Namespace: "captf",
		Subsystem: "admission",
		Name:      "request_duration_seconds",
		Help:      "Time the captf webhook took to answer an admission request, from reading the body to writing the response, by operation.",
		// The API server's webhook timeout is at most 30s; SubjectAccessReviews
		// and lister reads are expected in the millisecond range.
		Buckets:        []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		StabilityLevel: metrics.ALPHA,
	}, []string{"operation"})

	sarDenials = metrics.NewCounter(&metrics.CounterOpts{
		Namespace:      "captf",
		Name:           "sar_denials_total",
		Help:           "Identity create or update requests refused because a SubjectAccessReview did not allow the user to get the referenced Secret (SPEC A2, A3).",
		StabilityLevel: metrics.ALPHA,
	})
)

// Registering at package initialisation happens exactly once per process, so
// creating several servers (tests do) never registers twice.
func init() {
	legacyregistry.MustRegister(requestsTotal, requestDuration, sarDenials)
}

// RecordSARDenial counts one request refused because a SubjectAccessReview
// said no (SPEC A2, A3). The identity validator calls it; a failed review is
// an internal error (A5) and is not counted here.
func RecordSARDenial() {
	sarDenials.Inc()
}

// operationLabel maps a request's operation to a bounded label value.
func operationLabel(op admissionv1.Operation) string {
	switch op {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
		return string(op)
	}
	return operationUnknown
}
