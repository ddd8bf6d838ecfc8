// Package plans holds SPEC O8's decisions, pure: whether a target under
// applyPolicy Manual starts a plan Job, makes a TerraformPlan from a
// finished one, waits for approval, or applies an approved plan; which
// plans are superseded, applied or changed; which finished plans are
// deleted (10 kept, A3-68); and the names and labels of a plan (A1-146,
// A1-147). The workload controller gathers the inputs and writes.
package plans
