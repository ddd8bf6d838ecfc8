package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// fakeLookup is a Lookup over maps, keyed by name (one namespace).
type fakeLookup struct {
	clusters map[string]*capiv1.Cluster
	machines map[string]*capiv1.Machine
	pools    map[string]*capiv1.MachinePool
}

func (f fakeLookup) Cluster(_, name string) (*capiv1.Cluster, bool) {
	c, ok := f.clusters[name]
	return c, ok
}
func (f fakeLookup) Machine(_, name string) (*capiv1.Machine, bool) {
	m, ok := f.machines[name]
	return m, ok
}
func (f fakeLookup) MachinePool(_, name string) (*capiv1.MachinePool, bool) {
	p, ok := f.pools[name]
	return p, ok
}
func (f fakeLookup) ClustersNaming(_, kind, name string) []*capiv1.Cluster {
	var out []*capiv1.Cluster
	for _, c := range f.clusters {
		if c.Spec.InfrastructureRef.Kind == kind && c.Spec.InfrastructureRef.Name == name {
			out = append(out, c)
		}
	}
	return out
}

func infraRef(kind, name string) capiv1.ObjectReference {
	return capiv1.ObjectReference{APIGroup: infraGroup, Kind: kind, Name: name}
}

func cluster(name string, ref capiv1.ObjectReference) *capiv1.Cluster {
	return &capiv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: capiv1.ClusterSpec{InfrastructureRef: ref}}
}

func machine(name, clusterName string, ref capiv1.ObjectReference) *capiv1.Machine {
	return &capiv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: capiv1.MachineSpec{ClusterName: clusterName, InfrastructureRef: ref}}
}

func pool(name, clusterName string, ref capiv1.ObjectReference) *capiv1.MachinePool {
	p := &capiv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: capiv1.MachinePoolSpec{ClusterName: clusterName}}
	p.Spec.Template.Spec.InfrastructureRef = ref
	return p
}

func object(name string, owners ...metav1.OwnerReference) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Namespace: "ns", Name: name, OwnerReferences: owners}
}

func ownerRef(kind, name string, controller bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: capiv1.GroupVersion.String(), Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: ptr.To(controller)}
}

