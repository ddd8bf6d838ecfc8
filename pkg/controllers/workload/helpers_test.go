package workload

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	capiv1 "github.com/captf/captf/pkg/apis/capi/v1beta2"
	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/capi"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/source"
	"github.com/captf/captf/pkg/credentials"
)

const (
	testNS       = "team-a"
	otherNS      = "team-b"
	sourceNS     = controllertest.SourceNS
	sourceName   = controllertest.SourceName
	identityName = "prod"
	moduleImage  = "registry.example.com/modules/network:v1"
	runnerImage  = "registry.example.com/captf:v0"
	syncPeriod   = 10 * time.Minute
	// secretValue is a recognisable credential: X1 says it never reaches
	// an event, a condition message or a log line. Every fixture scans for
	// it (and for the source hash) when its test ends.
	secretValue = controllertest.SecretValue
	// deadline bounds polling; reaching it is a failure, never an assertion.
	deadline = 10 * time.Second
)

var (
	mirrorName = credentials.MirrorName(identityName)
	epoch      = controllertest.Epoch
)

var (
	sourceData  = controllertest.SourceData
	newSource   = controllertest.NewSource
	newIdentity = controllertest.NewIdentity
)

// ---------------------------------------------------------------------------
// Objects.

func allowList(ns ...string) *v1alpha1.AllowedNamespaces {
	return &v1alpha1.AllowedNamespaces{List: ns}
}

func newNamespace(name string, lbls map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
}

// standalone is the annotation every test object carries unless a test of
// the Cluster API contract removes it (withCAPI): it opts out of K2-K5.
func standalone() map[string]string {
	return map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}
}

// withCAPI removes the standalone annotation: the object needs Cluster API
// owners (K2).
func withCAPI(o metav1.Object) {
	a := o.GetAnnotations()
	delete(a, v1alpha1.AnnotationStandalone)
	o.SetAnnotations(a)
}

func idRef(name string) *v1alpha1.IdentityReference { return &v1alpha1.IdentityReference{Name: name} }

// newCluster's mods are func(*v1alpha1.TerraformCluster) or func(metav1.Object).
func newCluster(name string, mods ...any) *v1alpha1.TerraformCluster {
	c := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-cluster-" + name), Generation: 1, ResourceVersion: "10",
			Annotations: standalone()},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: idRef(identityName),
			Source:      v1alpha1.SourceSpec{Image: moduleImage},
		},
	}
	applyMods(c, mods)
	return c
}

// newMachine's mods are func(*v1alpha1.TerraformMachine) or func(metav1.Object).
func newMachine(name string, mods ...any) *v1alpha1.TerraformMachine {
	m := &v1alpha1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-machine-" + name), Generation: 1, ResourceVersion: "10",
			Annotations: standalone()},
		Spec: v1alpha1.TerraformMachineSpec{Source: v1alpha1.SourceSpec{Image: moduleImage}},
	}
	applyMods(m, mods)
	return m
}

// newPool's mods are func(*v1alpha1.TerraformMachinePool) or func(metav1.Object).
func newPool(name string, mods ...any) *v1alpha1.TerraformMachinePool {
	p := &v1alpha1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID("uid-pool-" + name), Generation: 1, ResourceVersion: "10",
			Annotations: standalone()},
		Spec: v1alpha1.TerraformMachinePoolSpec{Source: v1alpha1.SourceSpec{Image: moduleImage}},
	}
	applyMods(p, mods)
	return p
}

func applyMods[T metav1.Object](o T, mods []any) {
	for _, m := range mods {
		switch fn := m.(type) {
		case func(T):
			fn(o)
		case func(metav1.Object):
			fn(o)
		default:
			panic(fmt.Sprintf("bad mod %T", m))
		}
	}
}

// deleting marks o as being deleted with the destroy finalizer.
func deleting(o metav1.Object) {
	ts := metav1.NewTime(epoch.Add(-time.Minute))
	o.SetDeletionTimestamp(&ts)
	o.SetFinalizers([]string{v1alpha1.FinalizerDestroy})
}

