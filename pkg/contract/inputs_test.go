package contract

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

func decoded(t *testing.T, in Inputs) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(in.JSON(), &m))
	return m
}

// SPEC K6: the inputs of each role, from its Cluster API objects.
func TestRenderInputs(t *testing.T) {
	c := cluster("c1", infraRef(v1alpha1.KindTerraformCluster, "tc1"))
	c.Spec.ControlPlaneEndpoint = capiv1.APIEndpoint{Host: "cp.example", Port: 6443}
	c.Spec.Topology = &capiv1.Topology{Version: "v1.37.2"}
	c.Spec.ClusterNetwork = capiv1.ClusterNetwork{APIServerPort: 6443, Pods: capiv1.NetworkRanges{CIDRBlocks: []string{"10.1.0.0/16"}}, ServiceDomain: "cluster.local"}

	t.Run("cluster", func(t *testing.T) {
		obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tc1", UID: "u1", Annotations: map[string]string{capiv1.AnnotationClonedFromName: "tmpl"}}
		m := decoded(t, RenderInputs(InputSources{Kind: v1alpha1.KindTerraformCluster, Object: obj, Owners: Owners{Cluster: c}}))
		assert.Equal(t, map[string]any{
			InputCluster: map[string]any{"name": "c1", "namespace": "ns"},
			InputObject:  map[string]any{"kind": "TerraformCluster", "name": "tc1", "namespace": "ns", "uid": "u1"},
			InputTags: map[string]any{"cluster": "c1", "namespace": "ns", "kind": "TerraformCluster", "name": "tc1",
				"managed-by": "captf", "template": "tmpl"},
			InputEndpoint:   map[string]any{"host": "cp.example", "port": float64(6443)},
			InputKubernetes: "v1.37.2",
			InputClusterNetwork: map[string]any{"api_server_port": float64(6443), "pods": []any{"10.1.0.0/16"},
				"services": []any{}, "service_domain": "cluster.local"},
		}, m)
	})

	t.Run("standalone cluster", func(t *testing.T) {
		obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tc1", UID: "u1"}
		m := decoded(t, RenderInputs(InputSources{Kind: v1alpha1.KindTerraformCluster, Object: obj}))
		assert.Equal(t, map[string]any{"name": "tc1", "namespace": "ns"}, m[InputCluster])
		assert.NotContains(t, m, InputEndpoint)
		assert.NotContains(t, m, InputClusterNetwork)
		assert.NotContains(t, m[InputTags], "template")
	})

	t.Run("machine", func(t *testing.T) {
		mach := machine("m1", "c1", infraRef(v1alpha1.KindTerraformMachine, "tm1"))
		mach.Labels = map[string]string{capiv1.LabelControlPlane: ""}
		mach.Spec.FailureDomain = "fd-a"
		mach.Spec.Version = "v1.37.2"
		obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tm1", UID: "u2"}
		in := RenderInputs(InputSources{Kind: v1alpha1.KindTerraformMachine, Object: obj, Owners: Owners{Cluster: c, Machine: mach},
			Exports: json.RawMessage(`{"vpc":"v-1"}`), Bootstrap: &BootstrapData{Value: []byte("#cloud-config\n")}})
		m := decoded(t, in)
		assert.Equal(t, "m1", m[InputMachineName])
		assert.Equal(t, "I2Nsb3VkLWNvbmZpZwo=", m[InputBootstrapData])
		assert.Equal(t, DefaultBootstrapFormat, m[InputBootstrapFormat])
		assert.Equal(t, "fd-a", m[InputFailureDomain])
		assert.Equal(t, "v1.37.2", m[InputKubernetes])
		assert.Equal(t, true, m[InputControlPlane])
		assert.Equal(t, map[string]any{"vpc": "v-1"}, m[InputClusterOutputs])
		assert.Equal(t, "c1", m[InputCluster].(map[string]any)["name"])

		red := decoded(t, in.Redacted())
		assert.Equal(t, "(sensitive)", red[InputBootstrapData])
		assert.Equal(t, "I2Nsb3VkLWNvbmZpZwo=", m[InputBootstrapData], "Redacted copies")
	})

	t.Run("standalone machine", func(t *testing.T) {
		obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tm1", Labels: map[string]string{v1alpha1.LabelClusterName: "c9"}}
		m := decoded(t, RenderInputs(InputSources{Kind: v1alpha1.KindTerraformMachine, Object: obj}))
		assert.Equal(t, "tm1", m[InputMachineName])
		assert.Equal(t, "c9", m[InputCluster].(map[string]any)["name"])
		assert.Equal(t, map[string]any{}, m[InputClusterOutputs], "no exports: an empty object")
		assert.NotContains(t, m, InputBootstrapData)
		assert.NotContains(t, m, InputControlPlane)
	})

	t.Run("pool", func(t *testing.T) {
		p := pool("p1", "c1", infraRef(v1alpha1.KindTerraformMachinePool, "tmp1"))
		p.Spec.FailureDomains = []string{"a", "b"}
		p.Spec.Template.Spec.Version = "v1.37.2"
		p.Spec.Template.ObjectMeta.Labels = map[string]string{"role": "worker"}
		obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tmp1"}
		src := InputSources{Kind: v1alpha1.KindTerraformMachinePool, Object: obj, Owners: Owners{Cluster: c, MachinePool: p},
			Bootstrap: &BootstrapData{Value: []byte("x"), Format: "ignition"}}
		m := decoded(t, RenderInputs(src))
		assert.Equal(t, "p1", m[InputPoolName])
		assert.Equal(t, float64(1), m[InputReplicas], "Cluster API's default")
		assert.Equal(t, []any{"a", "b"}, m[InputFailureDomains])
		assert.Equal(t, map[string]any{"role": "worker"}, m[InputNodeLabels])
		assert.Equal(t, "ignition", m[InputBootstrapFormat])

		// K6: the hash follows the inputs: replicas, exports, bootstrap data.
		h := RenderInputs(src).Hash()
		assert.Len(t, h, 64)
		assert.Equal(t, h, RenderInputs(src).Hash(), "deterministic")
		p.Spec.Replicas = ptr.To[int32](3)
		assert.NotEqual(t, h, RenderInputs(src).Hash(), "replicas")
		h = RenderInputs(src).Hash()
		src.Exports = json.RawMessage(`{"a":1}`)
		assert.NotEqual(t, h, RenderInputs(src).Hash(), "exports")
		h = RenderInputs(src).Hash()
		src.Bootstrap = &BootstrapData{Value: []byte("y"), Format: "ignition"}
		assert.NotEqual(t, h, RenderInputs(src).Hash(), "bootstrap data")
	})
}

