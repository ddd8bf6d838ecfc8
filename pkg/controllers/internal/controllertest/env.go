package controllertest

import (
	"context"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/conflicts"
	"github.com/captf/captf/pkg/controllers/trim"
	"github.com/captf/captf/pkg/credentials"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
	infrainformers "github.com/captf/captf/pkg/generated/informers/externalversions/infrastructure/v1alpha1"
	"github.com/stretchr/testify/require"
)

// The source Secret both controllers' fixtures use.
const (
	SourceNS   = "captf-system"
	SourceName = "cloud-creds"
	// SecretValue is a recognisable credential: X1 says it never reaches an
	// event, a condition message or a log line. Every fixture scans for it
	// (and for the source hash) when its test ends.
	SecretValue = "s3cr3t-VALUE-x1"
)

// Epoch is the fake clock's start.
var Epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// SourceData is the source Secret's data: one credential, one plain value.
func SourceData() map[string][]byte {
	return map[string][]byte{"API_KEY": []byte(SecretValue), "REGION": []byte("eu-west-1")}
}

// NewSource returns the source Secret with data.
func NewSource(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: SourceNS, Name: SourceName, UID: "uid-source", ResourceVersion: "5"},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
}

// NewIdentity returns an identity named name for the source Secret.
func NewIdentity(name string, allowed *v1alpha1.AllowedNamespaces) *v1alpha1.TerraformClusterIdentity {
	return &v1alpha1.TerraformClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-identity-" + name), Generation: 1},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Namespace: SourceNS, Name: SourceName},
			AllowedNamespaces: allowed,
		},
	}
}

// Env is what both controllers' fixtures are built on: a context whose
// logger buffers every line (for the X1 scan), fake clientsets, a fake
// recorder and clock, and informer factories split by label as the manager
// splits them (M9). The informers are never started: tests seed them.
type Env struct {
	Ctx      context.Context
	Logs     ktesting.Buffer
	Kube     *kubefake.Clientset
	Captf    *captffake.Clientset
	Recorder *record.FakeRecorder
	Clock    *clocktesting.FakeClock
	// Tracker records foreign Secrets (M7) on the fake clock.
	Tracker *conflicts.Tracker
	// Secrets are the values the X1 scan looks for: the credential and
	// its source hash, and whatever a test adds.
	Secrets []string

	// Kinf watches Namespaces; Mirrors only captf.io/mirrored=true
	// Secrets (M9); Managed only captf.io/managed=true Jobs.
	Kinf, Mirrors, Managed kubeinformers.SharedInformerFactory
	// Cinf watches the four captf kinds.
	Cinf infrainformers.Interface

	mu     sync.Mutex
	events []string
}

// NewEnv builds an Env for t.
func NewEnv(t testing.TB) *Env {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(10)))
	kube := kubefake.NewClientset()
	captf := captffake.NewSimpleClientset()
	selected := func(label string) kubeinformers.SharedInformerFactory {
		return kubeinformers.NewSharedInformerFactoryWithOptions(kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = label + "=" + v1alpha1.LabelTrue
		}))
	}
	// The API server keeps a CRD's stored metadata and spec on a status
	// update; the fake would replace the whole object.
	captf.PrependReactor("update", "*", statusSubresource(captf.Tracker()))
	clk := clocktesting.NewFakeClock(Epoch)
	return &Env{
		Tracker:  conflicts.New(clk, ConflictTTL),
		Secrets:  []string{SecretValue, credentials.SourceHash(SourceData())},
		Ctx:      klog.NewContext(context.Background(), logger),
		Logs:     logger.GetSink().(ktesting.Underlier).GetBuffer(),
		Kube:     kube,
		Captf:    captf,
		Recorder: record.NewFakeRecorder(100),
		Clock:    clk,
		Kinf:     kubeinformers.NewSharedInformerFactory(kube, 0),
		Mirrors:  selected(v1alpha1.LabelMirrored),
		Managed:  selected(v1alpha1.LabelManaged),
		Cinf:     captfinformers.NewSharedInformerFactory(captf, 0).Infrastructure().V1alpha1(),
	}
}

