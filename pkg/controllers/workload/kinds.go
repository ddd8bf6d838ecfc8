package workload

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/generated/clientset/versioned"
	informers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
)

// fieldManager names the manager's writes.
const fieldManager = "captf-manager"

// workload is a deep copy of one object of any of the three kinds, with the
// fields the shared reconcile reads, the status it writes, and the events
// the pass decided on (emitted at one point, after the pass).
type workload struct {
	kind   *kind
	obj    metav1.Object
	robj   runtime.Object
	source v1alpha1.SourceSpec
	jobs   v1alpha1.JobsSpec
	status *v1alpha1.WorkloadStatus
	events []pendingEvent
	// recorded are the events of what the pass records in status (a
	// finished run, O1, O2): emitted only once that status is written, so
	// a pass whose write fails (a Conflict) and is done again reports the
	// run once, not per pass (section 10).
	recorded []pendingEvent
	// since is when the object's key was last added to its queue: the
	// source read it uses must have begun later (P1).
	since freshness.Stamp
	// contract is the pass's view of the Cluster API contract (K2-K6).
	contract contractState
	// plansDecided: planGate decided the plans on this pass (O8).
	plansDecided bool
}

func (w *workload) key() cache.ObjectName {
	return cache.ObjectName{Namespace: w.obj.GetNamespace(), Name: w.obj.GetName()}
}

// kind is what differs between the three kinds: reading from the cache,
// writing through the typed client, and the informer.
type kind struct {
	name     string
	informer cache.SharedIndexInformer
	// get returns a deep copy from the cache.
	get func(key cache.ObjectName) (*workload, error)
	// keys lists every object in the cache (resync).
	keys func() []cache.ObjectName
	// patch applies a JSON merge patch of what the manager owns (patch.go)
	// and returns the stored object. Never an Update: w comes from a cache
	// that dropped what the manager does not read (SPEC B12).
	patch func(ctx context.Context, w *workload, data []byte) (*workload, error)
	// updateStatus writes the status subresource (the API server keeps
	// the stored metadata and spec, so a trimmed copy loses nothing).
	updateStatus func(ctx context.Context, w *workload) (*workload, error)
}

func wrapCluster(c *v1alpha1.TerraformCluster) *workload {
	c = c.DeepCopy()
	return &workload{obj: c, robj: c, source: c.Spec.Source, jobs: c.Spec.Jobs, status: &c.Status}
}

func wrapMachine(m *v1alpha1.TerraformMachine) *workload {
	m = m.DeepCopy()
	return &workload{obj: m, robj: m, source: m.Spec.Source, jobs: m.Spec.Jobs, status: &m.Status}
}

func wrapPool(p *v1alpha1.TerraformMachinePool) *workload {
	p = p.DeepCopy()
	return &workload{obj: p, robj: p, source: p.Spec.Source, jobs: p.Spec.Jobs, status: &p.Status}
}

// typedClient is the part of a generated typed client the reconcile uses.
type typedClient[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*T, error)
	UpdateStatus(ctx context.Context, obj *T, opts metav1.UpdateOptions) (*T, error)
}

// newKind builds a kind from its typed lister, client and wrapper.
func newKind[T any, PT interface {
	*T
	metav1.Object
}](name string, informer cache.SharedIndexInformer,
	get func(namespace, name string) (PT, error),
	list func() ([]PT, error),
	client func(namespace string) typedClient[T],
	wrap func(PT) *workload,
) *kind {
	k := &kind{name: name, informer: informer}
	wrapped := func(o PT) *workload {
		w := wrap(o)
		w.kind = k
		return w
	}
	k.get = func(key cache.ObjectName) (*workload, error) {
		o, err := get(key.Namespace, key.Name)
		if err != nil {
			return nil, err
		}
		return wrapped(o), nil
	}
	k.keys = func() []cache.ObjectName {
		objs, err := list()
		if err != nil {
			return nil
		}
		out := make([]cache.ObjectName, len(objs))
		for i, o := range objs {
			out[i] = cache.ObjectName{Namespace: o.GetNamespace(), Name: o.GetName()}
		}
		return out
	}
	k.patch = func(ctx context.Context, w *workload, data []byte) (*workload, error) {
		out, err := client(w.obj.GetNamespace()).Patch(ctx, w.obj.GetName(), types.MergePatchType, data, metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil {
			return nil, err
		}
		return wrapped(PT(out)), nil
	}
	k.updateStatus = func(ctx context.Context, w *workload) (*workload, error) {
		out, err := client(w.obj.GetNamespace()).UpdateStatus(ctx, (*T)(w.obj.(PT)), metav1.UpdateOptions{FieldManager: fieldManager})
		if err != nil {
			return nil, err
		}
		return wrapped(PT(out)), nil
	}
	return k
}

func clusterKind(inf informers.TerraformClusterInformer, client versioned.Interface) *kind {
	l := inf.Lister()
	return newKind(v1alpha1.KindTerraformCluster, inf.Informer(),
		func(ns, name string) (*v1alpha1.TerraformCluster, error) { return l.TerraformClusters(ns).Get(name) },
		func() ([]*v1alpha1.TerraformCluster, error) { return l.List(labels.Everything()) },
		func(ns string) typedClient[v1alpha1.TerraformCluster] {
			return client.InfrastructureV1alpha1().TerraformClusters(ns)
		},
		wrapCluster)
}

func machineKind(inf informers.TerraformMachineInformer, client versioned.Interface) *kind {
	l := inf.Lister()
	return newKind(v1alpha1.KindTerraformMachine, inf.Informer(),
		func(ns, name string) (*v1alpha1.TerraformMachine, error) { return l.TerraformMachines(ns).Get(name) },
		func() ([]*v1alpha1.TerraformMachine, error) { return l.List(labels.Everything()) },
		func(ns string) typedClient[v1alpha1.TerraformMachine] {
			return client.InfrastructureV1alpha1().TerraformMachines(ns)
		},
		wrapMachine)
}

func poolKind(inf informers.TerraformMachinePoolInformer, client versioned.Interface) *kind {
	l := inf.Lister()
	return newKind(v1alpha1.KindTerraformMachinePool, inf.Informer(),
		func(ns, name string) (*v1alpha1.TerraformMachinePool, error) {
			return l.TerraformMachinePools(ns).Get(name)
		},
		func() ([]*v1alpha1.TerraformMachinePool, error) { return l.List(labels.Everything()) },
		func(ns string) typedClient[v1alpha1.TerraformMachinePool] {
			return client.InfrastructureV1alpha1().TerraformMachinePools(ns)
		},
		wrapPool)
}
