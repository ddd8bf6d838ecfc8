// Package envfilter decides which environment variables the in-Job runner
// passes on to Terraform.
//
// It owns the filtering half of SPEC rule J6: every variable whose name starts
// with TF_ or KUBE_ is removed, except TF_IN_AUTOMATION, TF_INPUT and
// KUBE_NAMESPACE, which the Job itself sets (J3). SPEC rule B7 adds two
// exact names: TERRAFORM_CONFIG (the legacy TF_CLI_CONFIG_FILE) and GODEBUG
// (http2debug prints request headers, i.e. credentials). The package is pure: it
// never reads the process environment and never sees a value it returns in
// the dropped list, so callers can log that list (names only, SPEC X1).
package envfilter
