package runner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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
		{config{command: "apply", guardDeletes: true}, "init,plan,show,apply(gated:" + PlanFile + ")"},
		{config{command: "apply"}, "init,apply"},
	} {
		if got := names(tc.cfg); got != tc.want {
			t.Errorf("%s %q: steps %s, want %s", tc.cfg.command, tc.cfg.expectPlan, got, tc.want)
		}
	}
}

// TestGateO8: what the gated apply step decides from the saved plan, with
// --expect-plan (the approved fingerprint) and with --guard-deletes
// (upstream A3-64: a delete or a replace stops the apply).
func TestGateO8(t *testing.T) {
	plan := func(c runresult.Changes) *runresult.Plan {
		return &runresult.Plan{Changes: c, Hash: "sha256:h"}
	}
	for _, tc := range []struct {
		name string
		cfg  config
		plan *runresult.Plan
		want runresult.Kind
	}{
		{"approved plan", config{expectPlan: "sha256:h"}, plan(runresult.Changes{Delete: 1}), ""},
		{"another plan", config{expectPlan: "sha256:other"}, plan(runresult.Changes{Update: 1}), runresult.KindPlanChanged},
		{"no plan read", config{expectPlan: "sha256:h"}, nil, runresult.KindPlanChanged},
		{"guard: update, import, forget", config{guardDeletes: true}, &runresult.Plan{Changes: runresult.Changes{Create: 1, Update: 2}, Import: 1, Forget: 1}, ""},
		{"guard: nothing", config{guardDeletes: true}, plan(runresult.Changes{}), ""},
		{"guard: delete", config{guardDeletes: true}, plan(runresult.Changes{Delete: 1}), runresult.KindDestructive},
		{"guard: replace", config{guardDeletes: true}, plan(runresult.Changes{Update: 1, Replace: 1}), runresult.KindDestructive},
		{"guard: no plan read", config{guardDeletes: true}, nil, runresult.KindDestructive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := &report{}
			rep.result.Plan = tc.plan
			why, kind := gate(tc.cfg, rep)
			assert.Equal(t, tc.want, kind)
			assert.Equal(t, tc.want != "", why != "", "a stop says why: %q", why)
		})
	}
}

// TestGuardDeletesFlagO8: --guard-deletes is an apply flag, and an
// approved plan (--expect-plan) is applied as approved, never guarded.
func TestGuardDeletesFlagO8(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"apply", "--guard-deletes", "--expect-plan=sha256:x"}, "apply: --guard-deletes and --expect-plan exclude each other"},
		{[]string{"destroy", "--guard-deletes"}, "flag provided but not defined: -guard-deletes"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), tt.args, nil, &stdout, &stderr)
		assert.Equal(t, ExitRunnerError, code)
		assert.Contains(t, stderr.String(), tt.want)
	}
}
