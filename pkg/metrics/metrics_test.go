package metrics

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/component-base/metrics"
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
			"action=apply,outcome=deadline_exceeded", "action=apply,outcome=destructive", "action=apply,outcome=failed", "action=apply,outcome=interrupted", "action=apply,outcome=plan_changed", "action=apply,outcome=succeeded",
			"action=destroy,outcome=deadline_exceeded", "action=destroy,outcome=failed", "action=destroy,outcome=interrupted", "action=destroy,outcome=succeeded",
			"action=drift,outcome=deadline_exceeded", "action=drift,outcome=failed", "action=drift,outcome=interrupted", "action=drift,outcome=succeeded",
			"action=restore,outcome=deadline_exceeded", "action=restore,outcome=failed", "action=restore,outcome=interrupted", "action=restore,outcome=succeeded",
		},
		"captf_job_retries_total": {
			"action=apply,trigger=annotation", "action=apply,trigger=backoff", "action=apply,trigger=interrupted",
			"action=destroy,trigger=annotation", "action=destroy,trigger=backoff", "action=destroy,trigger=interrupted",
		},
		"captf_jobs_pruned_total": {"action=apply", "action=destroy", "action=drift", "action=restore"},
		// SPEC O5 (A7-42): every result of the backups and restores at 0.
		"captf_state_backups_total":  {"result=created", "result=pruned", "result=skipped"},
		"captf_state_restores_total": {"result=failed", "result=refused", "result=succeeded"},
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

// fixedLabels are the label names whose values come from fixed sets: write
// and read results, condition reasons, Job actions, outcomes and retry
// triggers, API verbs and resource kinds.
var fixedLabels = map[string]bool{"result": true, "reason": true, "action": true, "outcome": true, "trigger": true, "verb": true, "resource": true}

// variableLabels matches the variable labels in a prometheus Desc's String.
var variableLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)

// SPEC B15, X1: no metric of the manager has a label whose values follow
// objects (a name, a namespace, an identity), so no series outlives its
// object and a tenant's churn cannot grow the registry. A new metric with
// such a label fails here.
func TestNoLabelFollowsObjects(t *testing.T) {
	Register()
	if len(all) < 11 {
		t.Fatalf("only %d metrics found", len(all))
	}
	for _, m := range all {
		descs := descriptions(m)
		if len(descs) == 0 {
			t.Errorf("%T describes nothing", m)
		}
		for _, d := range descs {
			match := variableLabels.FindStringSubmatch(d)
			if match == nil {
				t.Fatalf("cannot read the labels of %s", d)
			}
			for _, l := range strings.Split(match[1], ",") {
				l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")")
				if l != "" && !fixedLabels[l] {
					t.Errorf("%s has label %q, whose values are not a fixed set", d, l)
				}
			}
		}
	}
}

// descriptions returns what m's Describe sends, as strings. (Through
// reflection: the Desc type is prometheus's, which the module does not
// require directly.)
func descriptions(m metrics.Registerable) []string {
	describe := reflect.ValueOf(m).MethodByName("Describe")
	ch := reflect.MakeChan(reflect.ChanOf(reflect.BothDir, describe.Type().In(0).Elem()), 16)
	describe.Call([]reflect.Value{ch})
	ch.Close()
	var out []string
	for {
		v, ok := ch.Recv()
		if !ok {
			return out
		}
		out = append(out, fmt.Sprint(v.Interface()))
	}
}
