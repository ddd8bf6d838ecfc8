package faultkit

import "testing"

func TestParseMetrics(t *testing.T) {
	m, err := ParseMetrics(`# HELP captf_api_requests_total x
# TYPE captf_api_requests_total counter
captf_api_requests_total{resource="secrets",verb="get"} 12
captf_api_requests_total{resource="terraformclusters/status",verb="update"} 3
captf_mirror_writes_total{result="created"} 5
workqueue_depth{name="terraformcluster"} 0
weird{a="x\"y",b="1\\2"} 1e+06
go_goroutines 42
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Get("captf_api_requests_total", "verb", "get"); got != 12 {
		t.Errorf("get requests = %v", got)
	}
	if got := m.Sum("captf_api_requests_total", nil); got != 15 {
		t.Errorf("all requests = %v", got)
	}
	if got := m.Sum("weird", map[string]string{"a": `x"y`, "b": `1\2`}); got != 1e6 {
		t.Errorf("escaped labels: %v", got)
	}
	if got := m.Sum("go_goroutines", nil); got != 42 {
		t.Errorf("no labels: %v", got)
	}
	before, _ := ParseMetrics(`captf_api_requests_total{resource="secrets",verb="get"} 2` + "\n")
	d := Diff(before, m)
	if got := FormatCounts(d.Requests()); got != "get secrets=10, update terraformclusters/status=3" {
		t.Errorf("diff = %s", got)
	}
	if got := FormatCounts(nil); got != "none" {
		t.Errorf("no counts = %s", got)
	}
	if got := FormatFaultCounts(map[string]int64{"reset": 2, "error": 1}); got != "error=1, reset=2" {
		t.Errorf("fault counts = %s", got)
	}
}
