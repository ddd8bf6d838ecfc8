// Package runclass decides how a Terraform run ended (SPEC O1, O2), from
// what the manager gathered: the Job (its conditions, in the Job cache),
// the bounded facts of the Job's own pod ([Pod], read once when the Job
// finished; [FromPod]) and the runner's result document in the pod's
// termination message (pkg/runresult).
//
//   - [Finished] classifies a finished Job: Succeeded, Failed (a step, the
//     image's layout, the runner, or unknown when no document can be
//     read, the pod being gone included), DeadlineExceeded, or
//     Interrupted: the pod was evicted, preempted or lost with its node
//     (the Job's pod failure policy, or the pod's DisruptionTarget
//     condition), deleted while it ran, or stopped by a signal (the
//     document's interrupted kind). A pod that is gone is never an
//     interruption. [Gone] is a recorded run whose Job is gone.
//   - [Vanished] is a Job deleted while it ran: interrupted, so its apply
//     (or destroy) stays due (upstream A3-89).
//   - [PullFailureOf] reads an image that cannot be pulled from a running
//     Job's pending pod, and [StopForPull] says when the manager ends such a
//     Job: its generation is outdated, or it has failed to pull for
//     [PullGrace] (SPEC O2: ImagePullFailed within a minute, not after the
//     deadline).
//   - [NewRecord] turns a classification into a [Record]: the API's
//     status.lastRun (v1alpha1.LastRun), whose outcome is always the
//     run's record's (T7), and [Headline], [Summary] and [Plan] word the
//     condition and the RunFinished and PlanSummary events.
//
// Trust: a tenant can create pods that claim a Job (its label, an owner
// reference). Only the one pod controlling the Job is read; when more
// claim it, none is ([Pod.Claims]), and the run is reported from the Job
// alone. Nothing here keeps more than bounded fields of a pod.
//
// The package is pure: no client, no I/O, no logging. The workload
// controller calls [Finished], [Gone] and [NewRecord] to record
// status.lastRun once per recorded Job (SPEC O1, workload/lastrun.go),
// before it decides from the record, so an interrupted run is retried at
// once and not counted (O2, workload/interrupt.go); it reads the pod of a
// running Job none of whose pods is ready and calls [StopForPull] and
// [Pulled] to end and record a Job whose image cannot be pulled
// (workload/pull.go; docs/design.md, "Run results").
package runclass
