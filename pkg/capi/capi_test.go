package capi

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
)

func unstructuredObj(t *testing.T, kind, ns, name string, labels, annotations map[string]string, spec map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": capiv1.GroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name},
		"spec":       spec,
		"status":     map[string]any{"phase": "Provisioned", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}},
	}}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "tenant"}})
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}})
	return u
}

// B12: the transform keeps the fields SPEC K2-K6 read and only the labels
// and annotations the manager acts on.
func TestTransformKeepsOnlyWhatTheManagerReads(t *testing.T) {
	big := map[string]string{}
	for i := range 100 {
		big[fmt.Sprintf("tenant.example/l%d", i)] = strings.Repeat("v", 63)
	}
	labels := map[string]string{capiv1.LabelClusterName: "c1", capiv1.LabelControlPlane: ""}
	annotations := map[string]string{capiv1.AnnotationPaused: "", "tenant.example/a": strings.Repeat("x", 100000)}
	for k, v := range big {
		labels[k] = v
	}
	u := unstructuredObj(t, capiv1.KindCluster, "ns", "c1", labels, annotations, map[string]any{
		"paused":               true,
		"infrastructureRef":    map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "tc"},
		"controlPlaneEndpoint": map[string]any{"host": "h", "port": int64(6443)},
		"clusterNetwork":       map[string]any{"pods": map[string]any{"cidrBlocks": []any{"10.1.0.0/16"}}, "serviceDomain": "cluster.local"},
		"topology":             map[string]any{"version": "v1.37.2", "classRef": map[string]any{"name": "cc"}},
		"controlPlaneRef":      map[string]any{"kind": "KubeadmControlPlane", "name": "cp"},
	})
	out, err := toCluster(u)
	require.NoError(t, err)
	c := out.(*capiv1.Cluster)
	assert.Equal(t, map[string]string{capiv1.LabelClusterName: "c1", capiv1.LabelControlPlane: ""}, c.Labels)
	assert.Equal(t, map[string]string{capiv1.AnnotationPaused: ""}, c.Annotations)
	assert.Nil(t, c.ManagedFields)
	assert.Nil(t, c.OwnerReferences)
	assert.True(t, c.IsPaused())
	assert.True(t, c.Spec.InfrastructureRef.Names("infrastructure.cluster.x-k8s.io", "TerraformCluster", "tc"))
	assert.Equal(t, capiv1.APIEndpoint{Host: "h", Port: 6443}, c.Spec.ControlPlaneEndpoint)
	assert.Equal(t, []string{"10.1.0.0/16"}, c.Spec.ClusterNetwork.Pods.CIDRBlocks)
	assert.Equal(t, "v1.37.2", c.Spec.Topology.Version)
	assert.Equal(t, "uid-c1", string(c.UID))

	// Converting again (a re-list of a converted object) changes nothing.
	again, err := toCluster(c)
	require.NoError(t, err)
	assert.Same(t, c, again)
}