func TestInputsJSONRoundTrip(t *testing.T) {
	in := RenderInputs(InputSources{Kind: v1alpha1.KindTerraformMachine, Object: &metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Bootstrap: &BootstrapData{Value: []byte("secret-bootstrap")}})
	back, err := DecodeInputs(in.JSON())
	require.NoError(t, err)
	assert.Equal(t, in.Hash(), back.Hash())
	assert.Empty(t, Inputs{}.Hash())
	assert.False(t, strings.Contains(string(in.Redacted().JSON()), "c2VjcmV0LWJvb3RzdHJhcA"), "no sensitive value after Redacted")
}

// K6: the reserved names cover every role input, and no captf_ input
// needs listing (the prefix is reserved as a whole, T3).
func TestReservedInputs(t *testing.T) {
	c := cluster("c1", infraRef(v1alpha1.KindTerraformCluster, "tc1"))
	c.Spec.ControlPlaneEndpoint = capiv1.APIEndpoint{Host: "h", Port: 1}
	c.Spec.Topology = &capiv1.Topology{Version: "v"}
	mach := machine("m1", "c1", infraRef(v1alpha1.KindTerraformMachine, "tm1"))
	mach.Spec.FailureDomain, mach.Spec.Version = "f", "v"
	p := pool("p1", "c1", infraRef(v1alpha1.KindTerraformMachinePool, "tmp1"))
	p.Spec.Template.Spec.Version = "v"
	all := map[string]bool{}
	for _, src := range []InputSources{
		{Kind: v1alpha1.KindTerraformCluster, Owners: Owners{Cluster: c}},
		{Kind: v1alpha1.KindTerraformMachine, Owners: Owners{Cluster: c, Machine: mach}, Bootstrap: &BootstrapData{}},
		{Kind: v1alpha1.KindTerraformMachinePool, Owners: Owners{Cluster: c, MachinePool: p}, Bootstrap: &BootstrapData{}},
	} {
		src.Object = &metav1.ObjectMeta{Name: "o"}
		for k := range RenderInputs(src) {
			all[k] = true
		}
	}
	for k := range all {
		if strings.HasPrefix(k, "captf_") {
			assert.NotContains(t, ReservedInputs, k)
			continue
		}
		assert.Contains(t, ReservedInputs, k)
	}
	assert.Len(t, ReservedInputs, len(all)-4, "every reserved name is an input")
}