// statusSubresource makes an update of a captf object's status on the fake
// behave as the API server's does for a CRD with a status subresource: only
// the status changes, the stored metadata and spec stay. A status write from
// a trimmed cached copy therefore loses nothing (SPEC B12), as in a cluster.
func statusSubresource(tracker k8stesting.ObjectTracker) k8stesting.ReactionFunc {
	return func(a k8stesting.Action) (bool, runtime.Object, error) {
		u, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "status" {
			return false, nil, nil
		}
		m, err := meta.Accessor(u.GetObject())
		if err != nil {
			return false, nil, nil
		}
		stored, err := tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		out := stored.DeepCopyObject()
		status := reflect.ValueOf(u.GetObject()).Elem().FieldByName("Status")
		if !status.IsValid() {
			return false, nil, nil
		}
		reflect.ValueOf(out).Elem().FieldByName("Status").Set(status)
		// Every write stores a new resourceVersion, as on the API server.
		outMeta, err := meta.Accessor(out)
		if err != nil {
			return true, nil, err
		}
		outMeta.SetResourceVersion(nextVersion(outMeta.GetResourceVersion()))
		if err := tracker.Update(a.GetResource(), out, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		stored, err = tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
		return true, stored, err
	}
}

// nextVersion is the resourceVersion a write of an object stored at rv
// gets: the next integer, or rv with a suffix when it is not one.
func nextVersion(rv string) string {
	if n, err := strconv.ParseUint(rv, 10, 64); err == nil {
		return strconv.FormatUint(n+1, 10)
	}
	return rv + "+1"
}

// ConflictTTL is how long a conflict record lives unless seen again.
const ConflictTTL = 25 * time.Minute

// Intercept runs reactor before the object tracker on both fakes, for
// every verb and resource (fixtures record the calls with it).
func (e *Env) Intercept(reactor k8stesting.ReactionFunc) {
	for _, fk := range []*k8stesting.Fake{&e.Kube.Fake, &e.Captf.Fake} {
		fk.PrependReactor("*", "*", reactor)
	}
}

// PopEvents returns the events recorded since the last call; every event
// popped is kept for the X1 scan (RequireNoLeak).
func (e *Env) PopEvents() []string {
	var out []string
	for {
		select {
		case ev := <-e.Recorder.Events:
			out = append(out, ev)
		default:
			e.mu.Lock()
			e.events = append(e.events, out...)
			e.mu.Unlock()
			return out
		}
	}
}

// StoredSecret returns the Secret the fake API server holds, nil when none.
func (e *Env) StoredSecret(ns, name string) *corev1.Secret {
	s, err := e.Kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

// Cached returns obj as the manager's informers hold it: trimmed by the
// manager's transform to what it reads (SPEC B1, B12), so a controller
// that read a key the keep-lists drop fails its unit tests.
func Cached(obj runtime.Object) runtime.Object {
	out, _ := trim.ForCache(obj)
	return out.(runtime.Object)
}

// Seed adds objects to the fake API server and to the informer that would
// see them, as the manager's informers hold them (Cached): a Secret only
// when it carries captf.io/mirrored=true (M9), a Job to the managed-Job
// informer.
func (e *Env) Seed(t testing.TB, objs ...runtime.Object) {
	t.Helper()
	for _, o := range objs {
		var idx cache.Indexer
		tracker := e.Kube.Tracker()
		switch x := o.(type) {
		case *v1alpha1.TerraformCluster:
			idx, tracker = e.Cinf.TerraformClusters().Informer().GetIndexer(), e.Captf.Tracker()
		case *v1alpha1.TerraformMachine:
			idx, tracker = e.Cinf.TerraformMachines().Informer().GetIndexer(), e.Captf.Tracker()
		case *v1alpha1.TerraformMachinePool:
			idx, tracker = e.Cinf.TerraformMachinePools().Informer().GetIndexer(), e.Captf.Tracker()
		case *v1alpha1.TerraformClusterIdentity:
			idx, tracker = e.Cinf.TerraformClusterIdentities().Informer().GetIndexer(), e.Captf.Tracker()
		case *v1alpha1.TerraformPlan:
			idx, tracker = e.Cinf.TerraformPlans().Informer().GetIndexer(), e.Captf.Tracker()
		case *corev1.Namespace:
			idx = e.Kinf.Core().V1().Namespaces().Informer().GetIndexer()
		case *batchv1.Job:
			idx = e.Managed.Batch().V1().Jobs().Informer().GetIndexer()
		case *corev1.Secret:
			if x.Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue {
				idx = e.Mirrors.Core().V1().Secrets().Informer().GetIndexer()
			}
		case *corev1.ConfigMap:
			// Read uncached only (variables sources, SPEC O9).
		case *corev1.Pod:
			// Read uncached only (a finished Job's pod, SPEC O1).
		default:
			t.Fatalf("cannot seed %T", o)
		}
		require.NoError(t, tracker.Add(o.DeepCopyObject()))
		if idx != nil {
			require.NoError(t, idx.Add(Cached(o.DeepCopyObject())))
		}
	}
}

// CatchUp makes the informers hold what the fake API server holds, as if
// their watches had delivered every event (mirrors and Jobs as Cached).
func (e *Env) CatchUp(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	c := e.Captf.InfrastructureV1alpha1()
	lists := []struct {
		inf  cache.SharedIndexInformer
		list func() (runtime.Object, error)
		keep func(runtime.Object) bool
	}{
		{e.Cinf.TerraformClusterIdentities().Informer(), func() (runtime.Object, error) {
			return c.TerraformClusterIdentities().List(ctx, metav1.ListOptions{})
		}, nil},
		{e.Cinf.TerraformClusters().Informer(), func() (runtime.Object, error) { return c.TerraformClusters("").List(ctx, metav1.ListOptions{}) }, nil},
		{e.Cinf.TerraformMachines().Informer(), func() (runtime.Object, error) { return c.TerraformMachines("").List(ctx, metav1.ListOptions{}) }, nil},
		{e.Cinf.TerraformMachinePools().Informer(), func() (runtime.Object, error) {
			return c.TerraformMachinePools("").List(ctx, metav1.ListOptions{})
		}, nil},
		{e.Cinf.TerraformPlans().Informer(), func() (runtime.Object, error) { return c.TerraformPlans("").List(ctx, metav1.ListOptions{}) }, nil},
		{e.Mirrors.Core().V1().Secrets().Informer(), func() (runtime.Object, error) { return e.Kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}) },
			func(o runtime.Object) bool {
				return o.(*corev1.Secret).Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue
			}},
		{e.Managed.Batch().V1().Jobs().Informer(), func() (runtime.Object, error) { return e.Kube.BatchV1().Jobs("").List(ctx, metav1.ListOptions{}) }, nil},
	}
	for _, l := range lists {
		list, err := l.list()
		require.NoError(t, err)
		items, err := meta.ExtractList(list)
		require.NoError(t, err)
		var objs []interface{}
		for _, o := range items {
			if l.keep == nil || l.keep(o) {
				objs = append(objs, Cached(o.DeepCopyObject()))
			}
		}
		require.NoError(t, l.inf.GetIndexer().Replace(objs, ""))
	}
}

// RequireNoLeak is X1 at the end of a test: no credential value, and no
// hash of one, in any event, condition message or log line.
func (e *Env) RequireNoLeak(t testing.TB, conditions [][]metav1.Condition) {
	t.Helper()
	e.PopEvents()
	e.mu.Lock()
	texts := append([]string{e.Logs.String()}, e.events...)
	e.mu.Unlock()
	for _, cs := range conditions {
		for _, c := range cs {
			texts = append(texts, c.Message)
		}
	}
	RequireNoSecrets(t, e.Secrets, texts)
}
