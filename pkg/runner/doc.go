// Package runner is the in-Job runner, `captf runner apply|destroy|drift|restore`.
//
// It owns the execution half of SPEC rule J6 (the filtering half lives in
// envfilter): it drops the forbidden TF_ and KUBE_ variables and logs their
// names (never values, X1), then runs `terraform init -input=false` followed
// by `terraform apply -auto-approve -input=false` or `terraform destroy
// -auto-approve -input=false` (J5, J6), each with -no-color and
// -lock-timeout (T8), and exits with Terraform's exit code, which the Job
// controller turns into the J7 conditions.
//
// With --workdir it runs in a writable copy of the module directory, which
// it never modifies (T2); with --state-namespace and --state-suffix it
// replaces the module's backend with the kubernetes backend, configured on
// init's command line (T2); the object's variables arrive in CAPTF_VARIABLES
// and reach Terraform as captf.auto.tfvars.json in the working copy (T3);
// --home gives Terraform a writable HOME (T6).
//
// With --result it writes the result document (SPEC O1, pkg/runresult)
// there when it ends, the Job's termination message: the operation, the
// image (--image), the runtime's version, the steps with exit codes and
// durations, the planned changes read from Terraform's plan summary, and
// for a run that did not succeed an error kind (step, image-layout,
// interrupted, runner), the step and the end of its error output with every
// value of the environment, the credential files (--credentials), the
// variables and the inputs redacted. Before anything runs it checks that
// the module directory holds Terraform configuration (upstream's
// image-layout preflight, SPEC O2: ImageInvalid).
//
// `captf runner drift` (SPEC O7, upstream A3-54) runs init, `terraform
// apply -refresh-only -auto-approve` (the state takes in what changed
// outside Terraform; nothing is changed in the infrastructure) and
// `terraform plan -refresh=false -detailed-exitcode`: the plan is the
// drift. Exit code 2 of the plan is drift found, and the run succeeds; the
// document's drift holds the counts and at most 16 resource addresses
// (addresses only, redacted like the tail), and is set only when the plan
// ran to its end (drift.go).
//
// `captf runner restore` (SPEC O5, upstream A3-44, A3-56) decompresses the
// backup mounted at --restore-chunks, then runs init, `terraform state push
// -force` of it and `terraform state list` as a check (restore.go).
//
// Stop requests (SIGTERM, SIGINT, or cancellation of the caller's context)
// are forwarded to Terraform so that it can release its state lock; a second
// signal or the --stop-timeout kills it. docs/runtime-environment.md is the
// operator-facing description, including the exit codes.
package runner
