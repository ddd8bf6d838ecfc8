package identity

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/credentials"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
)

const (
	identityName = "prod"
	sourceNS     = "captf-system"
	sourceName   = "cloud-creds"
	resync       = 5 * time.Minute
	// secretValue is a recognisable credential: X1 says it never reaches
	// an event, a condition message or a log line. Every fixture scans for
	// it (and for the source hash) when its test ends.
	secretValue = "s3cr3t-VALUE-x1"
	// deadline bounds polling; reaching it is a failure, never an assertion.
	deadline = 10 * time.Second
)

var (
	mirrorName = credentials.MirrorName(identityName)
	epoch      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	identityGR = v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")
	secretsGR  = corev1.SchemeGroupVersion.WithResource("secrets")
)

func sourceData() map[string][]byte {
	return map[string][]byte{"API_KEY": []byte(secretValue), "REGION": []byte("eu-west-1")}
}

func newIdentity(name string, allowed *v1alpha1.AllowedNamespaces) *v1alpha1.TerraformClusterIdentity {
	return &v1alpha1.TerraformClusterIdentity{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-identity-" + name), Generation: 1},
		Spec: v1alpha1.TerraformClusterIdentitySpec{
			SecretRef:         v1alpha1.SecretReference{Namespace: sourceNS, Name: sourceName},
			AllowedNamespaces: allowed,
		},
	}
}

func allowAll() *v1alpha1.AllowedNamespaces {
	return &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}
}

func newSource(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: sourceNS, Name: sourceName, UID: "uid-source"},
		Data:       data,
	}
}

// newMirror is identity's mirror in namespace written from data, owned by a
// cluster named after the namespace.
func newMirror(identity, namespace string, data map[string][]byte) *corev1.Secret {
	m := credentials.DesiredMirror(identity, namespace, data)
	m.UID = types.UID("uid-mirror-" + namespace + "-" + identity)
	m.ResourceVersion = "42"
	m.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "TerraformCluster", Name: "c-" + namespace, UID: types.UID("uid-c-" + namespace),
	}}
	return m
}

type fixture struct {
	t        *testing.T
	ctx      context.Context
	logs     ktesting.Buffer
	kube     *kubefake.Clientset
	captf    *captffake.Clientset
	inf      Informers
	recorder *record.FakeRecorder
	clock    *clocktesting.FakeClock
	tracker  *conflicts.Tracker
	queue    loop.Queue
	c        *Controller

	mu       sync.Mutex
	actions  []k8stesting.Action
	events   []string
	enqueued []string
	secrets  []string
}

// conflictTTL is how long a conflict record lives unless seen again.
const conflictTTL = 25 * time.Minute

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true), ktesting.Verbosity(10)))
	ctx := klog.NewContext(context.Background(), logger)
	f := &fixture{
		t:        t,
		ctx:      ctx,
		logs:     logger.GetSink().(ktesting.Underlier).GetBuffer(),
		kube:     kubefake.NewClientset(),
		captf:    captffake.NewSimpleClientset(),
		recorder: record.NewFakeRecorder(100),
		clock:    clocktesting.NewFakeClock(epoch),
		secrets:  []string{secretValue, credentials.SourceHash(sourceData())},
	}
	f.tracker = conflicts.New(f.clock, conflictTTL)
	for _, fk := range []*k8stesting.Fake{&f.kube.Fake, &f.captf.Fake} {
		fk.PrependReactor("*", "*", f.record)
	}
	kinf := kubeinformers.NewSharedInformerFactory(f.kube, 0)
	mirrors := kubeinformers.NewSharedInformerFactoryWithOptions(f.kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.LabelMirrored + "=" + v1alpha1.LabelTrue // M9
	}))
	cinf := captfinformers.NewSharedInformerFactory(f.captf, 0).Infrastructure().V1alpha1()
	f.inf = Informers{
		Identities: cinf.TerraformClusterIdentities(),
		Clusters:   cinf.TerraformClusters(),
		Machines:   cinf.TerraformMachines(),
		Pools:      cinf.TerraformMachinePools(),
		Namespaces: kinf.Core().V1().Namespaces(),
		Mirrors:    mirrors.Core().V1().Secrets(),
		Jobs:       kinf.Batch().V1().Jobs(),
	}
	enqueueOwners := func(o metav1.Object) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.enqueued = append(f.enqueued, o.GetNamespace()+"/"+o.GetName())
	}
	c, err := newController(ctx, f.kube, f.captf, f.inf, source.NewReader(f.kube), f.tracker, enqueueOwners, f.recorder, f.clock, opts)
	require.NoError(t, err)
	f.c = c
	f.queue = c.queue
	t.Cleanup(f.queue.ShutDown)
	t.Cleanup(f.checkNoSecretLeak)
	return f
}

