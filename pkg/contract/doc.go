// Package contract is captf's side of the Cluster API infrastructure
// provider contract (SPEC section 18), as pure decisions: no client, no
// I/O, no logging. The workload controller gathers the objects from its
// caches (and the one uncached read of a bootstrap Secret), asks this
// package, and writes what it says.
//
// The package owns these rules of SPEC.md:
//
//   - K2, owners ([ResolveOwners]): a TerraformCluster acts once a Cluster
//     of its namespace names it in spec.infrastructureRef; a
//     TerraformMachine (pool) once the Machine (MachinePool) that is its
//     controller owner names it back, and its Cluster names a
//     TerraformCluster. The annotation captf.io/standalone: "true" opts
//     an object out of K2-K5 ([Standalone]).
//   - K3, pause ([Paused]): Cluster.spec.paused pauses every object of the
//     cluster, as the object's own cluster.x-k8s.io/paused annotation does.
//   - K4, order ([Dependencies], [DeletionBlocked]): machines and pools
//     wait for their TerraformCluster to be provisioned; a
//     TerraformCluster's destroy waits while machines or pools of the
//     cluster exist.
//   - K5, bootstrap data ([Dependencies]): a machine or pool waits for its
//     owner's spec.bootstrap.dataSecretName and that Secret.
//
// The reasons are those of SPEC section 10 (DependenciesReady,
// DeletionBlocked), with upstream's names.
package contract