func TestTransformMachineAndPool(t *testing.T) {
	m, err := toMachine(unstructuredObj(t, capiv1.KindMachine, "ns", "m1", map[string]string{capiv1.LabelClusterName: "c1"}, nil, map[string]any{
		"clusterName":       "c1",
		"bootstrap":         map[string]any{"dataSecretName": "m1-bootstrap", "configRef": map[string]any{"kind": "KubeadmConfig", "name": "x"}},
		"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformMachine", "name": "tm1"},
		"version":           "v1.37.2",
		"failureDomain":     "fd-a",
	}))
	require.NoError(t, err)
	machine := m.(*capiv1.Machine)
	assert.Equal(t, capiv1.MachineSpec{
		ClusterName: "c1", Bootstrap: capiv1.Bootstrap{DataSecretName: ptr.To("m1-bootstrap")},
		InfrastructureRef: capiv1.ObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "TerraformMachine", Name: "tm1"},
		Version:           "v1.37.2", FailureDomain: "fd-a",
	}, machine.Spec)

	nodeLabels := map[string]any{"role": "worker"}
	p, err := toMachinePool(unstructuredObj(t, capiv1.KindMachinePool, "ns", "p1", nil, nil, map[string]any{
		"clusterName":    "c1",
		"replicas":       int64(3),
		"failureDomains": []any{"a", "b"},
		"template": map[string]any{
			"metadata": map[string]any{"labels": nodeLabels, "annotations": map[string]any{"x": "y"}},
			"spec":     map[string]any{"clusterName": "c1", "bootstrap": map[string]any{"dataSecretName": "p1-bootstrap"}},
		},
	}))
	require.NoError(t, err)
	pool := p.(*capiv1.MachinePool)
	assert.Equal(t, int32(3), *pool.Spec.Replicas)
	assert.Equal(t, []string{"a", "b"}, pool.Spec.FailureDomains)
	assert.Equal(t, map[string]string{"role": "worker"}, pool.Spec.Template.ObjectMeta.Labels)
	assert.Nil(t, pool.Spec.Template.ObjectMeta.Annotations)
	assert.False(t, pool.Spec.Template.NodeLabelsDropped)

	// A template whose labels exceed the bounds keeps none (B12) and says so.
	huge := map[string]any{}
	for i := range maxNodeLabels + 1 {
		huge[fmt.Sprintf("l%d", i)] = "v"
	}
	p, err = toMachinePool(unstructuredObj(t, capiv1.KindMachinePool, "ns", "p2", nil, nil, map[string]any{
		"template": map[string]any{"metadata": map[string]any{"labels": huge}},
	}))
	require.NoError(t, err)
	pool = p.(*capiv1.MachinePool)
	assert.Nil(t, pool.Spec.Template.ObjectMeta.Labels)
	assert.True(t, pool.Spec.Template.NodeLabelsDropped)
}

// A field of an unexpected type does not fail the informer: the object is
// kept with its identity and no spec.
func TestTransformBadSpec(t *testing.T) {
	u := unstructuredObj(t, capiv1.KindCluster, "ns", "c1", map[string]string{capiv1.LabelClusterName: "c1", "other": "x"}, nil,
		map[string]any{"paused": "not a bool"})
	out, err := toCluster(u)
	require.NoError(t, err)
	c := out.(*capiv1.Cluster)
	assert.Equal(t, "c1", c.Name)
	assert.Equal(t, map[string]string{capiv1.LabelClusterName: "c1"}, c.Labels)
	assert.False(t, c.IsPaused())
}

func TestTransformTombstone(t *testing.T) {
	u := unstructuredObj(t, capiv1.KindMachine, "ns", "m1", nil, nil, map[string]any{"clusterName": "c1"})
	out, err := toMachine(cache.DeletedFinalStateUnknown{Key: "ns/m1", Obj: u})
	require.NoError(t, err)
	tomb := out.(cache.DeletedFinalStateUnknown)
	assert.Equal(t, "c1", tomb.Obj.(*capiv1.Machine).Spec.ClusterName)

	_, err = toMachine(&capiv1.Cluster{})
	assert.NoError(t, err, "a converted object of any of the kinds passes through")
	_, err = toMachine("x")
	assert.ErrorIs(t, err, errNotUnstructured)
}

// The informers read through the dynamic client, store the typed subset
// and find Clusters by the infrastructure they name (K2).
func TestInformers(t *testing.T) {
	scheme := runtime.NewScheme()
	lists := map[schema.GroupVersionResource]string{
		capiv1.ClustersResource: "ClusterList", capiv1.MachinesResource: "MachineList", capiv1.MachinePoolsResource: "MachinePoolList",
	}
	objs := []runtime.Object{
		unstructuredObj(t, capiv1.KindCluster, "ns", "c1", nil, nil, map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "tc"}}),
		unstructuredObj(t, capiv1.KindCluster, "ns", "c2", nil, nil, map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "tc"}}),
		unstructuredObj(t, capiv1.KindCluster, "other", "c3", nil, nil, map[string]any{
			"infrastructureRef": map[string]any{"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "TerraformCluster", "name": "tc"}}),
		unstructuredObj(t, capiv1.KindMachine, "ns", "m1", nil, nil, map[string]any{"clusterName": "c1"}),
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, lists, objs...)
	inf, err := NewInformers(client, nil, Served{Clusters: true, Machines: true}, 0)
	require.NoError(t, err)
	assert.Nil(t, inf.MachinePools)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inf.Start(ctx)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	names := func(cs []*capiv1.Cluster) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Name)
		}
		return out
	}
	assert.ElementsMatch(t, []string{"c1", "c2"}, names(inf.ClustersNaming("ns", "TerraformCluster", "tc")))
	assert.Empty(t, inf.ClustersNaming("ns", "TerraformCluster", "other"))
	m, ok := inf.Machine("ns", "m1")
	require.True(t, ok)
	assert.Equal(t, "c1", m.Spec.ClusterName)
	_, ok = inf.MachinePool("ns", "p1")
	assert.False(t, ok, "not served")
	var none *Informers
	assert.Empty(t, none.ClustersNaming("ns", "TerraformCluster", "tc"))
}

