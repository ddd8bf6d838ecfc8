// Package envfilter decides which environment variables the in-Job runner
// passes on to Terraform.
//
// It owns the filtering half of SPEC rule J6: every variable whose name starts
// with TF_ or KUBE_ is removed, except TF_IN_AUTOMATION, TF_INPUT and
// KUBE_NAMESPACE, which the Job itself sets (J3). The package is pure: it
// never reads the process environment and never sees a value it returns in
// the dropped list, so callers can log that list (names only, SPEC X1).
package envfilter