// record logs every call but list and watch, in order, and lets the object
// tracker handle it.
func (f *fixture) record(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetVerb() != "list" && a.GetVerb() != "watch" {
		f.mu.Lock()
		f.actions = append(f.actions, a.DeepCopy())
		f.mu.Unlock()
	}
	return false, nil, nil
}

// seed adds objects to the fake API server and to the informer that would
// see them (a Secret only with captf.io/mirrored=true, M9; a Job to the Job
// informer, C5).
func (f *fixture) seed(objs ...runtime.Object) {
	f.t.Helper()
	for _, o := range objs {
		var idx cache.Indexer
		switch x := o.(type) {
		case *v1alpha1.TerraformClusterIdentity:
			idx = f.inf.Identities.Informer().GetIndexer()
			require.NoError(f.t, f.captf.Tracker().Add(o.DeepCopyObject()))
		case *corev1.Namespace:
			idx = f.inf.Namespaces.Informer().GetIndexer()
			require.NoError(f.t, f.kube.Tracker().Add(o.DeepCopyObject()))
		case *corev1.Secret:
			if x.Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue {
				idx = f.inf.Mirrors.Informer().GetIndexer()
				// B2: a mirror counts only with a live user; seed the
				// clusters its owner references name, using its identity.
				for _, ref := range x.OwnerReferences {
					f.seedUser(x.Namespace, ref, x.Annotations[v1alpha1.AnnotationIdentity])
				}
			}
			require.NoError(f.t, f.kube.Tracker().Add(o.DeepCopyObject()))
		case *batchv1.Job:
			idx = f.inf.Jobs.Informer().GetIndexer()
			if ref := metav1.GetControllerOf(x); ref != nil {
				f.seedUser(x.Namespace, *ref, x.Annotations[v1alpha1.AnnotationIdentity])
			}
			require.NoError(f.t, f.kube.Tracker().Add(o.DeepCopyObject()))
		case *v1alpha1.TerraformCluster:
			idx = f.inf.Clusters.Informer().GetIndexer()
			require.NoError(f.t, f.captf.Tracker().Add(o.DeepCopyObject()))
		default:
			f.t.Fatalf("cannot seed %T", o)
		}
		if idx != nil {
			require.NoError(f.t, idx.Add(o.DeepCopyObject()))
		}
	}
}

// seedUser adds the TerraformCluster that ref names in namespace, using
// identity, unless the cache holds it already (SPEC B2: the identity counts
// only mirrors and Jobs of live users). Other kinds are not seeded: a test
// that needs them seeds them itself.
func (f *fixture) seedUser(namespace string, ref metav1.OwnerReference, identity string) {
	f.t.Helper()
	if ref.Kind != v1alpha1.KindTerraformCluster || identity == "" {
		return
	}
	if _, ok, _ := f.inf.Clusters.Informer().GetIndexer().GetByKey(namespace + "/" + ref.Name); ok {
		return
	}
	f.seed(&v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ref.Name, UID: ref.UID},
		Spec:       v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: identity}},
	})
}

// catchUp makes the identity and mirror informers hold what the fake API
// server holds, and forgets the actions and enqueued owners so far.
func (f *fixture) catchUp() {
	f.t.Helper()
	ctx := context.Background()
	il, err := f.captf.InfrastructureV1alpha1().TerraformClusterIdentities().List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	var items []interface{}
	for i := range il.Items {
		items = append(items, &il.Items[i])
	}
	require.NoError(f.t, f.inf.Identities.Informer().GetIndexer().Replace(items, ""))
	sl, err := f.kube.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	require.NoError(f.t, err)
	items = nil
	for i := range sl.Items {
		if sl.Items[i].Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue {
			items = append(items, &sl.Items[i])
		}
	}
	require.NoError(f.t, f.inf.Mirrors.Informer().GetIndexer().Replace(items, ""))
	f.mu.Lock()
	f.actions = nil
	f.enqueued = nil
	f.mu.Unlock()
}

