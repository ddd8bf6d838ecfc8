package credentials

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// ref returns an IdentityReference to name.
func ref(name string) *v1alpha1.IdentityReference { return &v1alpha1.IdentityReference{Name: name} }

// cluster returns a TerraformCluster with the given identity and default
// identity ("" for unset).
func cluster(identity, defaults string) *v1alpha1.TerraformCluster {
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if identity != "" {
		c.Spec.IdentityRef = ref(identity)
	}
	if defaults != "" {
		c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: ref(defaults)}
	}
	return c
}

func TestClusterIdentity(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster *v1alpha1.TerraformCluster
		want    string
	}{
		{"I1/identityRef", cluster("aws", ""), "aws"},
		{"I1/defaults never apply to the cluster", cluster("", "dflt"), ""},
		{"I1/identityRef wins over defaults", cluster("aws", "dflt"), "aws"},
		{"I1/unset", cluster("", ""), ""},
		{"I1/nil cluster", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, ClusterIdentity(tc.cluster))
		})
	}
}

func TestMemberIdentity(t *testing.T) {
	for _, tc := range []struct {
		name       string
		own        *v1alpha1.IdentityReference
		cluster    *v1alpha1.TerraformCluster
		want       string
		wantSource IdentitySource
	}{
		{"I2/own wins over everything", ref("own"), cluster("cl", "dflt"), "own", IdentitySourceOwn},
		{"I2/own with nil cluster", ref("own"), nil, "own", IdentitySourceOwn},
		{"I2/cluster defaults", nil, cluster("cl", "dflt"), "dflt", IdentitySourceClusterDefaults},
		{"I2/cluster defaults without cluster identity", nil, cluster("", "dflt"), "dflt", IdentitySourceClusterDefaults},
		{"I2/cluster identityRef", nil, cluster("cl", ""), "cl", IdentitySourceCluster},
		{"I2/empty defaults fall through to the cluster", nil, &v1alpha1.TerraformCluster{Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: ref("cl"), Defaults: &v1alpha1.ClusterDefaults{},
		}}, "cl", IdentitySourceCluster},
		{"I2/nothing", nil, cluster("", ""), "", IdentitySourceNone},
		{"I2/nil cluster and no own", nil, nil, "", IdentitySourceNone},
		{"I2/own with an empty name counts as unset", ref(""), cluster("cl", "dflt"), "dflt", IdentitySourceClusterDefaults},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, source := MemberIdentity(tc.own, tc.cluster)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantSource, source)
		})
	}

	t.Run("I3/a member without its own identity follows the cluster's current values", func(t *testing.T) {
		c := cluster("cl", "old")
		got, _ := MemberIdentity(nil, c)
		require.Equal(t, "old", got)
		c.Spec.Defaults.IdentityRef.Name = "new"
		got, _ = MemberIdentity(nil, c)
		require.Equal(t, "new", got)
		c.Spec.Defaults = nil
		got, source := MemberIdentity(nil, c)
		require.Equal(t, "cl", got)
		require.Equal(t, IdentitySourceCluster, source)
	})
}

// tfCluster returns a TerraformCluster for SelectCluster tests.
func tfCluster(namespace, name, label string, uid types.UID) *v1alpha1.TerraformCluster {
	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
	if label != "" {
		c.Labels = map[string]string{v1alpha1.LabelClusterName: label}
	}
	return c
}

func TestSelectCluster(t *testing.T) {
	byName := tfCluster("ns", "prod", "", "1")
	labelledB := tfCluster("ns", "b", "prod", "2")
	labelledA := tfCluster("ns", "a", "prod", "3")
	otherLabel := tfCluster("ns", "x", "dev", "4")
	otherNS := tfCluster("other", "prod", "prod", "5")
	otherNSLow := tfCluster("other", "0", "prod", "6")

	for _, c := range []struct {
		name       string
		value      string
		candidates []*v1alpha1.TerraformCluster
		want       *v1alpha1.TerraformCluster
	}{
		{"1.2/label match beats name match", "prod", []*v1alpha1.TerraformCluster{byName, labelledB}, labelledB},
		{"1.2/lowest name among label matches", "prod", []*v1alpha1.TerraformCluster{byName, labelledB, labelledA, otherLabel}, labelledA},
		{"1.2/name match when no label matches", "prod", []*v1alpha1.TerraformCluster{byName, otherLabel}, byName},
		{"1.2/a cluster whose own label differs is still found by name", "x", []*v1alpha1.TerraformCluster{otherLabel}, otherLabel},
		{"1.2/no match", "staging", []*v1alpha1.TerraformCluster{byName, labelledA, otherLabel}, nil},
		{"1.2/empty value", "", []*v1alpha1.TerraformCluster{byName, labelledA, tfCluster("ns", "", "", "7")}, nil},
		{"1.2/no candidates", "prod", nil, nil},
		{"1.2/other namespaces ignored", "prod", []*v1alpha1.TerraformCluster{otherNS, otherNSLow}, nil},
		{"1.2/other namespaces ignored beside a match", "prod", []*v1alpha1.TerraformCluster{otherNSLow, otherNS, byName}, byName},
		{"1.2/nil candidates ignored", "prod", []*v1alpha1.TerraformCluster{nil, byName, nil}, byName},
		{"1.2/duplicate names fall to the lower UID", "dup", []*v1alpha1.TerraformCluster{tfCluster("ns", "dup", "", "b"), tfCluster("ns", "dup", "", "a")}, tfCluster("ns", "dup", "", "a")},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.want, SelectCluster(c.value, "ns", c.candidates))
			// Order independence: every rotation and the reverse give the same cluster.
			for i := range c.candidates {
				rotated := append(slices.Clone(c.candidates[i:]), c.candidates[:i]...)
				require.Equal(t, c.want, SelectCluster(c.value, "ns", rotated), "rotation %d", i)
				slices.Reverse(rotated)
				require.Equal(t, c.want, SelectCluster(c.value, "ns", rotated), "reversed rotation %d", i)
			}
		})
	}
}
