// Package capi reads Cluster API's core objects (Cluster, Machine,
// MachinePool of cluster.x-k8s.io/v1beta2) for the manager, without
// Cluster API's modules or controller-runtime: [Discover] asks the API
// server which of them it serves, and [NewInformers] watches each served
// resource with the dynamic client. The informers' transform converts
// every object into the typed subset in pkg/apis/capi/v1beta2 and keeps
// only the labels and annotations the manager acts on (SPEC B12), so the
// cache holds a few hundred bytes per object whatever a tenant writes into
// the rest.
//
// What the manager decides from these objects (owners, pause, order,
// inputs: SPEC K2-K6) lives in pkg/contract; this package only reads.
package capi
