package index

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// counting wraps an Indexer and counts the objects every read hands out
// (plus one per call): the work a lookup does, whatever the machine's speed.
type counting struct {
	cache.Indexer
	reads *int
}

func (c counting) ByIndex(name, key string) ([]interface{}, error) {
	objs, err := c.Indexer.ByIndex(name, key)
	*c.reads += 1 + len(objs)
	return objs, err
}

func (c counting) Index(name string, obj interface{}) ([]interface{}, error) {
	objs, err := c.Indexer.Index(name, obj)
	*c.reads += 1 + len(objs)
	return objs, err
}

func (c counting) IndexKeys(name, key string) ([]string, error) {
	keys, err := c.Indexer.IndexKeys(name, key)
	*c.reads += 1 + len(keys)
	return keys, err
}

func (c counting) GetByKey(key string) (interface{}, bool, error) {
	*c.reads++
	return c.Indexer.GetByKey(key)
}

func (c counting) List() []interface{} {
	l := c.Indexer.List()
	*c.reads += 1 + len(l)
	return l
}

func (c counting) ListKeys() []string {
	l := c.Indexer.ListKeys()
	*c.reads += 1 + len(l)
	return l
}

// counted returns r with every indexer counting into reads.
func counted(r *Resolver, reads *int) *Resolver {
	return &Resolver{
		ClusterIndexer: counting{r.ClusterIndexer, reads},
		MachineIndexer: counting{r.MachineIndexer, reads},
		PoolIndexer:    counting{r.PoolIndexer, reads},
	}
}

// sharedLabel seeds n clusters and n machines of namespace "t" that all
// carry the cluster-name label "shared" (issue 20's attack: the clusters
// name identity "id"), plus a cluster named "shared" that loses to them.
func sharedLabel(t testing.TB, n int) *Resolver {
	r, cl, ma, _ := newResolver(t)
	label := map[string]string{v1alpha1.LabelClusterName: "shared"}
	for i := range n {
		cl(&v1alpha1.TerraformCluster{ObjectMeta: meta("t", fmt.Sprintf("c-%05d", i), label),
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id")}})
		ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("t", fmt.Sprintf("m-%05d", i), label)})
	}
	cl(&v1alpha1.TerraformCluster{ObjectMeta: meta("t", "shared", nil), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id")}})
	return r
}

// B13: with 1,500 clusters and 1,500 machines sharing one cluster-name
// label, finding the identity's users reads each object a bounded number of
// times (the code before B13 read n members per cluster and n clusters per
// member: n^3), and every answer is the same as SPEC 1.2 and I2 give.
func TestUsersCostSharedLabel(t *testing.T) {
	const n = 1500
	r := sharedLabel(t, n)
	reads := 0
	cr := counted(r, &reads)

	users, err := cr.Users("id")
	require.NoError(t, err)
	require.Len(t, users, 2*n+1, "every cluster and every machine (they inherit from c-00000)")
	total := 2*n + 1
	t.Logf("Users: %d reads for %d objects", reads, total)
	require.LessOrEqual(t, reads, 4*total, "B13: Users reads each object a bounded number of times")

	reads = 0
	inNs, err := cr.UsersIn("t", "id")
	require.NoError(t, err)
	require.Len(t, inNs, 2*n+1)
	require.LessOrEqual(t, reads, 4*total, "B13: UsersIn too")

	// One member's cluster costs the clusters carrying its label (what is
	// asked), not the namespace's clusters times anything.
	reads = 0
	id, err := cr.IdentityOf(r.MachineIndexer.List()[0].(*v1alpha1.TerraformMachine))
	require.NoError(t, err)
	require.Equal(t, "id", id)
	require.LessOrEqual(t, reads, n+4, "IdentityOf reads the label's clusters once")

	// A cluster's members: the winner gets them all, a loser none, each at
	// the cost of the label's clusters and the winner's members.
	reads = 0
	first, _, _ := r.ClusterIndexer.GetByKey("t/c-00000")
	ms, err := cr.MembersOf(first.(*v1alpha1.TerraformCluster))
	require.NoError(t, err)
	require.Len(t, ms, n)
	require.LessOrEqual(t, reads, 2*n+8)
	reads = 0
	last, _, _ := r.ClusterIndexer.GetByKey(fmt.Sprintf("t/c-%05d", n-1))
	ms, err = cr.MembersOf(last.(*v1alpha1.TerraformCluster))
	require.NoError(t, err)
	require.Empty(t, ms, "a cluster that loses the label has no members")
	require.LessOrEqual(t, reads, n+8)
}

// B13: 10,000 users of one identity (issue 20's bound for the webhook's A4
// DELETE) spread over the shapes resolution takes: clusters naming it,
// members inheriting it from a cluster's defaults (the cluster itself uses
// another), members naming it themselves; each object is read a bounded
// number of times.
func TestUsersCostTenThousand(t *testing.T) {
	r, cl, ma, po := newResolver(t)
	// 100 clusters over 10 namespaces, each with 66 machines inheriting
	// from its defaults and 33 pools naming the identity: 10,000 users.
	const clusters, inheriting, naming = 100, 66, 33
	for i := range clusters {
		ns := fmt.Sprintf("ns-%02d", i%10)
		name := fmt.Sprintf("c-%03d", i)
		cl(&v1alpha1.TerraformCluster{ObjectMeta: meta(ns, name, nil),
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("other"), Defaults: &v1alpha1.ClusterDefaults{IdentityRef: ref("id")}}})
		for j := range inheriting {
			label := map[string]string{v1alpha1.LabelClusterName: name}
			ma(&v1alpha1.TerraformMachine{ObjectMeta: meta(ns, fmt.Sprintf("%s-m%02d", name, j), label)})
		}
		for j := range naming {
			po(&v1alpha1.TerraformMachinePool{ObjectMeta: meta(ns, fmt.Sprintf("%s-p%02d", name, j), nil),
				Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: ref("id")}})
		}
		cl(&v1alpha1.TerraformCluster{ObjectMeta: meta(ns, name+"-own", nil), Spec: v1alpha1.TerraformClusterSpec{IdentityRef: ref("id")}})
	}
	// Noise: another identity's objects are never read.
	for i := range 5000 {
		ma(&v1alpha1.TerraformMachine{ObjectMeta: meta("noise", fmt.Sprintf("m-%04d", i), nil), Spec: v1alpha1.TerraformMachineSpec{IdentityRef: ref("other")}})
	}
	want := clusters * (1 + inheriting + naming)
	require.Equal(t, 10000, want)
	reads := 0
	users, err := counted(r, &reads).Users("id")
	require.NoError(t, err)
	require.Len(t, users, want)
	t.Logf("Users: %d reads for %d users", reads, want)
	require.LessOrEqual(t, reads, 2*want, "B13: bounded by the users, not by every object")
}

