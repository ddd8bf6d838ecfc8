// Package jobs builds the Kubernetes Job that runs Terraform for a workload
// object (TerraformCluster, TerraformMachine, TerraformMachinePool) and reads
// a Job's outcome back. It is pure: no client, no I/O, no logging. The
// workload controller decides when a Job is needed and creates it; this
// package only says what the Job is, so the whole Job can be golden-tested.
//
// The package owns these rules of SPEC.md:
//
//   - J1, naming and marking: the Job's deterministic name of at most 63
//     characters ([Name]), the captf.io/managed=true label and the
//     controller owner reference to the object ([Build]). When a Job is
//     created, and that only one runs at a time, is the controller's part of
//     J1.
//   - J2: the mirror Secret reaches the container both as envFrom and as a
//     read-only Secret volume at [CredentialsMountPath], mode 0440, one file
//     per key.
//   - J3: TF_IN_AUTOMATION=1, TF_INPUT=0 and KUBE_NAMESPACE come first in the
//     container's env, where a mirror key (envFrom) cannot override them;
//     optional fields the spec calls unset, such as blockOwnerDeletion, are
//     absent (nil), not false.
//   - J4: activeDeadlineSeconds from the object ([DefaultActiveDeadlineSeconds]
//     when unset), backoffLimit 0.
//   - J5: the module image runs `captf runner apply|destroy` from [RunnerPath],
//     which an init container running the manager's --runner-image installs
//     into a shared emptyDir. The runner (J6) lives in pkg/runner.
//   - T3: spec.variables reach the runner as compact JSON in CAPTF_VARIABLES
//     ([EnvVariables]), after the J3 three; the object's env cannot set
//     CAPTF_* names. [ValidateVariables] checks what the CRD cannot.
//   - T6: the pod passes Pod Security "restricted" by default
//     ([PodSecurityContext], [ContainerSecurityContext], on both
//     containers), the object's overrides merged field by field; the root
//     filesystem is read-only and emptyDirs hold [WorkDir], [TmpDir] and
//     [HomeDir].
//   - T8: `--lock-timeout` from spec.jobs.lockTimeoutSeconds
//     ([DefaultLockTimeoutSeconds] when unset), with `--workdir` and `--home`.
//   - C5: the Job carries the captf.io/source-hash of the mirror it started
//     with ([SourceHashOf]).
//   - J7, reading: what a Job's status conditions say ([Status], [Finished]);
//     turning that into the ApplyJobSucceeded condition is the controller's.
//     [ActionOf] and [GenerationOf] read back which action and generation a
//     Job was created for.
//   - T7: attempt n > 1 of a generation is named by [AttemptName] (attempt 1
//     keeps [Name]) and annotated captf.io/attempt ([AttemptOf]); the
//     captf.io/retry value a Job acts on is recorded on it ([RetryOf]);
//     [FinishTime] reads when a Job finished.
//   - O1: the runner writes its result document to [ResultPath], the
//     Terraform container's termination message (policy File), and names
//     the module image in it (`--result`, `--image`).
//   - O2 (not wired): [Disrupted] reads a Job failed by a pod failure
//     policy on DisruptionTarget, for pkg/runclass; the Job carries no
//     such policy yet (see Build).
package jobs