func withFinalizer(o metav1.Object) { o.SetFinalizers([]string{v1alpha1.FinalizerDestroy}) }

// refOf is the owner reference kind's object o puts on a mirror (M5).
func refOf(kind string, o metav1.Object) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: kind, Name: o.GetName(), UID: o.GetUID()}
}

// newMirror is the mirror of identity in namespace as the manager writes it.
func newMirror(identity, namespace string, data map[string][]byte, owners ...metav1.OwnerReference) *corev1.Secret {
	m := credentials.DesiredMirror(identity, namespace, data)
	m.UID = types.UID("uid-mirror-" + namespace + "-" + identity)
	m.ResourceVersion = "42"
	m.OwnerReferences = owners
	return m
}

// jobOutcome is how a seeded Job ended, as the Job controller writes it.
type jobOutcome int

const (
	jobRunning jobOutcome = iota
	jobSucceeded
	jobFailed
	jobDeadlineExceeded
)

// newJob is the Job the manager builds for kind's object o, with the
// conditions the Job controller sets for outcome (J7).
func newJob(kind string, o metav1.Object, action v1alpha1.JobAction, generation int64, outcome jobOutcome) *batchv1.Job {
	j := jobs.Build(jobs.Params{
		OwnerAPIVersion: v1alpha1.SchemeGroupVersion.String(),
		OwnerKind:       kind,
		OwnerName:       o.GetName(),
		OwnerUID:        o.GetUID(),
		Namespace:       o.GetNamespace(),
		Generation:      generation,
		Action:          action,
		ModuleImage:     moduleImage,
		RunnerImage:     runnerImage,
		MirrorName:      mirrorName,
	})
	j.UID = types.UID("uid-job-" + j.Name)
	j.CreationTimestamp = metav1.NewTime(epoch.Add(-time.Hour + time.Duration(generation)*time.Minute))
	cond := func(t batchv1.JobConditionType, reason, msg string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg}
	}
	switch outcome {
	case jobSucceeded:
		j.Status.Conditions = []batchv1.JobCondition{
			cond(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
			cond(batchv1.JobComplete, batchv1.JobReasonCompletionsReached, "Reached expected number of succeeded pods"),
		}
	case jobFailed:
		j.Status.Conditions = []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
			cond(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit"),
		}
	case jobDeadlineExceeded:
		j.Status.Conditions = []batchv1.JobCondition{
			cond(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"),
			cond(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline"),
		}
	}
	return j
}

// ---------------------------------------------------------------------------
// The fixture.

// action is one client call, in the order the two fake clientsets saw them.
type action struct {
	verb, resource, subresource, namespace, name string
	obj                                          runtime.Object
	raw                                          k8stesting.Action
}

func (a action) String() string {
	s := a.verb + " " + a.resource
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.namespace != "" {
		return s + " " + a.namespace + "/" + a.name
	}
	return s + " " + a.name
}

type fixture struct {
	*controllertest.Env
	t    *testing.T
	inf  Informers
	c    *Controller
	meta *metadataFake

	mu      sync.Mutex
	actions []action
	// version is the last resourceVersion a Secret write was given.
	version int
	// showRuns records the run plumbing of K5/K6 too (the inputs and run
	// Secrets, the resumption of a suspended Job); tests of other rules
	// leave it out of f.actions, the tests in inputs_test.go show it.
	showRuns bool
	// unbudgeted are the GETs made through the controller's write client
	// instead of Uncached.Kube (B11): none may be.
	unbudgeted []string
}

// noteRead notes a GET through the controller's write client (B11).
func (f *fixture) noteRead(a k8stesting.Action) {
	if a.GetVerb() != "get" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unbudgeted = append(f.unbudgeted, a.GetResource().Resource+" "+a.GetNamespace()+"/"+a.(k8stesting.GetAction).GetName())
}

// throughKube is a clientset that hands every call to kube's reaction
// chain (its recorder, the tests' reactors, its tracker), after seen: the
// controller's write client, told apart from Uncached.Kube (which is kube
// itself) by seen alone.
func throughKube(kube *kubefake.Clientset, seen func(k8stesting.Action)) *kubefake.Clientset {
	c := &kubefake.Clientset{}
	c.AddReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		seen(a)
		obj, err := kube.Invokes(a, nil)
		return true, obj, err
	})
	return c
}