// BenchmarkUsersSharedLabel is TestUsersCostSharedLabel's lookup, timed:
// go test -run '^$' -bench UsersSharedLabel ./pkg/controllers/index/
func BenchmarkUsersSharedLabel(b *testing.B) {
	r := sharedLabel(b, 1500)
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Users("id"); err != nil {
			b.Fatal(err)
		}
	}
}

// B13: an object's Jobs are one bucket of the Controller index: Jobs that
// merely list the object among their owners (any tenant can write such a
// reference) are not read.
func TestJobsOfReadsControlledJobsOnly(t *testing.T) {
	inf := kubeinformers.NewSharedInformerFactory(kubefake.NewClientset(), 0).Batch().V1().Jobs().Informer()
	require.NoError(t, AddJobIndexers(inf))
	require.NoError(t, AddJobIndexers(inf), "indexes are added once")
	jobs := inf.GetIndexer()
	owner := metav1.OwnerReference{APIVersion: "infrastructure.cluster.x-k8s.io/v1alpha1", Kind: "TerraformCluster", Name: "c", UID: "uid-c"}
	controllerRef := owner
	controllerRef.Controller = new(true)
	require.NoError(t, jobs.Add(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "mine", OwnerReferences: []metav1.OwnerReference{controllerRef}}}))
	for i := range 1000 {
		require.NoError(t, jobs.Add(&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: fmt.Sprintf("forged-%d", i), OwnerReferences: []metav1.OwnerReference{owner}}}))
	}
	reads := 0
	got, err := JobsOf(counting{jobs, &reads}, "uid-c")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "mine", got[0].Name)
	require.LessOrEqual(t, reads, 2)
}
