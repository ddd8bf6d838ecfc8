// Package v1beta2 is the subset of Cluster API's core types
// (cluster.x-k8s.io/v1beta2, Cluster API v1.14) that the manager reads:
// the fields of Cluster, Machine and MachinePool that SPEC section 18
// (K2-K7) acts on, and nothing else. captf does not serve these kinds and
// never writes them; it reads them through dynamic informers whose
// transform (pkg/capi) converts each object into these types, so the cache
// holds only these fields (SPEC B12) and the manager's build does not
// depend on Cluster API's modules or controller-runtime.
//
// +k8s:deepcopy-gen=package
// +kubebuilder:skip
package v1beta2
