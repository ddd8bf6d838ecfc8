package metrics

import (
	"net/http"
	"strings"

	"k8s.io/component-base/metrics"
)

// APIRequests counts the manager's requests to the API server by verb and
// resource (client-go's own metrics have neither), so an operator or the
// benchmark can see what a sync period costs.
var APIRequests = metrics.NewCounterVec(&metrics.CounterOpts{
	Name:           "captf_api_requests_total",
	Help:           "Requests the manager made to the API server, by verb (get, list, watch, create, update, patch, delete) and resource (with subresource, e.g. terraformclusters/status).",
	StabilityLevel: metrics.ALPHA,
}, []string{"verb", "resource"})

// CountRequests wraps a client transport to count requests in APIRequests.
func CountRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripper{next: rt}
}

type roundTripper struct{ next http.RoundTripper }

func (r roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := Classify(req.Method, req.URL.Path, req.URL.Query().Get("watch") == "true")
	APIRequests.WithLabelValues(verb, resource).Inc()
	return r.next.RoundTrip(req)
}

// Classify turns an API request into the Kubernetes verb and resource
// (resource[/subresource]); unknown paths give resource "other".
func Classify(method, path string, watch bool) (verb, resource string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// /api/v1/... or /apis/<group>/<version>/...
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return strings.ToLower(method), "other"
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // namespaced resource
	} else if len(parts) == 2 && parts[0] == "namespaces" {
		parts = []string{"namespaces", parts[1]}
	}
	if len(parts) == 0 {
		return strings.ToLower(method), "other"
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case watch:
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}