// runPlumbing reports whether a is a write or read of the run plumbing
// (K5, K6): an inputs or run Secret, or a Job's resumption.
func runPlumbing(a action) bool {
	switch {
	case a.resource == "secrets" && (strings.HasPrefix(a.name, jobs.InputsSecretPrefix) || strings.HasPrefix(a.name, jobs.RunSecretPrefix)):
		return true
	case a.resource == "jobs" && a.verb == "patch":
		return true
	}
	return false
}

// withConsent turns on --require-source-consent (SPEC C1).
func withConsent(o *Options) { o.RequireSourceConsent = true }

// newFixture builds the controller with the test Options, changed by mods
// (for example withConsent).
func newFixture(t *testing.T, mods ...func(*Options)) *fixture {
	t.Helper()
	return buildFixture(t, true, mods...)
}

// newHeldFixture is newFixture with the controller's queues held, as
// newController leaves them until Run (B15).
func newHeldFixture(t *testing.T) *fixture {
	t.Helper()
	return buildFixture(t, false)
}

func buildFixture(t *testing.T, open bool, mods ...func(*Options)) *fixture {
	t.Helper()
	opts := Options{SyncPeriod: syncPeriod, RunnerImage: runnerImage}
	for _, m := range mods {
		m(&opts)
	}
	env := controllertest.NewEnv(t)
	f := &fixture{Env: env, t: t}
	f.Intercept(f.record)
	f.versionSecretWrites()
	f.inf = Informers{
		Clusters:   env.Cinf.TerraformClusters(),
		Machines:   env.Cinf.TerraformMachines(),
		Pools:      env.Cinf.TerraformMachinePools(),
		Identities: env.Cinf.TerraformClusterIdentities(),
		Namespaces: env.Kinf.Core().V1().Namespaces(),
		Mirrors:    env.Mirrors.Core().V1().Secrets(),
		Jobs:       env.Managed.Batch().V1().Jobs(),
		Plans:      env.Cinf.TerraformPlans(),
		CAPI:       newCAPIInformers(t),
		CAPIServed: true,
	}
	// The informers are never started: tests seed their indexers.
	f.meta = metadataOf(f.Kube)
	uncached := Uncached{Kube: f.Kube, Metadata: f.meta}
	c, err := newController(f.Ctx, throughKube(f.Kube, f.noteRead), f.Captf, uncached, f.inf, source.NewReader(f.Kube), f.Tracker, f.Recorder, f.Clock, opts)
	require.NoError(t, err)
	f.c = c
	t.Cleanup(func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		require.Empty(t, f.unbudgeted, "B11: every uncached read goes through Uncached.Kube, whose responses have a size budget")
	})
	for _, q := range c.queues {
		if open {
			q.Open() // as Run does (tests add keys without it)
		}
		t.Cleanup(q.ShutDown)
	}
	t.Cleanup(f.checkNoSecretLeak)
	return f
}

