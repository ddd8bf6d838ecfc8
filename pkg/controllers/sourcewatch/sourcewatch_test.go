package sourcewatch

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2/ktesting"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	captffake "github.com/captf/captf/pkg/generated/clientset/versioned/fake"
	captfinformers "github.com/captf/captf/pkg/generated/informers/externalversions"
)

// calls records the handlers' calls.
type calls struct {
	mu        sync.Mutex
	changes   []string
	baselines []string
	// events counts the events each watch handled.
	events map[types.NamespacedName]int
}

func (r *calls) get() (changes, baselines []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	changes, baselines = append([]string(nil), r.changes...), append([]string(nil), r.baselines...)
	sort.Strings(changes)
	sort.Strings(baselines)
	return changes, baselines
}

type harness struct {
	t     *testing.T
	ctx   context.Context
	kube  *fake.Clientset
	c     *Controller
	calls *calls
	store func(*v1alpha1.TerraformClusterIdentity)
	drop  func(name string)
	// watching counts the watches of each namespace's Secrets the fake
	// has registered: an event before registration is lost (the fake
	// replays nothing), so tests wait for it after the list.
	watching *watchCount
}

type watchCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (w *watchCount) get(ns string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n[ns]
}

// newHarness builds the controller with its real constructor on fake
// clientsets; identities are seeded into the informer's indexer and
// synced by calling sync, as the worker would. startedUp says whether the
// start-up set is done (watches started later report their baseline).
func newHarness(t *testing.T, startedUp bool, objs ...runtime.Object) *harness {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	kube := fake.NewClientset(objs...)
	watching := &watchCount{n: map[string]int{}}
	kube.PrependWatchReactor("secrets", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := kube.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		watching.mu.Lock()
		watching.n[action.GetNamespace()]++
		watching.mu.Unlock()
		return true, w, nil
	})
	factory := captfinformers.NewSharedInformerFactory(captffake.NewSimpleClientset(), 0)
	inf := factory.Infrastructure().V1alpha1().TerraformClusterIdentities()
	rec := &calls{events: map[types.NamespacedName]int{}}
	c, err := New(kube, inf, Handlers{
		OnChange: func(id string) {
			rec.mu.Lock()
			rec.changes = append(rec.changes, id)
			rec.mu.Unlock()
		},
		OnBaseline: func(id string) {
			rec.mu.Lock()
			rec.baselines = append(rec.baselines, id)
			rec.mu.Unlock()
		},
	})
	require.NoError(t, err)
	c.ctx, c.startedUp = ctx, startedUp
	c.handled = func(src types.NamespacedName) {
		rec.mu.Lock()
		rec.events[src]++
		rec.mu.Unlock()
	}
	t.Cleanup(func() {
		cancel()
		c.wg.Wait()
	})
	indexer := inf.Informer().GetIndexer()
	return &harness{t: t, ctx: ctx, kube: kube, c: c, calls: rec, watching: watching,
		store: func(id *v1alpha1.TerraformClusterIdentity) { require.NoError(t, indexer.Add(id)) },
		drop: func(name string) {
			require.NoError(t, indexer.Delete(&v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		},
	}
}

func identity(name, ns, secret string) *v1alpha1.TerraformClusterIdentity {
	return &v1alpha1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.TerraformClusterIdentitySpec{SecretRef: v1alpha1.SecretReference{Namespace: ns, Name: secret}}}
}

func secret(ns, name, value string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name + "-1")},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"KEY": []byte(value)}}
}

// setIdentity stores id and syncs it.
func (h *harness) setIdentity(id *v1alpha1.TerraformClusterIdentity) {
	h.store(id)
	h.c.sync(h.ctx, id.Name)
}

func (h *harness) deleteIdentity(name string) {
	h.drop(name)
	h.c.sync(h.ctx, name)
}

// waitSynced waits until the watch of ns/name has its initial list.
func (h *harness) waitSynced(ns, name string) {
	h.t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	h.eventually("the watch of "+key.String()+" listed", func() bool {
		h.c.mu.Lock()
		w := h.c.watches[key]
		h.c.mu.Unlock()
		return w != nil && w.synced != nil && w.synced() && h.watching.get(ns) > 0
	})
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	err := wait.PollUntilContextTimeout(h.ctx, 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		ch, bl := h.calls.get()
		h.t.Fatalf("waiting for %s: %v (changes %v, baselines %v)", what, err, ch, bl)
	}
}