func (f *fixture) sync(name string) error {
	return f.c.sync(f.ctx, cache.ObjectName{Name: name})
}

func (f *fixture) allActions() []k8stesting.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]k8stesting.Action(nil), f.actions...)
}

func describe(a k8stesting.Action) string {
	s := a.GetVerb() + " " + a.GetResource().Resource
	if a.GetSubresource() != "" {
		s += "/" + a.GetSubresource()
	}
	name := ""
	switch x := a.(type) {
	case k8stesting.GetAction:
		name = x.GetName()
	case k8stesting.DeleteAction:
		name = x.GetName()
	case k8stesting.UpdateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			name = m.GetName()
		}
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(x.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	if a.GetNamespace() != "" {
		return s + " " + a.GetNamespace() + "/" + name
	}
	return s + " " + name
}

// writes returns the calls that are not reads, described.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.allActions() {
		if a.GetVerb() != "get" {
			out = append(out, describe(a))
		}
	}
	return out
}

func (f *fixture) reads() []string {
	var out []string
	for _, a := range f.allActions() {
		if a.GetVerb() == "get" {
			out = append(out, describe(a))
		}
	}
	return out
}

// statusWrites returns the identity statuses written through /status.
func (f *fixture) statusWrites() []*v1alpha1.TerraformClusterIdentityStatus {
	var out []*v1alpha1.TerraformClusterIdentityStatus
	for _, a := range f.allActions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && a.GetSubresource() == "status" {
			if id, ok := u.GetObject().(*v1alpha1.TerraformClusterIdentity); ok {
				out = append(out, &id.Status)
			}
		}
	}
	return out
}

func (f *fixture) lastStatus() *v1alpha1.TerraformClusterIdentityStatus {
	f.t.Helper()
	ws := f.statusWrites()
	require.NotEmpty(f.t, ws, "no status was written; actions: %v", f.writes())
	return ws[len(ws)-1]
}

func (f *fixture) enqueuedOwners() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.enqueued...)
}

// popEvents returns the events recorded since the last call.
func (f *fixture) popEvents() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
			f.mu.Lock()
			f.events = append(f.events, e)
			f.mu.Unlock()
		default:
			return out
		}
	}
}

var eventReasons = controllertest.EventReasons

func requireCondition(t *testing.T, st *v1alpha1.TerraformClusterIdentityStatus, ct v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, string(ct))
	require.NotNil(t, c, "condition %s missing in %+v", ct, st.Conditions)
	require.Equal(t, status, c.Status, "%s: %s", ct, c.Message)
	require.Equal(t, string(reason), c.Reason, "%s: %s", ct, c.Message)
	return *c
}

// deletes returns the Secret deletes, with their UID precondition.
func (f *fixture) deletes() map[string]types.UID {
	out := map[string]types.UID{}
	for _, a := range f.allActions() {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok || a.GetResource().Resource != "secrets" {
			continue
		}
		var uid types.UID
		if p := d.DeleteOptions.Preconditions; p != nil && p.UID != nil {
			uid = *p.UID
		}
		out[d.Namespace+"/"+d.Name] = uid
	}
	return out
}

// checkNoSecretLeak is X1: no credential value, and no hash of one, in any
// event, condition message or log line.
func (f *fixture) checkNoSecretLeak() {
	f.popEvents()
	f.mu.Lock()
	texts := append([]string(nil), f.events...)
	f.mu.Unlock()
	for _, st := range f.statusWrites() {
		for _, c := range st.Conditions {
			texts = append(texts, c.Message)
		}
	}
	texts = append(texts, f.logs.String())
	controllertest.RequireNoSecrets(f.t, f.secrets, texts)
}

// storedSecret returns the Secret the fake API server holds, nil when none.
func (f *fixture) storedSecret(ns, name string) *corev1.Secret {
	s, err := f.kube.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return s
}

// waitQueued waits until the queue holds key (timed requeues fire on the
// fake clock's goroutine), then takes it out.
func (f *fixture) waitQueued(key cache.ObjectName) {
	f.t.Helper()
	controllertest.RequireQueued(f.t, f.queue, key)
}