// record is a reactor on both fakes that logs every call but list and
// watch, in order, and lets the object tracker handle it.
func (f *fixture) record(a k8stesting.Action) (bool, runtime.Object, error) {
	if a.GetVerb() == "list" || a.GetVerb() == "watch" {
		return false, nil, nil
	}
	rec := action{verb: a.GetVerb(), resource: a.GetResource().Resource, subresource: a.GetSubresource(), namespace: a.GetNamespace(), raw: a}
	switch x := a.(type) {
	case k8stesting.CreateAction:
		rec.obj = x.GetObject().DeepCopyObject()
	case k8stesting.UpdateAction:
		rec.obj = x.GetObject().DeepCopyObject()
	case k8stesting.PatchAction:
		if x.GetResource().Group == v1alpha1.SchemeGroupVersion.Group {
			rec.obj = f.patched(x) // a workload object (mirrors are patched too, P3)
		}
	}
	switch x := a.(type) {
	case k8stesting.GetAction:
		rec.name = x.GetName()
	case k8stesting.DeleteAction:
		rec.name = x.GetName()
	case k8stesting.PatchAction:
		rec.name = x.GetName()
	default:
		if m, err := meta.Accessor(rec.obj); err == nil {
			rec.name = m.GetName()
		}
	}
	if pa, ok := a.(k8stesting.PatchAction); ok {
		rec.name = pa.GetName()
	}
	f.mu.Lock()
	if f.showRuns || !runPlumbing(rec) {
		f.actions = append(f.actions, rec)
	}
	f.mu.Unlock()
	return false, nil, nil
}

// patched returns the object a JSON merge patch of a workload object makes
// of the stored one (nil when there is none), so tests read a patch's
// result as they read an update's object.
func (f *fixture) patched(a k8stesting.PatchAction) runtime.Object {
	f.t.Helper()
	require.Equal(f.t, types.MergePatchType, a.GetPatchType(), "workload objects are written with merge patches (B12)")
	stored, err := f.Captf.Tracker().Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if err != nil {
		return nil
	}
	raw, err := json.Marshal(stored)
	require.NoError(f.t, err)
	var doc, patch map[string]interface{}
	require.NoError(f.t, json.Unmarshal(raw, &doc))
	require.NoError(f.t, json.Unmarshal(a.GetPatch(), &patch))
	merged, err := json.Marshal(mergePatch(doc, patch))
	require.NoError(f.t, err)
	out := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	require.NoError(f.t, json.Unmarshal(merged, out))
	return out
}

// mergePatch applies an RFC 7386 JSON merge patch to doc.
func mergePatch(doc, patch map[string]interface{}) map[string]interface{} {
	if doc == nil {
		doc = map[string]interface{}{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]interface{}:
			dv, _ := doc[k].(map[string]interface{})
			doc[k] = mergePatch(dv, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}

// seed adds objects to the fake API server and to the informer that would
// see them: a Secret only when it carries captf.io/mirrored=true (M9), a
// source Secret only to the API server.
func (f *fixture) seed(objs ...runtime.Object) {
	f.t.Helper()
	f.Seed(f.t, objs...)
}

// newCAPIInformers builds Cluster API informers over a fake dynamic
// client; like the others they are never started: seedCAPI fills them.
func newCAPIInformers(t *testing.T) *capi.Informers {
	t.Helper()
	lists := map[schema.GroupVersionResource]string{
		capiv1.ClustersResource: "ClusterList", capiv1.MachinesResource: "MachineList", capiv1.MachinePoolsResource: "MachinePoolList",
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), lists)
	inf, err := capi.NewInformers(client, metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), capi.Served{Clusters: true, Machines: true, MachinePools: true}, 0)
	require.NoError(t, err)
	return inf
}

// seedCAPI adds Cluster API objects to their informers' caches.
func (f *fixture) seedCAPI(objs ...runtime.Object) {
	f.t.Helper()
	for _, o := range objs {
		var inf cache.SharedIndexInformer
		switch o.(type) {
		case *capiv1.Cluster:
			inf = f.inf.CAPI.Clusters
		case *capiv1.Machine:
			inf = f.inf.CAPI.Machines
		case *capiv1.MachinePool:
			inf = f.inf.CAPI.MachinePools
		}
		require.NoError(f.t, inf.GetIndexer().Add(o))
	}
}

// seedHidden adds a Secret to the API server only: a foreign Secret the
// label-selected informer cannot see (M7, M9).
func (f *fixture) seedHidden(s *corev1.Secret) {
	f.t.Helper()
	require.NoError(f.t, f.Kube.Tracker().Add(s.DeepCopy()))
}

