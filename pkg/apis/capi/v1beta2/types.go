package v1beta2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of the Cluster API core types read here.
const (
	Group   = "cluster.x-k8s.io"
	Version = "v1beta2"
)

// GroupVersion is cluster.x-k8s.io/v1beta2.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// The resources the manager reads.
var (
	ClustersResource     = GroupVersion.WithResource("clusters")
	MachinesResource     = GroupVersion.WithResource("machines")
	MachinePoolsResource = GroupVersion.WithResource("machinepools")
)

// Kind names.
const (
	KindCluster     = "Cluster"
	KindMachine     = "Machine"
	KindMachinePool = "MachinePool"
)

// Labels and annotations of Cluster API the manager reads.
const (
	// LabelClusterName names the Cluster an object belongs to.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelControlPlane marks a control-plane Machine (its value is empty
	// or the control plane's name); the input control_plane (SPEC K6).
	LabelControlPlane = "cluster.x-k8s.io/control-plane"
	// AnnotationPaused pauses reconciliation of the object that carries it.
	AnnotationPaused = "cluster.x-k8s.io/paused"
	// AnnotationClonedFromName names the template an infrastructure object
	// was cloned from (the input captf_tags.template).
	AnnotationClonedFromName = "cluster.x-k8s.io/cloned-from-name"
)

// ObjectReference is Cluster API's ContractVersionedObjectReference: a
// reference by API group, kind and name, in the referrer's namespace.
type ObjectReference struct {
	APIGroup string `json:"apiGroup,omitempty"`
	Kind     string `json:"kind,omitempty"`
	Name     string `json:"name,omitempty"`
}

// Names reports whether r names the object of group, kind and name.
func (r ObjectReference) Names(group, kind, name string) bool {
	return r.APIGroup == group && r.Kind == kind && r.Name == name
}

// APIEndpoint is a host and port.
type APIEndpoint struct {
	Host string `json:"host,omitempty"`
	Port int32  `json:"port,omitempty"`
}

// IsZero reports whether neither host nor port is set.
func (e APIEndpoint) IsZero() bool { return e.Host == "" && e.Port == 0 }

// NetworkRanges is a list of CIDR blocks.
type NetworkRanges struct {
	CIDRBlocks []string `json:"cidrBlocks,omitempty"`
}

// ClusterNetwork is the Cluster's network configuration (the input
// cluster_network, SPEC K6).
type ClusterNetwork struct {
	APIServerPort int32         `json:"apiServerPort,omitempty"`
	Services      NetworkRanges `json:"services,omitempty"`
	Pods          NetworkRanges `json:"pods,omitempty"`
	ServiceDomain string        `json:"serviceDomain,omitempty"`
}

// Topology is the part of a managed topology the manager reads.
type Topology struct {
	// Version is the cluster's Kubernetes version (the input
	// kubernetes_version of a TerraformCluster).
	Version string `json:"version,omitempty"`
}

// ClusterSpec is the part of Cluster.spec the manager reads.
type ClusterSpec struct {
	// Paused pauses every object of the cluster (SPEC K3).
	Paused *bool `json:"paused,omitempty"`
	// ClusterNetwork is passed to the cluster's module (SPEC K6).
	ClusterNetwork ClusterNetwork `json:"clusterNetwork,omitempty"`
	// ControlPlaneEndpoint, when set on the Cluster, is passed to the
	// cluster's module (SPEC K6).
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
	// InfrastructureRef names the cluster's infrastructure object (SPEC K2).
	InfrastructureRef ObjectReference `json:"infrastructureRef,omitempty"`
	// Topology is set for a Cluster built from a ClusterClass.
	Topology *Topology `json:"topology,omitempty"`
}

// Cluster is the part of a Cluster API Cluster the manager reads.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterSpec `json:"spec,omitempty"`
}

// IsPaused reports whether the Cluster's spec.paused is true.
func (c *Cluster) IsPaused() bool { return c.Spec.Paused != nil && *c.Spec.Paused }

// Bootstrap says where a machine's bootstrap data is.
type Bootstrap struct {
	// DataSecretName names the Secret, in the namespace, whose key value
	// holds the bootstrap data and key format its format (SPEC K5).
	DataSecretName *string `json:"dataSecretName,omitempty"`
}

// MachineSpec is the part of Machine.spec (and of a MachinePool's
// template) the manager reads.
type MachineSpec struct {
	ClusterName       string          `json:"clusterName,omitempty"`
	Bootstrap         Bootstrap       `json:"bootstrap,omitempty"`
	InfrastructureRef ObjectReference `json:"infrastructureRef,omitempty"`
	Version           string          `json:"version,omitempty"`
	FailureDomain     string          `json:"failureDomain,omitempty"`
}

// Machine is the part of a Cluster API Machine the manager reads.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type Machine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MachineSpec `json:"spec,omitempty"`
}

// ObjectMeta is the metadata of a MachinePool's machine template.
type ObjectMeta struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// MachineTemplateSpec is a MachinePool's machine template.
type MachineTemplateSpec struct {
	ObjectMeta ObjectMeta  `json:"metadata,omitempty"`
	Spec       MachineSpec `json:"spec,omitempty"`
	// NodeLabelsDropped is set by the manager's cache when the template's
	// labels exceed its bounds and were not kept (never sent by the API
	// server).
	NodeLabelsDropped bool `json:"-"`
}

// MachinePoolSpec is the part of MachinePool.spec the manager reads.
type MachinePoolSpec struct {
	ClusterName    string              `json:"clusterName,omitempty"`
	Replicas       *int32              `json:"replicas,omitempty"`
	Template       MachineTemplateSpec `json:"template,omitempty"`
	FailureDomains []string            `json:"failureDomains,omitempty"`
}

// MachinePool is the part of a Cluster API MachinePool the manager reads.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type MachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MachinePoolSpec `json:"spec,omitempty"`
}
