// Package controllers holds captf's control loops:
//
//   - workload: the shared reconcile of TerraformCluster, TerraformMachine and
//     TerraformMachinePool (SPEC sections 2-6, 9, 10): identity resolution,
//     the credential step, revocation, Jobs, deletion.
//   - identity: the TerraformClusterIdentity status controller (SPEC S1-S4,
//     V5, section 13).
//   - jobs: the pure construction of apply and destroy Jobs (SPEC J1-J5, J7).
//   - index: informer indexes and exact identity resolution from them (I2,
//     I4), shared with the admission webhook (A4).
//   - source: the shared, uncached read of source Secrets (M6, section 13).
//   - loop: queues, workers and the resync ticker (R2); what a queue and
//     the status records keep of an object goes with it (B15).
//   - trim: the informers' transform and keep-lists: the caches keep only
//     the labels, annotations and status fields the manager reads (B1, B12).
package controllers