// catchUp makes the informers hold what the fake API server holds, as if
// their watches had delivered every event, and forgets the actions so far.
func (f *fixture) catchUp() {
	f.t.Helper()
	f.CatchUp(f.t)
	f.deliverMirrorEvents()
	f.deliverWorkloadEvents()
	f.resetActions()
}

// deliverMirrorEvents is what the mirror informer's handlers would do with
// the events catchUp stands for: each version the cache now shows is seen
// (an echo, or the end of a newer version the controller knew), and a
// mirror gone from it is forgotten.
func (f *fixture) deliverMirrorEvents() {
	e := f.c.echoes
	e.mu.Lock()
	keys := map[cache.ObjectName]bool{}
	for k := range e.written {
		keys[k] = true
	}
	for k := range e.known {
		keys[k] = true
	}
	e.mu.Unlock()
	for k := range keys {
		s, err := f.inf.Mirrors.Lister().Secrets(k.Namespace).Get(k.Name)
		if err != nil {
			e.forget(k)
			continue
		}
		e.isEcho(k, s.ResourceVersion)
	}
}

// deliverWorkloadEvents is what the workload kinds' informer handlers
// would do with the events catchUp stands for: each status write the cache
// now shows ends its record (issue 25).
func (f *fixture) deliverWorkloadEvents() {
	h := f.c.workloadHandler()
	for _, k := range f.c.kinds {
		for _, o := range k.informer.GetStore().List() {
			h.OnUpdate(o, o) // nothing but the status changed: no enqueue
		}
	}
}

// prependKubeReactor adds a reactor to the kube fake in front of the object
// tracker, behind the recorder (which stays first so it sees every call).
func (f *fixture) prependKubeReactor(verb, resource string, fn k8stesting.ReactionFunc) {
	chain := f.Kube.ReactionChain
	f.Kube.ReactionChain = append([]k8stesting.Reactor{chain[0], &k8stesting.SimpleReactor{Verb: verb, Resource: resource, Reaction: fn}}, chain[1:]...)
}

