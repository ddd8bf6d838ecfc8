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

// SPEC 1.2 through the indexes: a member's cluster is the lowest-named
// cluster of its namespace carrying its cluster-name label, else the one of
// that name; MembersOf returns only the members a cluster wins, judged with
// the version it is given (its old one, or its last before deletion).
func TestClusterOfAndMembersOf(t *testing.T) {
	r, cl, ma, _ := newResolver(t)
	labelled := func(v string) map[string]string { return map[string]string{v1alpha1.LabelClusterName: v} }
	b := &v1alpha1.TerraformCluster{ObjectMeta: meta("a", "b", labelled("x")), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-b")}}
	c := &v1alpha1.TerraformCluster{ObjectMeta: meta("a", "c", labelled("x")), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-c")}}
	x := &v1alpha1.TerraformCluster{ObjectMeta: meta("a", "x", nil), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-x")}}
	other := &v1alpha1.TerraformCluster{ObjectMeta: meta("other", "a", labelled("x")), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id-o")}}
	for _, o := range []*v1alpha1.TerraformCluster{c, x, other} {
		cl(o)
	}
	m0 := &v1alpha1.TerraformMachine{ObjectMeta: meta("a", "m0", labelled("x"))}
	ma(m0)
	own := &v1alpha1.TerraformMachine{ObjectMeta: meta("a", "own", labelled("x")), Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref("id-own")}}
	ma(own)

	got, err := r.ClusterOf("a", "x")
	require.NoError(t, err)
	require.Equal(t, "c", got.Name, "a cluster carrying the label wins over the one named by it")
	require.Equal(t, []string{"m0"}, names(t, r, c), "own identityRef: not a member")
	require.Empty(t, names(t, r, x), "x loses to the label")

	cl(b)
	got, err = r.ClusterOf("a", "x")
	require.NoError(t, err)
	require.Equal(t, "b", got.Name, "the lowest name wins among the labelled")
	require.Equal(t, []string{"m0"}, names(t, r, b))
	require.Empty(t, names(t, r, c), "c no longer wins")

	// b's label changed to y: b's old version won x, so its members then
	// are returned; its new version wins nothing (no member says y).
	moved := b.DeepCopy()
	moved.Labels = labelled("y")
	require.NoError(t, r.ClusterIndexer.Update(moved))
	require.Equal(t, []string{"m0"}, names(t, r, b), "the old version's members: their cluster changed")
	require.Empty(t, names(t, r, moved))
	got, err = r.ClusterOf("a", "x")
	require.NoError(t, err)
	require.Equal(t, "c", got.Name)

	// c deleted: its last state won x.
	require.NoError(t, r.ClusterIndexer.Delete(c))
	require.Equal(t, []string{"m0"}, names(t, r, c))
	got, err = r.ClusterOf("a", "x")
	require.NoError(t, err)
	require.Equal(t, "x", got.Name, "by name once no cluster carries the label")
	id, err := r.IdentityOf(m0)
	require.NoError(t, err)
	require.Equal(t, "id-x", id)

	got, err = r.ClusterOf("a", "")
	require.NoError(t, err)
	require.Nil(t, got, "no label, no cluster")
}

func names(t *testing.T, r *Resolver, c *v1alpha1.TerraformCluster) []string {
	t.Helper()
	ms, err := r.MembersOf(c)
	require.NoError(t, err)
	var out []string
	for _, m := range ms {
		out = append(out, m.GetName())
	}
	return out
}

// newResolver returns a Resolver over fresh informers' indexers and adders
// of clusters, machines and pools.
func newResolver(t testing.TB) (*Resolver, func(*v1alpha1.TerraformCluster), func(*v1alpha1.TerraformMachine), func(*v1alpha1.TerraformMachinePool)) {
	t.Helper()
	f := captfinformers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	inf := f.Infrastructure().V1alpha1()
	r, err := NewResolver(inf.TerraformClusters(), inf.TerraformMachines(), inf.TerraformMachinePools())
	require.NoError(t, err)
	return r,
		func(o *v1alpha1.TerraformCluster) { require.NoError(t, r.ClusterIndexer.Add(o)) },
		func(o *v1alpha1.TerraformMachine) { require.NoError(t, r.MachineIndexer.Add(o)) },
		func(o *v1alpha1.TerraformMachinePool) { require.NoError(t, r.PoolIndexer.Add(o)) }
}

// UsersIn: one namespace's users of an identity, deleting ones included,
// and only that namespace's.
func TestUsersIn(t *testing.T) {
	r, cl, ma, po := newResolver(t)
	for _, ns := range []string{"a", "b"} {
		cl(&v1alpha1.TerraformCluster{ObjectMeta: meta(ns, "prod", nil), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id")}})
		ma(&v1alpha1.TerraformMachine{ObjectMeta: meta(ns, "m", map[string]string{v1alpha1.LabelClusterName: "prod"})})
		po(&v1alpha1.TerraformMachinePool{ObjectMeta: meta(ns, "p", nil), Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: ref("id")}})
	}
	ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("a", "other", nil), Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref("id-2")}})
	users, err := r.UsersIn("a", "id")
	require.NoError(t, err)
	var got []Ref
	for _, u := range users {
		got = append(got, u.Ref())
	}
	require.ElementsMatch(t, []Ref{
		{Kind: "TerraformCluster", Namespace: "a", Name: "prod"},
		{Kind: "TerraformMachine", Namespace: "a", Name: "m"},
		{Kind: "TerraformMachinePool", Namespace: "a", Name: "p"},
	}, got)
}
