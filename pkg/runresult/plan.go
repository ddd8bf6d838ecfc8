package runresult

import (
	"fmt"
	"slices"
)

// Plan actions, upstream's names (A1-141): a replacement is one replace,
// not a create and a delete.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionReplace = "replace"
	ActionDelete  = "delete"
	ActionRead    = "read"
	ActionForget  = "forget"
)

var planActions = []string{ActionCreate, ActionUpdate, ActionReplace, ActionDelete, ActionRead, ActionForget}

// Plan is a saved plan (SPEC O8): its counts, the first resources it
// changes with their action, and its fingerprint. Addresses and actions
// only, never a value.
type Plan struct {
	Changes
	// Import, Move and Forget count the resources the plan imports, moves
	// (a previous address) and forgets (removed from the state, not
	// destroyed).
	Import int `json:"import,omitempty"`
	Move   int `json:"move,omitempty"`
	Forget int `json:"forget,omitempty"`
	// OutputChanges counts the root module outputs the plan changes.
	OutputChanges int `json:"outputChanges,omitempty"`
	// Resources are the first MaxPlanResources changed resources in
	// address order, each at most MaxAddress bytes.
	Resources []PlanResource `json:"resources,omitempty"`
	// Truncated says Resources leaves some out.
	Truncated bool `json:"truncated,omitempty"`
	// Hash is the plan's fingerprint: equal for two plans of one change,
	// different for another change (pkg/runner's planHash says of what).
	Hash string `json:"hash"`
}

// PlanResource is one changed resource of a plan.
type PlanResource struct {
	Address string `json:"address"`
	Action  string `json:"action"`
}

// Empty reports whether p changes nothing: no resource, no output.
func (p *Plan) Empty() bool {
	return p.Create+p.Update+p.Replace+p.Delete+p.Import+p.Move+p.Forget+p.OutputChanges == 0
}

// validate checks p's bounds; the errors name the field, never its value.
func (p *Plan) validate() []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if !p.Changes.valid() {
		bad("plan holds a count out of range")
	}
	for _, n := range []int{p.Import, p.Move, p.Forget, p.OutputChanges} {
		if n < 0 || n > MaxCount {
			bad("plan holds a count out of range")
			break
		}
	}
	if p.Hash == "" || !line(p.Hash, MaxPlanHash) {
		bad("plan.hash is empty, over %d bytes or holds control characters", MaxPlanHash)
	}
	if len(p.Resources) > MaxPlanResources {
		bad("plan.resources holds more than %d resources", MaxPlanResources)
	}
	for i, r := range p.Resources {
		if r.Address == "" || !line(r.Address, MaxAddress) {
			bad("plan.resources[%d].address is empty, over %d bytes or holds control characters", i, MaxAddress)
		}
		if !slices.Contains(planActions, r.Action) {
			bad("plan.resources[%d].action is not an action", i)
		}
	}
	return errs
}

// cleaned is a copy of p with its addresses cleaned and shortened and at
// most MaxPlanResources of them (Truncated when some were dropped).
func (p *Plan) cleaned() *Plan {
	c := *p
	c.Resources = nil
	for _, r := range p.Resources {
		if r.Address = Shorten(cleanLine(r.Address), MaxAddress); r.Address == "" {
			continue
		}
		if len(c.Resources) == MaxPlanResources {
			c.Truncated = true
			break
		}
		c.Resources = append(c.Resources, r)
	}
	return &c
}
