package clusterctltest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// CopySource copies the identity's source Secret ref from src to dst as
// the runbook says (docs/operator-guide.md, "Moving a cluster": same
// namespace, name, data, labels and annotations), creating the namespace
// if dst lacks it.
func CopySource(ctx context.Context, t testing.TB, src, dst kubernetes.Interface, ref v1alpha1.SecretReference) *corev1.Secret {
	t.Helper()
	s, err := src.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dst.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ref.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c, err := dst.CoreV1().Secrets(ref.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name, Labels: s.Labels, Annotations: s.Annotations},
		Type: s.Type, Data: s.Data}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// JobRecorder keeps every Job a watch saw created in a namespace, as
// "<action> <name>".
type JobRecorder struct {
	mu   sync.Mutex
	seen []string
}

// Names are the Jobs seen created, in order.
func (r *JobRecorder) Names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// RecordJobs watches ns's Jobs from now until the test ends (ctx, the
// test's); a Job that already exists is not recorded.
func RecordJobs(ctx context.Context, t testing.TB, kube kubernetes.Interface, ns string) *JobRecorder {
	t.Helper()
	l, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return kube.BatchV1().Jobs(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	r := &JobRecorder{}
	go func() {
		for ev := range w.ResultChan() {
			j, ok := ev.Object.(*batchv1.Job)
			if !ok || ev.Type != watch.Added {
				continue
			}
			r.mu.Lock()
			r.seen = append(r.seen, string(jobs.ActionOf(j))+" "+j.Name)
			r.mu.Unlock()
		}
	}()
	return r
}

// Condition returns condition typ of a Cluster API object's status.
func Condition(u *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}

// Cluster API's kinds the move tests read.
var (
	ClusterGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "clusters"}
	MachineGVR = schema.GroupVersionResource{Group: "cluster.x-k8s.io", Version: "v1beta2", Resource: "machines"}
)

// Movable reports whether Cluster API sees what clusterctl move requires
// of Cluster ns/cluster and its Machine ns/machine: the Machine's nodeRef,
// the Cluster's infrastructure provisioned and its control plane
// initialized; and what it saw, for messages.
func Movable(ctx context.Context, dyn dynamic.Interface, ns, cluster, machine string) (bool, string) {
	m, err := dyn.Resource(MachineGVR).Namespace(ns).Get(ctx, machine, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
	c, err := dyn.Resource(ClusterGVR).Namespace(ns).Get(ctx, cluster, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	infra, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned")
	cpInit := Condition(c, "ControlPlaneInitialized")
	return node != "" && infra && cpInit["status"] == "True",
		fmt.Sprintf("Machine nodeRef %q; Cluster infrastructureProvisioned %v, ControlPlaneInitialized %v", node, infra, cpInit)
}