// K5: the bootstrap Secrets' watch keeps names and versions only (B1,
// B12), and MachinePools and Machines are found by the Secret they name.
func TestBootstrapSecretsMetadata(t *testing.T) {
	full := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1-bootstrap", UID: "u", ResourceVersion: "7",
		Labels: map[string]string{capiv1.LabelClusterName: "c1", "big": strings.Repeat("x", 63)}, Annotations: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	out, err := TrimToName(full)
	require.NoError(t, err)
	m := out.(*metav1.PartialObjectMetadata)
	assert.Equal(t, metav1.ObjectMeta{Namespace: "ns", Name: "p1-bootstrap", UID: "u", ResourceVersion: "7"}, m.ObjectMeta)
	again, err := TrimToName(m)
	require.NoError(t, err)
	assert.Same(t, m, again)
	tomb, err := TrimToName(cache.DeletedFinalStateUnknown{Key: "ns/p1-bootstrap", Obj: full})
	require.NoError(t, err)
	assert.Empty(t, tomb.(cache.DeletedFinalStateUnknown).Obj.(*metav1.PartialObjectMetadata).Labels)
	_, err = TrimToName("x")
	assert.Error(t, err)

	inf, err := NewInformers(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		capiv1.MachinePoolsResource: "MachinePoolList"}), metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), Served{MachinePools: true}, 0)
	require.NoError(t, err)
	require.NotNil(t, inf.BootstrapSecrets)
	assert.Len(t, inf.All(), 2)
	p, err := toMachinePool(unstructuredObj(t, capiv1.KindMachinePool, "ns", "p1", nil, nil, map[string]any{
		"template": map[string]any{"spec": map[string]any{"bootstrap": map[string]any{"dataSecretName": "p1-bootstrap"}}},
	}))
	require.NoError(t, err)
	require.NoError(t, inf.MachinePools.GetIndexer().Add(p))
	pools := inf.PoolsUsingBootstrapSecret("ns", "p1-bootstrap")
	require.Len(t, pools, 1)
	assert.Equal(t, "p1", pools[0].Name)
	assert.Empty(t, inf.PoolsUsingBootstrapSecret("other", "p1-bootstrap"))

	// Machines alone: the watch exists, and Machines are found by the
	// Secret they name.
	inf, err = NewInformers(dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		capiv1.MachinesResource: "MachineList"}), metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), Served{Machines: true}, 0)
	require.NoError(t, err)
	require.NotNil(t, inf.BootstrapSecrets)
	machine, err := toMachine(unstructuredObj(t, capiv1.KindMachine, "ns", "m1", nil, nil, map[string]any{
		"bootstrap": map[string]any{"dataSecretName": "m1-bootstrap"},
	}))
	require.NoError(t, err)
	require.NoError(t, inf.Machines.GetIndexer().Add(machine))
	machines := inf.MachinesUsingBootstrapSecret("ns", "m1-bootstrap")
	require.Len(t, machines, 1)
	assert.Equal(t, "m1", machines[0].Name)
	assert.Empty(t, inf.MachinesUsingBootstrapSecret("ns", "p1-bootstrap"))
	assert.Empty(t, inf.PoolsUsingBootstrapSecret("ns", "m1-bootstrap"), "MachinePools not served")
	var none *Informers
	assert.Empty(t, none.MachinesUsingBootstrapSecret("ns", "m1-bootstrap"))

	noMeta, err := NewInformers(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), nil, Served{MachinePools: true}, 0)
	require.NoError(t, err)
	assert.Nil(t, noMeta.BootstrapSecrets)
}