// versionSecretWrites makes Secret creates and patches behave as on the
// API server, which the object tracker does not: every write gets a new
// resourceVersion, and a patch carrying metadata.resourceVersion is
// refused with a Conflict unless it names the stored version (SPEC P3).
func (f *fixture) versionSecretWrites() {
	gvr := corev1.SchemeGroupVersion.WithResource("secrets")
	next := func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.version++
		return fmt.Sprint(1000 + f.version)
	}
	f.prependKubeReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		s := a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).DeepCopy()
		s.ResourceVersion = next()
		if err := f.Kube.Tracker().Create(gvr, s, a.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, s.DeepCopy(), nil
	})
	f.prependKubeReactor("patch", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		p := a.(k8stesting.PatchAction)
		obj, err := f.Kube.Tracker().Get(gvr, p.GetNamespace(), p.GetName())
		if err != nil {
			return true, nil, err
		}
		stored := obj.(*corev1.Secret)
		var pre struct {
			Metadata struct {
				ResourceVersion *string `json:"resourceVersion"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(p.GetPatch(), &pre); err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if rv := pre.Metadata.ResourceVersion; rv != nil && *rv != stored.ResourceVersion {
			return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), p.GetName(),
				fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
		}
		if p.GetPatchType() != types.StrategicMergePatchType {
			return false, nil, nil
		}
		old, err := json.Marshal(stored)
		if err != nil {
			return true, nil, err
		}
		merged, err := strategicpatch.StrategicMergePatch(old, p.GetPatch(), &corev1.Secret{})
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		out := &corev1.Secret{}
		if err := json.Unmarshal(merged, out); err != nil {
			return true, nil, err
		}
		if out.Type != stored.Type {
			return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Secret").GroupKind(), p.GetName(), nil)
		}
		out.ResourceVersion = next()
		if err := f.Kube.Tracker().Update(gvr, out, p.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, out.DeepCopy(), nil
	})
}

// enforceDeletePreconditions makes Secret deletes honour UID and
// resourceVersion preconditions as the API server does (Conflict).
func (f *fixture) enforceDeletePreconditions() {
	f.prependKubeReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteActionImpl)
		pre := d.DeleteOptions.Preconditions
		if pre == nil {
			return false, nil, nil
		}
		obj, err := f.Kube.Tracker().Get(corev1.SchemeGroupVersion.WithResource("secrets"), d.Namespace, d.Name)
		if err != nil {
			return false, nil, nil
		}
		s := obj.(*corev1.Secret)
		if (pre.UID != nil && *pre.UID != s.UID) || (pre.ResourceVersion != nil && *pre.ResourceVersion != s.ResourceVersion) {
			return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), d.Name, fmt.Errorf("precondition failed"))
		}
		return false, nil, nil
	})
}

func (f *fixture) resetActions() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.actions = nil
}

// allActions returns the calls so far, in order.
func (f *fixture) allActions() []action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]action(nil), f.actions...)
}

// writes returns the calls so far that are not reads, as strings.
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.allActions() {
		if a.verb != "get" {
			out = append(out, a.String())
		}
	}
	return out
}

// writeActions returns the writes as actions.
func (f *fixture) writeActions() []action {
	var out []action
	for _, a := range f.allActions() {
		if a.verb != "get" {
			out = append(out, a)
		}
	}
	return out
}

// find returns the first action matching verb, resource and subresource.
func (f *fixture) find(verb, resource, subresource string) (action, bool) {
	for _, a := range f.allActions() {
		if a.verb == verb && a.resource == resource && a.subresource == subresource {
			return a, true
		}
	}
	return action{}, false
}

// eventReasons returns "Type Reason" of events.
var eventReasons = controllertest.EventReasons

// statusWrites returns the statuses written through /status, in order.
func (f *fixture) statusWrites() []*v1alpha1.WorkloadStatus {
	var out []*v1alpha1.WorkloadStatus
	for _, a := range f.allActions() {
		if a.verb != "update" || a.subresource != "status" {
			continue
		}
		switch o := a.obj.(type) {
		case *v1alpha1.TerraformCluster:
			out = append(out, &o.Status)
		case *v1alpha1.TerraformMachine:
			out = append(out, &o.Status)
		case *v1alpha1.TerraformMachinePool:
			out = append(out, &o.Status)
		}
	}
	return out
}

// lastStatus returns the last status written; the test fails when none was.
func (f *fixture) lastStatus() *v1alpha1.WorkloadStatus {
	f.t.Helper()
	ws := f.statusWrites()
	require.NotEmpty(f.t, ws, "no status was written; actions: %v", f.allActions())
	return ws[len(ws)-1]
}

// sync runs one reconcile of kind's object name in testNS.
func (f *fixture) sync(kind, name string) error {
	return f.c.sync(f.Ctx, f.c.kinds[kind], cache.ObjectName{Namespace: testNS, Name: name})
}

// requireCondition checks a condition's status and reason and returns it.
func requireCondition(t *testing.T, st *v1alpha1.WorkloadStatus, ct v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(st.Conditions, string(ct))
	require.NotNil(t, c, "condition %s missing in %+v", ct, st.Conditions)
	require.Equal(t, status, c.Status, "%s: %s", ct, c.Message)
	require.Equal(t, string(reason), c.Reason, "%s: %s", ct, c.Message)
	return *c
}

// createdSecret returns the Secret of the first create of secrets.
func (f *fixture) createdSecret() *corev1.Secret {
	f.t.Helper()
	a, ok := f.find("create", "secrets", "")
	require.True(f.t, ok, "no secret was created; actions: %v", f.allActions())
	return a.obj.(*corev1.Secret)
}

// patchedSecret returns the Secret the first patch of secrets wrote, as the
// fake API server now holds it, and the patch; ok is false when no Secret
// was patched.
func (f *fixture) patchedSecret() (_ *corev1.Secret, patch string, ok bool) {
	f.t.Helper()
	a, ok := f.find("patch", "secrets", "")
	if !ok {
		return nil, "", false
	}
	s := f.storedSecret(a.namespace, a.name)
	require.NotNil(f.t, s, "patched %s is gone", a)
	return s, string(a.raw.(k8stesting.PatchAction).GetPatch()), true
}

// createdJobs returns the Jobs created.
func (f *fixture) createdJobs() []*batchv1.Job {
	var out []*batchv1.Job
	for _, a := range f.allActions() {
		if a.verb == "create" && a.resource == "jobs" {
			out = append(out, a.obj.(*batchv1.Job))
		}
	}
	return out
}

// createdJobNames returns the names of the Jobs created.
func (f *fixture) createdJobNames() []string {
	var out []string
	for _, j := range f.createdJobs() {
		out = append(out, j.Name)
	}
	return out
}

// requireNoMirrorWrite checks that no Secret was created, updated or deleted.
func (f *fixture) requireNoMirrorWrite() {
	f.t.Helper()
	for _, a := range f.allActions() {
		if a.resource == "secrets" && a.verb != "get" {
			f.t.Fatalf("unexpected Secret write %s; actions: %v", a, f.allActions())
		}
	}
}

// requireSourceReadUncached checks the source Secret was read with a GET
// through the client (M6): nothing seeds it into an informer.
func (f *fixture) requireSourceReadUncached() {
	f.t.Helper()
	require.Contains(f.t, f.readsOf("secrets"), "get secrets "+sourceNS+"/"+sourceName)
	_, err := f.inf.Mirrors.Lister().Secrets(sourceNS).Get(sourceName)
	require.Error(f.t, err, "the source Secret must not be in any informer")
}

func (f *fixture) readsOf(resource string) []string {
	var out []string
	for _, a := range f.allActions() {
		if a.verb == "get" && a.resource == resource {
			out = append(out, a.String())
		}
	}
	return out
}

// checkNoSecretLeak is X1: no credential value, no hash of one, and no
// sensitive Terraform output (T4; tests add theirs to f.Secrets) in any
// event, condition message, log line, or anywhere in a status written,
// but for the source hash T7 records by name in lastApply and lastDestroy
// (the Job's captf.io/source-hash annotation, C5).
func (f *fixture) checkNoSecretLeak() {
	var conditions [][]metav1.Condition
	var statuses []string
	for _, st := range f.statusWrites() {
		conditions = append(conditions, st.Conditions)
		st = st.DeepCopy()
		for _, r := range []*v1alpha1.RunRecord{st.LastApply, st.LastDestroy} {
			if r != nil {
				r.SourceHash = ""
			}
		}
		b, err := json.Marshal(st)
		require.NoError(f.t, err)
		statuses = append(statuses, string(b))
	}
	f.RequireNoLeak(f.t, conditions)
	controllertest.RequireNoSecrets(f.t, f.Secrets, statuses)
}

// requireDeletePreconditions checks the Delete of a Secret carried the
// given UID and resourceVersion preconditions ("" rv: no rv precondition).
func requireDeletePreconditions(t *testing.T, a action, uid types.UID, rv string) {
	t.Helper()
	del, ok := a.raw.(k8stesting.DeleteActionImpl)
	require.True(t, ok, "%T", a.raw)
	pre := del.DeleteOptions.Preconditions
	require.NotNil(t, pre, "delete %s has no preconditions", a)
	require.NotNil(t, pre.UID)
	require.Equal(t, uid, *pre.UID)
	if rv == "" {
		require.Nil(t, pre.ResourceVersion)
		return
	}
	require.NotNil(t, pre.ResourceVersion)
	require.Equal(t, rv, *pre.ResourceVersion)
}

// stored returns the Secret the fake API server holds, nil when none.
func (f *fixture) storedSecret(ns, name string) *corev1.Secret {
	return f.Env.StoredSecret(ns, name)
}

// waitQueued waits until kind's queue holds key (timed requeues fire on
// the fake clock's goroutine), then takes it out.
func (f *fixture) waitQueued(kind string, key cache.ObjectName) {
	f.t.Helper()
	controllertest.RequireQueued(f.t, f.c.queues[kind], key)
}