// waitChanges waits until OnChange was called n times and returns them.
func (h *harness) waitChanges(n int) []string {
	h.t.Helper()
	h.eventually(fmt.Sprintf("%d OnChange calls", n), func() bool {
		ch, _ := h.calls.get()
		return len(ch) >= n
	})
	ch, _ := h.calls.get()
	return ch
}

// waitEvents waits until the watch of ns/name has handled n events (its
// initial list included), so that what they enqueue has been recorded.
func (h *harness) waitEvents(ns, name string, n int) {
	h.t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	h.eventually(fmt.Sprintf("%d events of %s", n, key), func() bool {
		h.calls.mu.Lock()
		defer h.calls.mu.Unlock()
		return h.calls.events[key] >= n
	})
}

func (h *harness) update(s *corev1.Secret) {
	h.t.Helper()
	_, err := h.kube.CoreV1().Secrets(s.Namespace).Update(h.ctx, s, metav1.UpdateOptions{})
	require.NoError(h.t, err)
}

func (h *harness) get(ns, name string) *corev1.Secret {
	h.t.Helper()
	s, err := h.kube.CoreV1().Secrets(ns).Get(h.ctx, name, metav1.GetOptions{})
	require.NoError(h.t, err)
	return s
}

// value reads an unlabelled metric the way /metrics exposes it (0 when
// absent).
func value(t *testing.T, name string) float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			switch f.GetType() {
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func gauge(t *testing.T) float64 { return value(t, "captf_source_watches") }

// P2: identities sharing a source share one watch (reference-counted); it
// stops with the last identity naming the source.
func TestWatchesFollowIdentities(t *testing.T) {
	h := newHarness(t, true, secret("creds", "a", "1"), secret("creds", "b", "1"))
	a := types.NamespacedName{Namespace: "creds", Name: "a"}
	b := types.NamespacedName{Namespace: "creds", Name: "b"}

	h.setIdentity(identity("one", "creds", "a"))
	h.setIdentity(identity("two", "creds", "a"))
	require.Equal(t, map[types.NamespacedName]int{a: 2}, h.c.Sources(), "two identities on one source: one watch")
	require.Equal(t, 1.0, gauge(t))

	h.setIdentity(identity("two", "creds", "b")) // secretRef changed
	require.Equal(t, map[types.NamespacedName]int{a: 1, b: 1}, h.c.Sources())
	require.Equal(t, 2.0, gauge(t))

	h.deleteIdentity("one")
	require.Equal(t, map[types.NamespacedName]int{b: 1}, h.c.Sources(), "the last identity naming a stops its watch")
	h.setIdentity(identity("two", "creds", "b")) // unchanged: nothing moves
	require.Equal(t, map[types.NamespacedName]int{b: 1}, h.c.Sources())
	h.deleteIdentity("two")
	require.Empty(t, h.c.Sources())
	require.Equal(t, 0.0, gauge(t))
}

// controlWatch makes the watch of ns/name (after its list, served by the
// fake's tracker) a FakeWatcher the test drives, so events are exactly the
// ones it sends.
func (h *harness) controlWatch(ns, name string) *watch.FakeWatcher {
	fw := watch.NewFakeWithChanSize(10, false)
	h.kube.PrependWatchReactor("secrets", func(a k8stesting.Action) (bool, watch.Interface, error) {
		w := a.(k8stesting.WatchAction)
		sel := w.GetWatchRestrictions().Fields
		if w.GetNamespace() == ns && sel != nil && sel.String() == "metadata.name="+name {
			return true, fw, nil
		}
		return false, nil, nil
	})
	return fw
}

// P2: the initial list is a baseline (no user enqueued); a data change
// enqueues every identity naming the source, once; a metadata-only change
// or a no-op update enqueues nothing.
func TestDataChangeEnqueuesEveryIdentityOfTheSource(t *testing.T) {
	h := newHarness(t, false, secret("creds", "cloud", "v1"), secret("creds", "other", "v1"))
	fw := h.controlWatch("creds", "cloud")
	h.setIdentity(identity("one", "creds", "cloud"))
	h.setIdentity(identity("two", "creds", "cloud"))
	h.setIdentity(identity("three", "creds", "other"))
	h.waitSynced("creds", "cloud")
	h.waitSynced("creds", "other")

	// Metadata only, then a no-op update: nothing.
	s := secret("creds", "cloud", "v1")
	s.Labels = map[string]string{"team": "a"}
	s.Annotations = map[string]string{"note": "x"}
	fw.Modify(s.DeepCopy())
	fw.Modify(s.DeepCopy())
	h.waitEvents("creds", "cloud", 3) // the initial add and the two updates
	ch, _ := h.calls.get()
	require.Empty(t, ch, "the initial list, a metadata-only change and a no-op update enqueue nothing")

	// Data: both identities of that source, once.
	s.Data = map[string][]byte{"KEY": []byte("v2")}
	fw.Modify(s.DeepCopy())
	h.waitEvents("creds", "cloud", 4)
	ch, _ = h.calls.get()
	require.Equal(t, []string{"one", "two"}, ch)

	// A change to the consent annotation (C1) counts: it decides whether
	// the source may be used.
	s.Annotations[v1alpha1.AnnotationCredentialIdentities] = "one"
	fw.Modify(s.DeepCopy())
	h.waitEvents("creds", "cloud", 5)
	ch, bl := h.calls.get()
	require.Equal(t, []string{"one", "one", "two", "two"}, ch, "'three' names a source that did not change")
	require.Empty(t, bl, "watches of the start-up set report no baseline")

	// Deleted and recreated while the watch was down (seen on a relist as
	// an update with another UID), with the same data: a change.
	r := s.DeepCopy()
	r.UID = "recreated"
	fw.Modify(r)
	h.waitEvents("creds", "cloud", 6)
	ch, _ = h.calls.get()
	require.Len(t, ch, 6)
}

// P2: a deleted source is a change (users learn SecretNotFound), and so is
// its recreation with other data.
func TestDeletedAndRecreatedSource(t *testing.T) {
	h := newHarness(t, false, secret("creds", "cloud", "v1"))
	h.setIdentity(identity("one", "creds", "cloud"))
	h.waitSynced("creds", "cloud")
	require.NoError(t, h.kube.CoreV1().Secrets("creds").Delete(h.ctx, "cloud", metav1.DeleteOptions{}))
	require.Equal(t, []string{"one"}, h.waitChanges(1))
	s := secret("creds", "cloud", "v2")
	s.UID = "recreated"
	_, err := h.kube.CoreV1().Secrets("creds").Create(h.ctx, s, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"one", "one"}, h.waitChanges(2))
}

