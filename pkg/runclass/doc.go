// Package runclass decides how a Terraform run ended (SPEC O1, O2), from
// what the manager gathered: the Job (its conditions, in the Job cache),
// the bounded facts of the Job's own pod ([Pod], read once when the Job
// finished; [FromPod]) and the runner's result document in the pod's
// termination message (pkg/runresult).
//
//   - [Finished] classifies a finished Job: Succeeded, Failed (a step, the
//     image's layout, the runner, or unknown when no document can be
//     read), DeadlineExceeded, or Interrupted: the pod was evicted,
//     preempted or lost with its node (the Job's pod failure policy, or the
//     pod's DisruptionTarget condition), deleted (gone, or being deleted),
//     or stopped by a signal (the document's interrupted kind). An
//     interrupted run is retried at once and not counted (SPEC O2).
//   - [Vanished] is a Job deleted while it ran: interrupted, so its apply
//     (or destroy) stays due (upstream A3-89).
//   - [PullFailureOf] reads an image that cannot be pulled from a running
//     Job's pending pod, and [StopForPull] says when the manager ends such a
//     Job: its generation is outdated, or it has failed to pull for
//     [PullGrace] (SPEC O2: ImagePullFailed within a minute, not after the
//     deadline).
//   - [NewRecord] turns a classification into a [Record] (the shape SPEC
//     O1 gives status.lastRun), and
//     [Headline], [Finished] and [Plan] word the condition and the
//     RunFinished and PlanSummary events.
//
// Trust: a tenant can create pods that claim a Job (its label, an owner
// reference). Only the one pod controlling the Job is read; when more
// claim it, none is ([Pod.Claims]), and the run is reported from the Job
// alone. Nothing here keeps more than bounded fields of a pod
// ([TrimPodForCache] for the pending-pod cache).
//
// The package is pure: no client, no I/O, no logging. The workload
// controller does not call it yet: nothing reads a Job's pod, so no run is
// classified, recorded in status.lastRun or retried as interrupted; the
// API has no field for a [Record] until something writes one
// (docs/design.md, "Run results").
package runclass