// B10: an inputs Secret a tenant edited is decoded within bounds.
func TestDecodeInputsBounded(t *testing.T) {
	for _, bad := range []string{`null`, `[1]`, `"x"`, `{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, `{"a":"` + strings.Repeat("x", MaxInputsBytes) + `"}`} {
		_, err := DecodeInputs([]byte(bad))
		require.Error(t, err, "%.40s", bad)
	}
	in, err := DecodeInputs([]byte(`{"a":{"b":[1,2]}}`))
	require.NoError(t, err)
	require.JSONEq(t, `{"b":[1,2]}`, string(in["a"]))
}

// K6, K11: the inputs hash leaves the object's UID out (a copy moved by
// clusterctl has another UID and the same inputs), and nothing else.
func TestInputsHashWithoutUID(t *testing.T) {
	render := func(uid, name string) Inputs {
		return RenderInputs(InputSources{Kind: v1alpha1.KindTerraformCluster, Object: &metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}})
	}
	a, b := render("u1", "tc1"), render("u2", "tc1")
	require.NotEqual(t, string(a.JSON()), string(b.JSON()), "the module still gets the UID")
	require.Equal(t, a.Hash(), b.Hash())
	require.NotEqual(t, a.Hash(), render("u1", "tc2").Hash())
	require.Contains(t, string(a[InputObject]), `"uid":"u1"`, "Hash does not change the inputs")
}

// K6: a Cluster's endpoint that is the TerraformCluster's own (its output,
// copied back by Cluster API) is no input; another one is.
func TestClusterEndpointEchoIsNoInput(t *testing.T) {
	c := cluster("c1", infraRef(v1alpha1.KindTerraformCluster, "tc1"))
	c.Spec.ControlPlaneEndpoint = capiv1.APIEndpoint{Host: "cp.example", Port: 6443}
	obj := &metav1.ObjectMeta{Namespace: "ns", Name: "tc1", UID: "u1"}
	render := func(own string) Inputs {
		return RenderInputs(InputSources{Kind: v1alpha1.KindTerraformCluster, Object: obj, Owners: Owners{Cluster: c}, OwnEndpoint: own})
	}
	require.NotContains(t, render("cp.example:6443"), InputEndpoint, "the module's own output")
	require.Contains(t, render(""), InputEndpoint, "set on the Cluster before the cluster's own")
	require.Contains(t, render("lb.example:6443"), InputEndpoint, "another endpoint than its own")
	require.Equal(t, "", EndpointString("", 0))
}

// O9: the sensitive names travel with the inputs, outside their hash (the
// values they name are in it already), and name only inputs present;
// bootstrap data is always sensitive (K5).
func TestInputsSensitive(t *testing.T) {
	in := RenderInputs(InputSources{Kind: v1alpha1.KindTerraformMachine, Object: &metav1.ObjectMeta{Namespace: "ns", Name: "m"},
		Bootstrap: &BootstrapData{Value: []byte("secret-bootstrap")}})
	in["token"], in["plain"] = json.RawMessage(`"s3cret-token"`), json.RawMessage(`"x"`)
	before := in.Hash()
	require.Equal(t, []string{InputBootstrapData}, in.Sensitive())

	in.MarkSensitive([]string{"token", "gone"})
	require.Equal(t, before, in.Hash(), "marking changes no hash: no re-apply of objects saved before")
	back, err := DecodeInputs(in.JSON())
	require.NoError(t, err)
	require.Equal(t, []string{InputBootstrapData, "token"}, back.Sensitive(), "only inputs present")
	red := string(back.Redacted().JSON())
	require.NotContains(t, red, "s3cret-token")
	require.Contains(t, red, `"plain":"x"`)

	in.MarkSensitive(nil)
	require.NotContains(t, in, InputSensitive)
}
