// Package template validates the template kinds in the admission webhook
// (SPEC K9): TerraformClusterTemplate, TerraformMachineTemplate and
// TerraformMachinePoolTemplate.
//
// Rules owned here:
//
//   - K9: spec.template.spec is immutable: a ClusterClass or a
//     MachineDeployment clones it, and a changed template would leave its
//     clones behind it. A new template is how a change is rolled out. The
//     one exception is Cluster API's topology dry-run: the topology
//     controller sends a dry-run server-side apply carrying the annotation
//     topology.cluster.x-k8s.io/dry-run to compute what a template would be
//     after defaulting, and refusing it would stop ClusterClass clusters
//     from reconciling. A request counts as that only when it is a dry run
//     (the API server sets dryRun) and carries the annotation.
//   - spec.template.metadata's labels and annotations are valid Kubernetes
//     labels and annotations (they are copied to the clones).
//   - A TerraformClusterTemplate without spec.template.spec.identityRef is
//     allowed with a warning: a ClusterClass patch may set it.
//
// What the CRD can say stays in it (CEL: no provider ID in a machine or
// pool template).
package template
