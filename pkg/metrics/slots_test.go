package metrics

import (
	"sort"
	"strings"
	"testing"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/captf/captf/pkg/slots"
)

// SPEC O4, X1: the Job cap metrics exist from the start with every series
// of their fixed label sets (pkg/slots's class and cap names), and carry
// no other label: no object, cluster or namespace.
func TestSlotMetricsRegisteredO4(t *testing.T) {
	Register()
	var classes, caps []string
	for _, c := range slots.Classes {
		classes = append(classes, c.String())
	}
	for _, s := range slots.Scopes {
		caps = append(caps, s.String())
	}
	if strings.Join(classes, ",") != strings.Join(slotClasses, ",") || strings.Join(caps, ",") != strings.Join(slotCaps, ",") {
		t.Fatalf("labels %v %v differ from pkg/slots's %v %v", slotClasses, slotCaps, classes, caps)
	}
	var both, byClass []string
	for _, class := range classes {
		for _, c := range caps {
			both = append(both, "cap="+c+",class="+class)
		}
		byClass = append(byClass, "class="+class)
	}
	sort.Strings(both)
	sort.Strings(byClass)
	want := map[string][]string{
		"captf_jobs_waiting_for_slot": both,
		"captf_job_slot_waits_total":  both,
		"captf_job_slot_wait_seconds": byClass,
	}
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, mf := range families {
		if _, ok := want[mf.GetName()]; !ok {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()] = append(got[mf.GetName()], strings.Join(labels, ","))
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
