package index

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/generated/clientset/versioned/fake"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
)

func ref(name string) *v1alpha1.IdentityReference { return &v1alpha1.IdentityReference{Name: name} }

func meta(ns, name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: labels}
}

// I2, I4, A4: Users finds every object that resolves to an identity,
// directly or through its cluster's defaults or identityRef, and only those.
func TestUsers(t *testing.T) {
	f := captfinformers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	inf := f.Infrastructure().V1alpha1()
	r, err := NewResolver(inf.TerraformClusters(), inf.TerraformMachines(), inf.TerraformMachinePools())
	require.NoError(t, err)
	_, err = NewResolver(inf.TerraformClusters(), inf.TerraformMachines(), inf.TerraformMachinePools())
	require.NoError(t, err, "indexes are added once, a second resolver reuses them")

	deleting := metav1.NewTime(time.Now())
	cl := func(o *v1alpha1.TerraformCluster) {
		require.NoError(t, inf.TerraformClusters().Informer().GetIndexer().Add(o))
	}
	ma := func(o *v1alpha1.TerraformMachine) {
		require.NoError(t, inf.TerraformMachines().Informer().GetIndexer().Add(o))
	}
	po := func(o *v1alpha1.TerraformMachinePool) {
		require.NoError(t, inf.TerraformMachinePools().Informer().GetIndexer().Add(o))
	}

	// a: cluster "prod" uses id-a, its members default to id-m.
	cl(&v1alpha1.TerraformCluster{ObjectMeta: meta("a", "prod", nil), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-a"), Defaults: &v1alpha1.ClusterDefaults{IdentityRef: ref("id-m")}}})
	ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("a", "prod-0", map[string]string{v1alpha1.LabelClusterName: "prod"})})
	ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("a", "prod-own", map[string]string{v1alpha1.LabelClusterName: "prod"}), Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref("id-x")}})
	po(&v1alpha1.TerraformMachinePool{ObjectMeta: meta("a", "pool", map[string]string{v1alpha1.LabelClusterName: "prod"})})
	// b: cluster found by its cluster-name label (not its name), no defaults.
	cl(&v1alpha1.TerraformCluster{ObjectMeta: meta("b", "c-123", map[string]string{v1alpha1.LabelClusterName: "blue"}), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-m")}})
	m := &v1alpha1.TerraformMachine{ObjectMeta: meta("b", "blue-0", map[string]string{v1alpha1.LabelClusterName: "blue"})}
	m.DeletionTimestamp = &deleting
	ma(m)
	// c: a member whose cluster does not exist, and one of another namespace's name.
	ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("c", "orphan", map[string]string{v1alpha1.LabelClusterName: "prod"})})

	users := func(id string) []Ref {
		out, err := r.Users(id)
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []Ref{
		{Kind: "TerraformCluster", Namespace: "a", Name: "prod"},
	}, users("id-a"), "the cluster itself; its members default to id-m")
	require.Equal(t, []Ref{
		{Kind: "TerraformCluster", Namespace: "b", Name: "c-123"},
		{Kind: "TerraformMachine", Namespace: "a", Name: "prod-0"},
		{Kind: "TerraformMachine", Namespace: "b", Name: "blue-0", Deleting: true},
		{Kind: "TerraformMachinePool", Namespace: "a", Name: "pool"},
	}, users("id-m"), "defaults (a), the cluster's own identityRef through the label (b), deleting objects count")
	require.Equal(t, []Ref{{Kind: "TerraformMachine", Namespace: "a", Name: "prod-own"}}, users("id-x"), "own identityRef wins")
	require.Empty(t, users("unused"))

	id, err := r.IdentityOf(&v1alpha1.TerraformMachine{ObjectMeta: meta("c", "orphan", map[string]string{v1alpha1.LabelClusterName: "prod"})})
	require.NoError(t, err)
	require.Empty(t, id, "no cluster in its namespace: nothing to inherit (I2)")
}
