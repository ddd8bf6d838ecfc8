// Package runner is the in-Job runner, `captf runner apply|destroy`.
//
// It owns the execution half of SPEC rule J6 (the filtering half lives in
// envfilter): it drops the forbidden TF_ and KUBE_ variables and logs their
// names (never values, X1), then runs `terraform init -input=false` followed
// by `terraform apply -auto-approve -input=false` or `terraform destroy
// -auto-approve -input=false` in the module directory (J5, J6), and exits
// with Terraform's exit code, which the Job controller turns into the J7
// conditions.
//
// Stop requests (SIGTERM, SIGINT, or cancellation of the caller's context)
// are forwarded to Terraform so that it can release its state lock; a second
// signal or the --stop-timeout kills it. docs/runtime-environment.md is the
// operator-facing description, including the exit codes.
package runner
