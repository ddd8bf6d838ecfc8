package mirrorrace

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// secretValue is the credential of the source; rotatedValue its rotation.
// Neither may reach a log, event or status (X1).
const (
	secretValue  = "mr-Cr3dential-VALUE-5d0a7e"
	rotatedValue = secretValue + "-rotated"
)

// call is one request of the manager to the mirror, and its answer.
type call struct {
	method string
	status int
	// rv is the metadata.resourceVersion a PATCH carried ("" if none).
	rv string
}

func (c call) String() string {
	if c.rv != "" {
		return fmt.Sprintf("%s(rv %s) -> %d", c.method, c.rv, c.status)
	}
	return fmt.Sprintf("%s -> %d", c.method, c.status)
}

// racer is the proxy hook: it records the manager's requests to one mirror
// and runs race, once, on the first write of it, before that write reaches
// the API server.
type racer struct {
	path string
	mu   sync.Mutex
	race func()
	// calls are the requests to the mirror since arm, in order.
	calls []call
}

// callHeader numbers a recorded request on its way to the API server.
const callHeader = "X-Captf-Mirrorrace-Call"

func (r *racer) arm(race func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.race, r.calls = race, nil
}

func (r *racer) log() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls...)
}

func (r *racer) hook() *faultkit.Hook {
	return &faultkit.Hook{
		Before: func(req *http.Request) {
			if req.URL.Path != r.path || req.Method == http.MethodGet && req.URL.Query().Get("watch") == "true" {
				return
			}
			c := call{method: req.Method}
			if req.Method == http.MethodPatch || req.Method == http.MethodPut {
				body, _ := io.ReadAll(req.Body)
				req.Body = io.NopCloser(bytes.NewReader(body))
				var p struct {
					Metadata struct {
						ResourceVersion string `json:"resourceVersion"`
					} `json:"metadata"`
				}
				_ = json.Unmarshal(body, &p)
				c.rv = p.Metadata.ResourceVersion
			}
			r.mu.Lock()
			race := r.race
			if c.method != http.MethodGet {
				r.race = nil
			}
			r.calls = append(r.calls, c)
			// The proxy forwards a copy of req: the header finds the call
			// again in its answer.
			req.Header.Set(callHeader, strconv.Itoa(len(r.calls)-1))
			r.mu.Unlock()
			if race != nil && c.method != http.MethodGet {
				race()
			}
		},
		After: func(resp *http.Response) {
			i, err := strconv.Atoi(resp.Request.Header.Get(callHeader))
			if err != nil {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if i < len(r.calls) {
				r.calls[i].status = resp.StatusCode
			}
		},
	}
}

// fixture is a manager behind a proxy with a racer on one mirror.
type fixture struct {
	*framework.Fixture
	proxy  *faultkit.FlakyProxy
	racer  *racer
	ref    v1alpha1.SecretReference
	id, ns string
	mirror string
}

func start(t *testing.T) *fixture {
	e := framework.Get(t)
	proxy, err := faultkit.StartFlakyProxy(e.CP.URL, e.CP.CAData)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig-proxy")
	if err := proxy.WriteKubeconfig(kubeconfig, controlplane.Manager, e.CP.Users[controlplane.Manager].Token); err != nil {
		t.Fatal(err)
	}
	// Long periods: only the test's own changes make the manager write.
	// One worker per queue (every user here is a pool): the users of the
	// mirror reconcile one at a time, so the held write is the only one in
	// flight when the race runs.
	m := e.StartManagerKeepLog(t, framework.ManagerOptions{User: controlplane.Manager, Kubeconfig: kubeconfig,
		Args: []string{"--sync-period=1h", "--identity-resync=1h", "--workers=1"}})
	f := &fixture{Fixture: &framework.Fixture{T: t, Env: e, Ctx: framework.Context(t), Manager: m, Settle: 90 * time.Second}, proxy: proxy}
	f.ns = e.CreateNamespace(t, "race", nil)
	f.ref = f.Source(framework.DefaultData(secretValue))
	f.id = f.Identity(f.ref, framework.List(f.ns))
	f.mirror = credentials.MirrorName(f.id)
	f.racer = &racer{path: "/api/v1/namespaces/" + f.ns + "/secrets/" + f.mirror}
	proxy.SetHook(f.racer.hook())
	return f
}

// user creates a TerraformMachinePool using the identity, stopped at the
// mirror (no module image: no Job), and returns its owner reference.
func (f *fixture) user(name string) metav1.OwnerReference {
	f.T.Helper()
	p := &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: v1alpha1.TerraformMachinePoolSpec{IdentityRef: &v1alpha1.IdentityReference{Name: f.id}}}
	p, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachinePools(f.ns).Create(f.Ctx, p, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return credentials.OwnerReference(v1alpha1.SchemeGroupVersion.String(), v1alpha1.KindTerraformMachinePool, p.Name, p.UID)
}

// edit changes the stored mirror as the admin (straight to the API server,
// not through the proxy), retrying nothing: it runs while the manager's
// write is held, so nothing else writes the mirror meanwhile.
func (f *fixture) edit(change func(*corev1.Secret)) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secrets := f.Env.Kube.CoreV1().Secrets(f.ns)
	s, err := secrets.Get(ctx, f.mirror, metav1.GetOptions{})
	if err != nil {
		f.T.Errorf("race: reading the mirror: %v", err)
		return
	}
	change(s)
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		f.T.Errorf("race: changing the mirror: %v", err)
	}
}