// SPEC K2, row by row.
func TestResolveOwners(t *testing.T) {
	const tc, tm, tmp = v1alpha1.KindTerraformCluster, v1alpha1.KindTerraformMachine, v1alpha1.KindTerraformMachinePool
	good := fakeLookup{
		clusters: map[string]*capiv1.Cluster{
			"c1":    cluster("c1", infraRef(tc, "tc1")),
			"other": cluster("other", capiv1.ObjectReference{APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster", Name: "d"}),
			"empty": cluster("empty", capiv1.ObjectReference{}),
		},
		machines: map[string]*capiv1.Machine{
			"m1":       machine("m1", "c1", infraRef(tm, "tm1")),
			"m-other":  machine("m-other", "c1", infraRef(tm, "someone-else")),
			"m-docker": machine("m-docker", "other", infraRef(tm, "tm-docker")),
			"m-nocl":   machine("m-nocl", "gone", infraRef(tm, "tm-nocl")),
		},
		pools: map[string]*capiv1.MachinePool{
			"p1":      pool("p1", "c1", infraRef(tmp, "tmp1")),
			"p-wrong": pool("p-wrong", "c1", infraRef(tm, "tmp-wrong")),
		},
	}
	replaced := ownerRef(capiv1.KindMachine, "m1", true)
	replaced.UID = "old"
	tests := []struct {
		name   string
		kind   string
		obj    metav1.Object
		lookup fakeLookup
		served bool
		reason v1alpha1.ConditionReason
		infra  string
		msg    string
	}{
		{"cluster named by a Cluster", tc, object("tc1"), good, true, v1alpha1.ReasonDependenciesReady, "tc1", "Cluster c1 names"},
		{"cluster nobody names", tc, object("tc2"), good, true, v1alpha1.ReasonWaitingForOwner, "", "no Cluster in namespace ns"},
		{"cluster owned by a Cluster naming another", tc, object("tc2", ownerRef(capiv1.KindCluster, "c1", false)), good, true, v1alpha1.ReasonOwnerMismatch, "", `names TerraformCluster "tc1"`},
		{"cluster owned by a Cluster of another kind", tc, object("tc2", ownerRef(capiv1.KindCluster, "other", false)), good, true, v1alpha1.ReasonClusterNotTerraform, "", "DockerCluster"},
		{"cluster owned by a Cluster that is gone", tc, object("tc2", ownerRef(capiv1.KindCluster, "gone", false)), good, true, v1alpha1.ReasonWaitingForOwner, "", "no Cluster"},
		{"cluster without Cluster API", tc, object("tc1"), fakeLookup{}, false, v1alpha1.ReasonWaitingForOwner, "", "does not serve Cluster API"},
		{"cluster named under another API group", tc, object("tc3"), fakeLookup{clusters: map[string]*capiv1.Cluster{
			"c": cluster("c", capiv1.ObjectReference{APIGroup: "example.com", Kind: tc, Name: "tc3"})}}, true, v1alpha1.ReasonWaitingForOwner, "", "no Cluster"},

		{"machine owned and named", tm, object("tm1", ownerRef(capiv1.KindMachine, "m1", true)), good, true, v1alpha1.ReasonDependenciesReady, "tc1", "Machine m1 of Cluster c1"},
		{"machine without owner", tm, object("tm1"), good, true, v1alpha1.ReasonWaitingForOwner, "", "no Machine is this object's controller owner"},
		{"machine with a non-controller Machine owner", tm, object("tm1", ownerRef(capiv1.KindMachine, "m1", false)), good, true, v1alpha1.ReasonWaitingForOwner, "", "no Machine"},
		{"machine controlled by another kind", tm, object("tm1", ownerRef("MachineSet", "ms", true)), good, true, v1alpha1.ReasonOwnerMismatch, "", "MachineSet ms"},
		{"machine whose Machine is not cached", tm, object("tm1", ownerRef(capiv1.KindMachine, "m9", true)), good, true, v1alpha1.ReasonWaitingForOwner, "", "Machine m9 not found"},
		{"machine whose Machine was replaced", tm, object("tm1", replaced), good, true, v1alpha1.ReasonWaitingForOwner, "", "another UID"},
		{"machine whose Machine names another", tm, object("tm1", ownerRef(capiv1.KindMachine, "m-other", true)), good, true, v1alpha1.ReasonOwnerMismatch, "", `"someone-else"`},
		{"machine of a Cluster of another kind", tm, object("tm-docker", ownerRef(capiv1.KindMachine, "m-docker", true)), good, true, v1alpha1.ReasonClusterNotTerraform, "", "DockerCluster"},
		{"machine whose Cluster is not cached", tm, object("tm-nocl", ownerRef(capiv1.KindMachine, "m-nocl", true)), good, true, v1alpha1.ReasonWaitingForOwner, "", `Cluster "gone"`},

		{"pool owned and named", tmp, object("tmp1", ownerRef(capiv1.KindMachinePool, "p1", true)), good, true, v1alpha1.ReasonDependenciesReady, "tc1", "MachinePool p1"},
		{"pool owned by a Machine", tmp, object("tmp1", ownerRef(capiv1.KindMachine, "m1", true)), good, true, v1alpha1.ReasonOwnerMismatch, "", "not a MachinePool"},
		{"pool whose MachinePool names a TerraformMachine", tmp, object("tmp-wrong", ownerRef(capiv1.KindMachinePool, "p-wrong", true)), good, true, v1alpha1.ReasonOwnerMismatch, "", "TerraformMachine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ResolveOwners(tt.kind, tt.obj, tt.lookup, tt.served)
			assert.Equal(t, tt.reason, o.Reason, o.Message)
			assert.Equal(t, tt.infra, o.InfrastructureCluster)
			assert.Contains(t, o.Message, tt.msg)
			assert.Equal(t, tt.reason == v1alpha1.ReasonDependenciesReady, o.Resolved())
		})
	}
}

// Two Clusters naming one TerraformCluster: the lowest name decides.
func TestResolveOwnersLowestClusterWins(t *testing.T) {
	l := fakeLookup{clusters: map[string]*capiv1.Cluster{
		"b": cluster("b", infraRef(v1alpha1.KindTerraformCluster, "tc")),
		"a": cluster("a", infraRef(v1alpha1.KindTerraformCluster, "tc")),
	}}
	o := ResolveOwners(v1alpha1.KindTerraformCluster, object("tc"), l, true)
	assert.Equal(t, "a", o.Cluster.Name)
}

// SPEC K3 (and T5's annotation).
func TestPaused(t *testing.T) {
	paused := cluster("c1", infraRef(v1alpha1.KindTerraformCluster, "tc1"))
	paused.Spec.Paused = ptr.To(true)
	notPaused := cluster("c1", infraRef(v1alpha1.KindTerraformCluster, "tc1"))
	notPaused.Spec.Paused = ptr.To(false)
	annotated := object("x")
	annotated.Annotations = map[string]string{v1alpha1.AnnotationPaused: ""}
	standalone := object("x")
	standalone.Annotations = map[string]string{v1alpha1.AnnotationStandalone: "true"}

	for _, tt := range []struct {
		name string
		obj  metav1.Object
		o    Owners
		want bool
		msg  string
	}{
		{"nothing", object("x"), Owners{}, false, ""},
		{"annotation", annotated, Owners{}, true, "annotation cluster.x-k8s.io/paused"},
		{"Cluster paused", object("x"), Owners{Cluster: paused}, true, "Cluster c1 has spec.paused: true"},
		{"Cluster paused, owners unresolved", object("x"), Owners{Reason: v1alpha1.ReasonOwnerMismatch, Cluster: paused}, true, "Cluster c1"},
		{"Cluster not paused", object("x"), Owners{Cluster: notPaused}, false, ""},
		{"standalone ignores a Cluster", standalone, Owners{Cluster: paused}, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := Paused(tt.obj, tt.o)
			assert.Equal(t, tt.want, got)
			if tt.msg == "" {
				assert.Empty(t, msg)
			} else {
				assert.Contains(t, msg, tt.msg)
			}
		})
	}
}

func TestStandalone(t *testing.T) {
	o := object("x")
	assert.False(t, Standalone(o))
	o.Annotations = map[string]string{v1alpha1.AnnotationStandalone: "yes"}
	assert.False(t, Standalone(o), "only \"true\" opts out")
	o.Annotations[v1alpha1.AnnotationStandalone] = "true"
	assert.True(t, Standalone(o))
}
