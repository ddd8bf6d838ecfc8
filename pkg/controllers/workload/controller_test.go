package workload

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// queued takes every key out of each queue, by kind.
func (f *fixture) queued() map[string][]string {
	out := map[string][]string{}
	for kind, q := range f.c.queues {
		for q.Len() > 0 {
			k, _ := q.Get()
			q.Done(k)
			out[kind] = append(out[kind], k.String())
		}
	}
	return out
}

// I3, I4, N5: the event-handler helpers find exactly the affected objects
// from the informer indexes.
func TestEnqueueHelpers(t *testing.T) {
	seedAll := func(f *fixture) {
		f.seed(
			newCluster("c1", func(c *v1alpha1.TerraformCluster) {
				c.Spec.Defaults = &v1alpha1.ClusterDefaults{IdentityRef: idRef("defaults")}
			}),
			newCluster("c2", func(c *v1alpha1.TerraformCluster) { c.Spec.IdentityRef = idRef("other") }),
			// inherits c1's defaults
			newMachine("m-inherits", func(m *v1alpha1.TerraformMachine) { m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"} }),
			// own identityRef wins over c1's defaults
			newMachine("m-own", func(m *v1alpha1.TerraformMachine) {
				m.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"}
				m.Spec.IdentityRef = idRef(identityName)
			}),
			newPool("p-inherits", func(p *v1alpha1.TerraformMachinePool) { p.Labels = map[string]string{v1alpha1.LabelClusterName: "c1"} }),
			newPool("p-c2", func(p *v1alpha1.TerraformMachinePool) { p.Labels = map[string]string{v1alpha1.LabelClusterName: "c2"} }),
			newCluster("elsewhere", func(c *v1alpha1.TerraformCluster) { c.Namespace = otherNS }),
		)
	}
	t.Run("I4 users of an identity, directly or by fallback", func(t *testing.T) {
		f := newFixture(t)
		seedAll(f)
		f.c.EnqueueUsers(identityName)
		require.Equal(t, map[string][]string{
			v1alpha1.KindTerraformCluster: {testNS + "/c1", otherNS + "/elsewhere"},
			v1alpha1.KindTerraformMachine: {testNS + "/m-own"},
		}, sortedQueued(f))
		f.c.EnqueueUsers("defaults")
		require.Equal(t, map[string][]string{
			v1alpha1.KindTerraformMachine:     {testNS + "/m-inherits"},
			v1alpha1.KindTerraformMachinePool: {testNS + "/p-inherits"},
		}, sortedQueued(f))
	})
	t.Run("I3 members of a cluster that inherit from it", func(t *testing.T) {
		f := newFixture(t)
		seedAll(f)
		c1, err := f.inf.Clusters.Lister().TerraformClusters(testNS).Get("c1")
		require.NoError(t, err)
		f.c.enqueueMembers(c1)
		require.Equal(t, map[string][]string{
			v1alpha1.KindTerraformMachine:     {testNS + "/m-inherits"},
			v1alpha1.KindTerraformMachinePool: {testNS + "/p-inherits"},
		}, sortedQueued(f))
		// Tombstones are unwrapped.
		f.c.enqueueMembers(cache.DeletedFinalStateUnknown{Key: testNS + "/c1", Obj: c1})
		require.Len(t, sortedQueued(f)[v1alpha1.KindTerraformMachine], 1)
	})
	t.Run("N5 every workload object of a relabelled namespace", func(t *testing.T) {
		f := newFixture(t)
		seedAll(f)
		f.c.enqueueNamespace(otherNS)
		require.Equal(t, map[string][]string{v1alpha1.KindTerraformCluster: {otherNS + "/elsewhere"}}, sortedQueued(f))
	})
	t.Run("N5 a namespace that arrives after the initial list, not one in it", func(t *testing.T) {
		f := newFixture(t)
		seedAll(f)
		h := f.c.namespaceHandler()
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}}
		h.AddFunc(ns, true)
		require.Empty(t, sortedQueued(f), "the initial list adds every object anyway")
		h.AddFunc(ns, false)
		require.Equal(t, map[string][]string{v1alpha1.KindTerraformCluster: {otherNS + "/elsewhere"}}, sortedQueued(f))
	})
}

func sortedQueued(f *fixture) map[string][]string {
	out := f.queued()
	for _, v := range out {
		slices.Sort(v)
	}
	return out
}

// Section 2 of STYLE, S3-like for the workload kinds: the manager's own status writes do not
// trigger a reconcile; spec, labels, annotations, finalizers, deletion do.
func TestWorkloadChanged(t *testing.T) {
	base := newCluster("c1")
	tests := []struct {
		name   string
		change func(c *v1alpha1.TerraformCluster)
		want   bool
	}{
		{"status only", func(c *v1alpha1.TerraformCluster) { c.Status.Identity = "x"; c.ResourceVersion = "11" }, false},
		{"generation", func(c *v1alpha1.TerraformCluster) { c.Generation = 2 }, true},
		{"labels", func(c *v1alpha1.TerraformCluster) { c.Labels = map[string]string{v1alpha1.LabelClusterName: "x"} }, true},
		{"abandon annotation", func(c *v1alpha1.TerraformCluster) {
			c.Annotations = map[string]string{v1alpha1.AnnotationAbandonInfrastructure: string(c.UID)}
		}, true},
		{"finalizers", func(c *v1alpha1.TerraformCluster) { c.Finalizers = []string{v1alpha1.FinalizerDestroy} }, true},
		// K2: the Machine controller takes a MachineSet's TerraformMachine
		// over in an update of its owner references alone.
		{"owner references", func(c *v1alpha1.TerraformCluster) {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: "c1", UID: "u1", Controller: ptr.To(true)}}
		}, true},
		{"deletion", deletingCluster, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := base.DeepCopy()
			tc.change(n)
			require.Equal(t, tc.want, workloadChanged(base, n))
		})
	}
}

func deletingCluster(c *v1alpha1.TerraformCluster) {
	ts := metav1.NewTime(epoch)
	c.DeletionTimestamp = &ts
}
