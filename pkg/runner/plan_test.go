package runner

import (
	"strings"
	"testing"

	"github.com/captf/captf/pkg/runresult"
)

// TestReadPlanO8: the summary and the fingerprint of show -json's plan
// (SPEC O8): counts by upstream's actions, resources sorted with their
// action and redacted, no-ops left out; the fingerprint is the same for
// the same changes in another order or with an unchanged resource added,
// and differs for another planned value, action, address or output.
func TestReadPlanO8(t *testing.T) {
	const base = `{"format_version":"1.2","resource_changes":[
	  {"address":"b.x","change":{"actions":["update"],"after":{"k":"v1","n":1},"after_unknown":{}}},
	  {"address":"a.y","change":{"actions":["delete","create"],"after":{"id":null},"after_unknown":{"id":true}}},
	  {"address":"c.z[\"secret-key\"]","change":{"actions":["create"],"after":{"s":"x"}}},
	  {"address":"d.gone","change":{"actions":["delete"],"after":null}}
	],"output_changes":{"o":{"actions":["update"],"after":"v"}}}`
	redact := func(s string) string { return strings.ReplaceAll(s, "secret-key", "(sensitive)") }
	p, err := readPlan([]byte(base), redact)
	if err != nil {
		t.Fatal(err)
	}
	if want := (runresult.Changes{Create: 1, Update: 1, Replace: 1, Delete: 1}); p.Changes != want || p.OutputChanges != 1 {
		t.Fatalf("counts %+v outputs %d, want %+v and 1", p.Changes, p.OutputChanges, want)
	}
	wantRes := []runresult.PlanResource{{Address: "a.y", Action: "replace"}, {Address: "b.x", Action: "update"},
		{Address: `c.z["(sensitive)"]`, Action: "create"}, {Address: "d.gone", Action: "delete"}}
	if len(p.Resources) != len(wantRes) {
		t.Fatalf("resources %+v", p.Resources)
	}
	for i := range wantRes {
		if p.Resources[i] != wantRes[i] {
			t.Fatalf("resources %+v, want %+v", p.Resources, wantRes)
		}
	}
	if !strings.HasPrefix(p.Hash, HashPrefix) || len(p.Hash) != len(HashPrefix)+64 {
		t.Fatalf("hash %q", p.Hash)
	}
	for _, tc := range []struct {
		name string
		doc  string
		same bool
	}{
		{"reordered keys and changes", `{"resource_changes":[
		  {"address":"d.gone","change":{"actions":["delete"],"after":null}},
		  {"address":"c.z[\"secret-key\"]","change":{"actions":["create"],"after":{"s":"x"}}},
		  {"address":"b.x","change":{"actions":["update"],"after_unknown":{},"after":{"n":1,"k":"v1"}}},
		  {"address":"a.y","change":{"actions":["delete","create"],"after":{"id":null},"after_unknown":{"id":true}}}
		],"output_changes":{"o":{"actions":["update"],"after":"v"}}}`, true},
		{"a no-op added", strings.Replace(base, `"resource_changes":[`, `"resource_changes":[{"address":"e.same","change":{"actions":["no-op"],"after":{"q":1}}},`, 1), true},
		{"another value", strings.Replace(base, `"v1"`, `"v2"`, 1), false},
		{"another action", strings.Replace(base, `["delete","create"]`, `["create","delete"]`, 1), false},
		{"another address", strings.Replace(base, `"b.x"`, `"b.w"`, 1), false},
		{"another output", strings.Replace(base, `"after":"v"`, `"after":"w"`, 1), false},
		{"a number written otherwise", strings.Replace(base, `"n":1`, `"n":1.0`, 1), false},
	} {
		q, err := readPlan([]byte(tc.doc), redact)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (q.Hash == p.Hash) != tc.same {
			t.Errorf("%s: hash equal = %v, want %v", tc.name, q.Hash == p.Hash, tc.same)
		}
	}
	if _, err := readPlan([]byte(`{"resource_changes":[`), redact); err == nil {
		t.Error("an unreadable plan must be an error")
	}
}

// TestExpectPlanStepsO8: apply --expect-plan plans to a file, reads it,
// and applies that file (gated on the fingerprint); plan never applies.
func TestExpectPlanStepsO8(t *testing.T) {
	names := func(c config) string {
		var s []string
		for _, st := range c.steps() {
			n := st.name
			if st.gated {
				n += "(gated:" + st.args[len(st.args)-1] + ")"
			}
			s = append(s, n)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		cfg  config
		want string
	}{
		{config{command: "plan"}, "init,plan,show"},
		{config{command: "apply", expectPlan: "sha256:x"}, "init,plan,show,apply(gated:" + PlanFile + ")"},
		{config{command: "apply"}, "init,apply"},
	} {
		if got := names(tc.cfg); got != tc.want {
			t.Errorf("%s %q: steps %s, want %s", tc.cfg.command, tc.cfg.expectPlan, got, tc.want)
		}
	}
}
