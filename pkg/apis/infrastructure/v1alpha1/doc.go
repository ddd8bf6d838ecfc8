// Package v1alpha1 is the captf API, group infrastructure.cluster.x-k8s.io,
// version v1alpha1 (SPEC section 1).
//
// TerraformClusterIdentity is cluster-scoped: it names a source Secret and the
// namespaces allowed to use it. TerraformCluster, TerraformMachine and
// TerraformMachinePool are namespaced workload kinds that run Terraform Jobs
// with the credentials of the identity they resolve to (SPEC section 2).
// TerraformPlan is a namespaced plan awaiting a person's approval (SPEC O8).
//
// Validation the CRD schema can express lives here as kubebuilder markers and
// CEL rules (SPEC A1, A6, A7, A9, O8); what needs the requesting user or other
// objects lives in pkg/admission.
//
// +k8s:deepcopy-gen=package
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1
