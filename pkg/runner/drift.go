package runner

import (
	"regexp"
	"slices"

	"github.com/captf/captf/pkg/runresult"
)

// SPEC O7 (upstream A3-54): `captf runner drift` refreshes the state
// (`apply -refresh-only`: the state takes in what changed outside
// Terraform, the infrastructure is left alone) and then plans without
// refreshing again, with -detailed-exitcode. The plan is what an apply
// would change to put the infrastructure back as the module says: that is
// the drift. Nothing is applied. The plan's exit code 2 (changes present)
// is drift found, not a failure: the run succeeds and the result document
// carries the counts and the addresses (never a value).

// step is one Terraform step: its name in the result document, its
// arguments, and whether its exit code 2 means changes (-detailed-exitcode).
type step struct {
	name     string
	args     []string
	detailed bool
	// show: the step's stdout is the saved plan's JSON, read by the
	// runner, never logged (O8).
	show bool
	// gated: the step runs only when the saved plan is the one
	// --expect-plan names, or with --guard-deletes deletes and replaces
	// nothing (O8).
	gated bool
}

// steps are the Terraform steps of cfg's operation, after init.
func (c config) steps() []step {
	init := step{name: runresult.StepInit, args: c.initArgs()}
	common := []string{"-input=false", "-no-color", c.lockTimeoutArg()}
	switch {
	case c.command == runresult.OperationRestore:
		return c.restoreSteps(init)
	case c.command == runresult.OperationPlan:
		return append([]step{init}, c.planSteps(common)...)
	case c.command == runresult.OperationApply && (c.expectPlan != "" || c.guardDeletes):
		apply := step{name: runresult.StepApply, args: append(append([]string{"apply"}, common...), PlanFile), gated: true}
		return append(append([]step{init}, c.planSteps(common)...), apply)
	case c.command != runresult.OperationDrift:
		return []step{init, {name: c.command, args: c.commandArgs()}}
	}
	return []step{
		init,
		{name: runresult.StepRefresh, args: append([]string{"apply", "-refresh-only", "-auto-approve"}, common...)},
		{name: runresult.StepPlan, args: append([]string{"plan", "-refresh=false", "-detailed-exitcode"}, common...), detailed: true},
	}
}

// planSteps save the plan and read it back (O8).
func (c config) planSteps(common []string) []step {
	return []step{
		{name: runresult.StepPlan, args: append(append([]string{"plan"}, common...), "-out="+PlanFile)},
		{name: runresult.StepShow, args: []string{"show", "-json", "-no-color", PlanFile}, show: true},
	}
}

// markChanges sets r.changes when st is a -detailed-exitcode step that
// exited 2 by itself (not killed, not by a signal).
func markChanges(st step, r *result) {
	r.changes = st.detailed && r.ran && r.signal == 0 && r.killed == "" && r.code == 2
}

// failedStep reports whether r is a step that did not succeed.
func failedStep(r result) bool { return !r.ran || (r.code != 0 && !r.changes) }

// actionLine is a resource's line in a plan: "# <address> will be ...".
var actionLine = regexp.MustCompile(`^\s*# (\S.*?) (will be created|will be updated in-place|will be destroyed|must be replaced|will be replaced, as requested)$`)

// address records the address of a resource line of the plan, in plan
// order, at most MaxDriftResources of them.
func (p *planScanner) address(l string) {
	m := actionLine.FindStringSubmatch(l)
	if m == nil || len(p.addresses) == runresult.MaxDriftResources || slices.Contains(p.addresses, m[1]) {
		return
	}
	p.addresses = append(p.addresses, m[1])
}

// drift returns the plan as drift, with the addresses redacted; nil when
// no plan summary was seen.
func (p *planScanner) drift(redact func(string) string) *runresult.Drift {
	c := p.changes()
	if c == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	d := &runresult.Drift{Changes: *c}
	for _, a := range p.addresses {
		d.Resources = append(d.Resources, redact(a))
	}
	return d
}