// P2: a source that does not exist yet is watched too; its creation is a
// change.
func TestSourceCreatedLater(t *testing.T) {
	h := newHarness(t, false)
	h.setIdentity(identity("one", "creds", "cloud"))
	h.waitSynced("creds", "cloud")
	_, err := h.kube.CoreV1().Secrets("creds").Create(h.ctx, secret("creds", "cloud", "v1"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, []string{"one"}, h.waitChanges(1))
}

// P2: after an identity switches secretRef, editing the old Secret
// enqueues nothing for it; the new one is watched.
func TestSwitchedIdentityIgnoresItsOldSource(t *testing.T) {
	h := newHarness(t, false, secret("creds", "old", "v1"), secret("creds", "new", "v1"))
	h.setIdentity(identity("one", "creds", "old"))
	h.waitSynced("creds", "old")
	h.setIdentity(identity("one", "creds", "new"))
	h.waitSynced("creds", "new")

	s := h.get("creds", "old")
	s.Data = map[string][]byte{"KEY": []byte("v2")}
	h.update(s)
	s = h.get("creds", "new")
	s.Data = map[string][]byte{"KEY": []byte("v2")}
	h.update(s)
	require.Equal(t, []string{"one"}, h.waitChanges(1))
	// The old watch is stopped: nothing of it is delivered, whatever the
	// order of the two watches.
	require.Equal(t, map[types.NamespacedName]int{{Namespace: "creds", Name: "new"}: 1}, h.c.Sources())
	ch, _ := h.calls.get()
	require.Equal(t, []string{"one"}, ch)
}

// A watch started after start-up (an identity created or switched while
// running) reports its baseline: the identity alone is enqueued, for S4.
func TestLateWatchReportsItsBaseline(t *testing.T) {
	h := newHarness(t, true, secret("creds", "cloud", "v1"))
	h.setIdentity(identity("one", "creds", "cloud"))
	h.eventually("a baseline report", func() bool {
		_, bl := h.calls.get()
		return len(bl) == 1
	})
	ch, bl := h.calls.get()
	require.Equal(t, []string{"one"}, bl)
	require.Empty(t, ch, "the initial list enqueues no user")
}

// A failing list or watch is retried with backoff, counted, and the watch
// works once the API answers again; nothing panics or stops.
func TestWatchErrorsAreRetried(t *testing.T) {
	h := newHarness(t, false, secret("creds", "cloud", "v1"))
	var watches, lists atomic.Int32
	h.kube.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		if lists.Add(1) == 1 {
			return true, nil, errors.New("injected list failure")
		}
		return false, nil, nil
	})
	h.kube.PrependWatchReactor("secrets", func(k8stesting.Action) (bool, watch.Interface, error) {
		if watches.Add(1) <= 2 {
			return true, nil, errors.New("injected watch failure")
		}
		return false, nil, nil
	})
	before := value(t, "captf_source_watch_errors_total")
	h.setIdentity(identity("one", "creds", "cloud"))
	h.eventually("a watch after the failures", func() bool { return watches.Load() >= 3 })
	h.waitSynced("creds", "cloud")
	after := value(t, "captf_source_watch_errors_total")
	require.GreaterOrEqual(t, after-before, 3.0, "one failed list and two failed watches are counted")

	s := h.get("creds", "cloud")
	s.Data = map[string][]byte{"KEY": []byte("v2")}
	h.update(s)
	require.Equal(t, []string{"one"}, h.waitChanges(1))
}

