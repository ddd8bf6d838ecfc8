package metrics

import (
	"sort"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"
)

// SPEC T7, X1: the Job counters are registered with every series of their
// fixed label sets at 0 from the start (so a failed/total ratio has both
// sides before the first failure), and carry no other label: no object,
// namespace or identity.
func TestJobCountersRegisteredT7(t *testing.T) {
	Register()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"captf_job_runs_total": {
			"action=apply,outcome=deadline_exceeded", "action=apply,outcome=failed", "action=apply,outcome=succeeded",
			"action=destroy,outcome=deadline_exceeded", "action=destroy,outcome=failed", "action=destroy,outcome=succeeded",
		},
		"captf_job_retries_total": {
			"action=apply,trigger=annotation", "action=apply,trigger=backoff",
			"action=destroy,trigger=annotation", "action=destroy,trigger=backoff",
		},
		"captf_jobs_pruned_total": {"action=apply", "action=destroy"},
	}
	got := map[string][]string{}
	for _, mf := range families {
		if _, ok := want[mf.GetName()]; !ok {
			continue
		}
		if !strings.Contains(mf.GetHelp(), "ALPHA") {
			t.Errorf("%s: help %q lacks the stability level", mf.GetName(), mf.GetHelp())
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()] = append(got[mf.GetName()], strings.Join(labels, ","))
			if v := m.GetCounter().GetValue(); v != 0 {
				t.Errorf("%s{%s} = %v before any run", mf.GetName(), strings.Join(labels, ","), v)
			}
		}
	}
	for name, series := range want {
		g := got[name]
		sort.Strings(g)
		if strings.Join(g, " ") != strings.Join(series, " ") {
			t.Errorf("%s series:\n got  %v\n want %v", name, g, series)
		}
	}
}
