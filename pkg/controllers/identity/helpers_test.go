package identity

import (
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
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/freshness"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/loop"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/credentials"
)

const (
	identityName = "prod"
	sourceNS     = controllertest.SourceNS
	sourceName   = controllertest.SourceName
	resync       = 5 * time.Minute
	// secretValue is a recognisable credential: X1 says it never reaches
	// an event, a condition message or a log line. Every fixture scans for
	// it (and for the source hash) when its test ends.
	secretValue = controllertest.SecretValue
	// deadline bounds polling; reaching it is a failure, never an assertion.
	deadline = 10 * time.Second
)

var (
	sourceData  = controllertest.SourceData
	newSource   = controllertest.NewSource
	newIdentity = controllertest.NewIdentity
)

var (
	mirrorName = credentials.MirrorName(identityName)
	epoch      = controllertest.Epoch
	identityGR = v1alpha1.SchemeGroupVersion.WithResource("terraformclusteridentities")
	secretsGR  = corev1.SchemeGroupVersion.WithResource("secrets")
)

func allowAll() *v1alpha1.AllowedNamespaces {
	return &v1alpha1.AllowedNamespaces{Selector: &metav1.LabelSelector{}}
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
	*controllertest.Env
	t     *testing.T
	inf   Informers
	queue loop.Queue
	c     *Controller

	reader *source.Reader

	mu       sync.Mutex
	actions  []k8stesting.Action
	enqueued []string
	// batches are the S4 enqueues in order: each call's stamp and owners.
	batches []ownerBatch
	// sourceGets are stamps taken as each GET of the source reaches the
	// fake API server: each read began before its own.
	sourceGets []freshness.Stamp
}

// ownerBatch is one call of enqueueOwners (S4).
type ownerBatch struct {
	at      freshness.Stamp
	mirrors []string
}

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	env := controllertest.NewEnv(t)
	f := &fixture{Env: env, t: t}
	f.Intercept(f.record)
	f.inf = Informers{
		Identities: env.Cinf.TerraformClusterIdentities(),
		Clusters:   env.Cinf.TerraformClusters(),
		Machines:   env.Cinf.TerraformMachines(),
		Pools:      env.Cinf.TerraformMachinePools(),
		Namespaces: env.Kinf.Core().V1().Namespaces(),
		Mirrors:    env.Mirrors.Core().V1().Secrets(),
		Jobs:       env.Managed.Batch().V1().Jobs(),
	}
	enqueueOwners := func(at freshness.Stamp, ms ...metav1.Object) {
		f.mu.Lock()
		defer f.mu.Unlock()
		b := ownerBatch{at: at}
		for _, o := range ms {
			b.mirrors = append(b.mirrors, o.GetNamespace()+"/"+o.GetName())
		}
		f.enqueued = append(f.enqueued, b.mirrors...)
		f.batches = append(f.batches, b)
	}
	f.reader = source.NewReader(f.Kube)
	c, err := newController(f.Ctx, f.Kube, f.Captf, f.inf, f.reader, f.Tracker, enqueueOwners, f.Recorder, f.Clock, opts)
	require.NoError(t, err)
	f.c = c
	f.queue = c.queue
	f.queue.Open() // as Run does (tests add keys without it)
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
		if g, ok := a.(k8stesting.GetAction); ok && a.GetResource().Resource == "secrets" &&
			g.GetNamespace() == sourceNS && g.GetName() == sourceName {
			f.sourceGets = append(f.sourceGets, freshness.Now())
		}
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
		switch x := o.(type) {
		case *corev1.Secret:
			// B2: a mirror counts only with a live user; seed the clusters
			// its owner references name, using its identity.
			if x.Labels[v1alpha1.LabelMirrored] == v1alpha1.LabelTrue {
				for _, ref := range x.OwnerReferences {
					f.seedUser(x.Namespace, ref, x.Annotations[v1alpha1.AnnotationIdentity])
				}
			}
		case *batchv1.Job:
			if ref := metav1.GetControllerOf(x); ref != nil {
				f.seedUser(x.Namespace, *ref, x.Annotations[v1alpha1.AnnotationIdentity])
			}
		}
		f.Seed(f.t, o)
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
	f.CatchUp(f.t)
	f.resetActions()
}

func (f *fixture) sync(name string) error {
	return f.c.sync(f.Ctx, cache.ObjectName{Name: name})
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
	var conditions [][]metav1.Condition
	for _, st := range f.statusWrites() {
		conditions = append(conditions, st.Conditions)
	}
	f.RequireNoLeak(f.t, conditions)
}

// storedSecret returns the Secret the fake API server holds, nil when none.
func (f *fixture) storedSecret(ns, name string) *corev1.Secret {
	return f.Env.StoredSecret(ns, name)
}

// waitQueued waits until the queue holds key (timed requeues fire on the
// fake clock's goroutine), then takes it out.
func (f *fixture) waitQueued(key cache.ObjectName) {
	f.t.Helper()
	controllertest.RequireQueued(f.t, f.queue, key)
}

// resetActions forgets the actions and enqueued owners recorded so far.
func (f *fixture) resetActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
	f.enqueued = nil
	f.batches = nil
	f.sourceGets = nil
}

func (f *fixture) ownerBatches() []ownerBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ownerBatch(nil), f.batches...)
}

func (f *fixture) sourceGetStamps() []freshness.Stamp {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]freshness.Stamp(nil), f.sourceGets...)
}