// B1: what a watch caches holds no data and no metadata but its identity
// and fingerprint; the fingerprint follows data, type and the C1/C2
// metadata, and nothing else.
func TestReduce(t *testing.T) {
	s := secret("creds", "cloud", "value")
	s.Labels = map[string]string{"team": "a", v1alpha1.LabelCredential: "true"}
	s.Annotations = map[string]string{"big": "x"}
	s.ResourceVersion = "7"
	out, err := reduce(s.DeepCopy())
	require.NoError(t, err)
	r := out.(*corev1.Secret)
	require.Nil(t, r.Data)
	require.Equal(t, "cloud", r.Name)
	require.Equal(t, "creds", r.Namespace)
	require.Equal(t, s.UID, r.UID)
	require.Equal(t, "7", r.ResourceVersion)
	require.Equal(t, []string{fingerprintAnnotation}, keys(r.Annotations))
	require.Empty(t, r.Labels)
	again, err := reduce(r)
	require.NoError(t, err)
	require.Equal(t, r, again, "idempotent")
	require.Equal(t, fingerprintOf(s), fingerprintOf(r))

	// A tenant's Secret carrying the annotation is not taken for a reduced copy.
	forged := s.DeepCopy()
	forged.Data = nil
	forged.Annotations = map[string]string{fingerprintAnnotation: "forged"}
	require.NotEqual(t, "forged", fingerprintOf(forged))

	for name, edit := range map[string]func(*corev1.Secret){
		"data":                  func(s *corev1.Secret) { s.Data["KEY"] = []byte("other") },
		"key added":             func(s *corev1.Secret) { s.Data["NEW"] = nil },
		"mirrored label (C2)":   func(s *corev1.Secret) { s.Labels[v1alpha1.LabelMirrored] = "true" },
		"consent label (C1)":    func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelCredential) },
		"consent list (C1)":     func(s *corev1.Secret) { s.Annotations[v1alpha1.AnnotationCredentialIdentities] = "*" },
		"type (C2)":             func(s *corev1.Secret) { s.Type = corev1.SecretTypeServiceAccountToken },
		"no change: other meta": nil,
	} {
		c := s.DeepCopy()
		if edit == nil {
			c.Labels["team"] = "b"
			c.Annotations["big"] = "y"
			c.ResourceVersion = "8"
			require.Equal(t, fingerprintOf(s), fingerprintOf(c), name)
			continue
		}
		edit(c)
		require.NotEqual(t, fingerprintOf(s), fingerprintOf(c), name)
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