// requireReplanned checks the manager's requests to the mirror since arm:
// its first write, a patch preconditioned on a resourceVersion, refused by
// the API server with 409; then an uncached read; then, unless the Secret
// is no longer a mirror, a successful patch preconditioned on a later
// version. No write is ever sent without a precondition, and none
// succeeds once the Secret is foreign.
func (f *fixture) requireReplanned(foreign bool) {
	f.T.Helper()
	calls := f.racer.log()
	var got []string
	for _, c := range calls {
		got = append(got, c.String())
	}
	bad := func(why string) {
		f.T.Helper()
		f.T.Fatalf("%s; the manager's requests to the mirror: %s", why, strings.Join(got, ", "))
	}
	if len(calls) < 2 {
		bad("want a refused write and a re-read")
	}
	if calls[0].method != http.MethodPatch || calls[0].rv == "" {
		bad("P3: the first write must be a patch preconditioned on a resourceVersion")
	}
	if calls[0].status != http.StatusConflict {
		bad("the API server must refuse the write planned from the version before the race (409)")
	}
	if calls[1].method != http.MethodGet || calls[1].status != http.StatusOK {
		bad("B1: a refused write is followed by an uncached read")
	}
	replanned := false
	for _, c := range calls[1:] {
		switch {
		case c.method == http.MethodGet:
		case c.method != http.MethodPatch || c.rv == "":
			bad("P3: every write is a preconditioned patch")
		case foreign && c.status < 300:
			bad("M7: no write succeeds once the Secret is no longer a mirror")
		case c.status == http.StatusOK && c.rv != calls[0].rv:
			replanned = true
		}
	}
	if !foreign && !replanned {
		bad("want a successful patch preconditioned on the version after the race")
	}
	f.T.Logf("the manager's requests to the mirror: %s", strings.Join(got, ", "))
}

// with returns f for subtest t: its failures end t, not the parent.
func (f *fixture) with(t *testing.T) *fixture {
	g := *f
	fx := *f.Fixture
	fx.T = t
	g.Fixture = &fx
	return &g
}

func hasOwner(s *corev1.Secret, uid types.UID) bool {
	return credentials.HasOwnerReference(s.OwnerReferences, uid)
}

// TestMirrorChangedBeforeTheWrite is P3's race on the real API server, in
// three rounds on one mirror: each round arms the hook, makes the manager
// want to write the mirror, and checks that the write was refused,
// re-planned from a fresh read and that the other writer's change is kept.
func TestMirrorChangedBeforeTheWrite(t *testing.T) {
	f := start(t)
	first := f.user("p0")
	f.WaitMirror(f.ns, f.id, "created with p0", func(s *corev1.Secret) bool { return hasOwner(s, first.UID) })

	// M5: another object's owner reference arrives while the manager adds
	// a new user's; the write replaces the whole list, so without the
	// precondition the other reference would be lost.
	t.Run("M5 another owner reference", func(t *testing.T) {
		f := f.with(t)
		other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "other-owner", UID: "0b4c1d2e-0000-4000-8000-000000000001"}
		f.racer.arm(func() {
			f.edit(func(s *corev1.Secret) { s.OwnerReferences = append(s.OwnerReferences, other) })
		})
		second := f.user("p1")
		m := f.WaitMirror(f.ns, f.id, "p1 added", func(s *corev1.Secret) bool { return hasOwner(s, second.UID) })
		f.requireReplanned(false)
		if !hasOwner(m, other.UID) || !hasOwner(m, first.UID) {
			t.Fatalf("the other writer's owner reference was lost: owners %v", framework.OwnerNames(m))
		}
	})

	// An annotation a tenant may set arrives while the manager rotates the
	// data.
	t.Run("tenant annotation during a rotation", func(t *testing.T) {
		f := f.with(t)
		f.racer.arm(func() {
			f.edit(func(s *corev1.Secret) { s.Annotations["tenant.example.com/note"] = "mine" })
		})
		rotated := framework.DefaultData(rotatedValue)
		f.SetSource(f.ref, rotated)
		m := f.WaitMirror(f.ns, f.id, "rotated", func(s *corev1.Secret) bool {
			return s.Annotations[v1alpha1.AnnotationSourceHash] == framework.HashOf(rotated)
		})
		f.requireReplanned(false)
		if got := m.Annotations["tenant.example.com/note"]; got != "mine" {
			t.Fatalf("the tenant's annotation was lost: %q", got)
		}
		if string(m.Data["AWS_SECRET_ACCESS_KEY"]) != rotatedValue {
			t.Fatal("the mirror does not carry the rotated data")
		}
	})

	// M7: the Secret stops being a mirror (its label removed) while the
	// manager adds a user: it must not be written at all.
	t.Run("M7 no longer a mirror", func(t *testing.T) {
		f := f.with(t)
		var before *corev1.Secret
		f.racer.arm(func() {
			f.edit(func(s *corev1.Secret) { delete(s.Labels, v1alpha1.LabelMirrored) })
			before = f.Mirror(f.ns, f.id)
		})
		third := f.user("p2")
		f.WaitCondition("p2", poolConds(f, "p2"), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed)
		f.requireReplanned(true)
		after := f.Mirror(f.ns, f.id)
		if after == nil || before == nil || after.ResourceVersion != before.ResourceVersion {
			t.Fatalf("M7: the Secret was modified after it stopped being a mirror")
		}
		if hasOwner(after, third.UID) {
			t.Fatal("M7: p2's owner reference was written into a Secret that is no longer a mirror")
		}
	})

	f.RequireNoSecretValues(secretValue, rotatedValue)
}

func poolConds(f *fixture, name string) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		p, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachinePools(f.ns).Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return p.Status.Conditions, nil
	}
}
