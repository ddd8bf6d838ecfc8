// Package slots decides whether a Terraform Job may start under the Job
// caps of SPEC O4, and keeps the order in which waiting Jobs get the slots
// that free: pure code, no client, no clock of its own. The workload
// controller gathers the counts (from its Job cache, by index, plus the
// starts it has reserved and not yet seen there), asks [Decide], and
// records the waiters in [Waiters]; a finishing Job wakes the first of
// them ([Waiters.Next]).
//
// The package owns these parts of SPEC O4 (UPSTREAM A2-02, A2-03, A1-98,
// A1-155, A3-94, A3-95):
//
//   - two caps: the cluster-wide --max-active-jobs (0: none) and the
//     per-cluster spec.maxActiveJobs, default --cluster-max-active-jobs,
//     over the Jobs of a TerraformCluster and of its machines and pools;
//     a Job beyond either waits (WaitingForJobSlot), naming the cap;
//   - priority ([Class]): destroys first, then spec changes and first
//     applies, then drift and refreshes, which start only while fewer than
//     [BackgroundPercent] percent of a cap's slots are taken; within a
//     class, the oldest wait first. A free slot goes to a newcomer only
//     when fewer waiters are ahead of it than there are free slots, so a
//     Job that has just become due never overtakes one that waits.
package slots
