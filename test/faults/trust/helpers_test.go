package trust

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/test/controlplane"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// cluster creates a TerraformCluster using identity; it starts Jobs when
// image is set.
func cluster(f *framework.Fixture, ns, name, identity, image string) faultkit.Workload {
	f.T.Helper()
	w, err := faultkit.CreateWorkload(f.Ctx, f.Env.Captf, faultkit.KindCluster, ns, name, identity, image, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	return w
}

// conds returns a getter of a workload object's conditions for WaitCondition.
func conds(f *framework.Fixture, w faultkit.Workload) func() ([]metav1.Condition, error) {
	return func() ([]metav1.Condition, error) {
		s, err := faultkit.GetWorkload(f.Ctx, f.Env.Captf, w)
		if err == nil && !s.Exists {
			err = fmt.Errorf("%s does not exist", w)
		}
		return s.Conditions, err
	}
}

// identity reads an identity, failing the test.
func identity(f *framework.Fixture, name string) *v1alpha1.TerraformClusterIdentity {
	f.T.Helper()
	i, err := f.Env.Captf.InfrastructureV1alpha1().TerraformClusterIdentities().Get(f.Ctx, name, metav1.GetOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	return i
}

// describeStatus formats what an identity's status says, for reports.
func describeStatus(i *v1alpha1.TerraformClusterIdentity) string {
	s := fmt.Sprintf("namespaces %v; ", i.Status.Namespaces)
	if m := i.Status.Mirrors; m != nil {
		s += fmt.Sprintf("mirrors %+v; ", *m)
	} else {
		s += "mirrors nil; "
	}
	if r := i.Status.Rotation; r != nil {
		s += fmt.Sprintf("rotation %+v; ", *r)
	} else {
		s += "rotation nil; "
	}
	return s + framework.Describe(i.Status.Conditions)
}

// condTrue reports whether an identity's condition t is True.
func condTrue(i *v1alpha1.TerraformClusterIdentity, t v1alpha1.ConditionType) bool {
	return meta.IsStatusConditionTrue(i.Status.Conditions, string(t))
}

// waitIdentity polls the identity until ok holds.
func waitIdentity(f *framework.Fixture, name, what string, ok func(*v1alpha1.TerraformClusterIdentity) bool) *v1alpha1.TerraformClusterIdentity {
	f.T.Helper()
	var i *v1alpha1.TerraformClusterIdentity
	f.WaitFor(what, func() (bool, string) {
		i = identity(f, name)
		return ok(i), describeStatus(i)
	})
	return i
}

// holds polls the identity for window and fails the test the first time
// ok does not hold: an observation that a forged object changes nothing
// over several resyncs, never a bound on how long anything takes.
func holds(f *framework.Fixture, name, what string, window time.Duration, ok func(*v1alpha1.TerraformClusterIdentity) bool) {
	f.T.Helper()
	holdsCond(f, what, window, func() (bool, string) {
		i := identity(f, name)
		return ok(i), describeStatus(i)
	})
}

// holdsCond polls cond for window and fails the test the first time it
// does not hold.
func holdsCond(f *framework.Fixture, what string, window time.Duration, cond func() (bool, string)) {
	f.T.Helper()
	deadline := time.Now().Add(window)
	for polls := 1; time.Now().Before(deadline); polls++ {
		if ok, msg := cond(); !ok {
			f.T.Fatalf("%s no longer holds after %d polls: %s", what, polls, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// forgedMirror is a Secret that looks like identity's mirror in ns (name,
// label, identity annotation) carrying hash: what a tenant can create in
// its own namespace.
func forgedMirror(ns, identity, hash string, owners []metav1.OwnerReference) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: credentials.MirrorName(identity),
		Labels:          map[string]string{v1alpha1.LabelMirrored: v1alpha1.LabelTrue},
		Annotations:     map[string]string{v1alpha1.AnnotationIdentity: identity, v1alpha1.AnnotationSourceHash: hash},
		OwnerReferences: owners},
		Data: map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte("forged")}}
}

// forgedJob is a suspended Job with the manager's label and annotations
// (such as the identity and source-hash ones) and env, controlled by owner
// when not nil.
func forgedJob(ns, name string, annotations map[string]string, owner *metav1.OwnerReference, env []corev1.EnvVar) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{v1alpha1.LabelManaged: v1alpha1.LabelTrue}, Annotations: annotations},
		Spec: batchv1.JobSpec{Suspend: new(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "main", Image: "example.com/forged:1", Env: env}}}}}}
	if owner != nil {
		j.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return j
}

// clusterRef is a controller reference to a TerraformCluster ns/name with
// uid, which need not exist.
func clusterRef(name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: faultkit.KindCluster, Name: name,
		UID: types.UID(uid), Controller: new(true), BlockOwnerDeletion: new(true)}
}

// forbiddenValues are the package's credential values and their hashes:
// none may appear in a log, event, condition or admission message (X1).
func forbiddenValues() []string {
	out := []string{secretValue, framework.HashOf(framework.DefaultData(secretValue))}
	for i := range rotations {
		out = append(out, framework.HashOf(framework.DefaultData(rotatedValue(i))))
	}
	return out
}

// memory is the manager's RSS (median of five samples a second apart) and
// Go heap in use (go_memstats_heap_inuse_bytes, 0 when not exposed).
type memory struct{ RSS, Heap int64 }

func sampleMemory(f *framework.Fixture) memory {
	f.T.Helper()
	rss, err := faultkit.MedianRSS(f.Ctx, f.Manager.PID(), 5, time.Second)
	if err != nil {
		f.T.Fatal(err)
	}
	m, err := f.Manager.Scrape()
	if err != nil {
		f.T.Fatal(err)
	}
	return memory{RSS: rss, Heap: int64(m.Sum("go_memstats_heap_inuse_bytes", nil))}
}

func (m memory) String() string {
	return fmt.Sprintf("RSS %.1f MiB, Go heap in use %.1f MiB", faultkit.MiB(m.RSS), faultkit.MiB(m.Heap))
}

// deploymentMemoryLimit is limits.memory of the manager container of the
// shipped Deployment, in bytes: what its GOMEMLIMIT is (SPEC B5).
func deploymentMemoryLimit(t *testing.T) int64 {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "manifests/manager/deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == "manager" {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	t.Fatal("the shipped Deployment sets no memory limit on its manager container")
	return 0
}

// startLimited is start with the manager run under GOMEMLIMIT as the
// shipped Deployment sets it (SPEC B10-B15: attacks are measured against
// the shipped memory limit). The variable is inherited by the manager's
// process; the test's own runtime read its value at start-up already.
func startLimited(t *testing.T, kubeconfig ...string) *framework.Fixture {
	limit := deploymentMemoryLimit(t)
	t.Setenv("GOMEMLIMIT", strconv.FormatInt(limit, 10))
	f := start(t, kubeconfig...)
	t.Logf("manager PID %d with GOMEMLIMIT=%d (%.0f MiB)", f.Manager.PID(), limit, faultkit.MiB(limit))
	return f
}

// peakRSS is a process's peak resident set size since it started
// (VmHWM): a transient spike between two samples is not missed.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil || len(f) != 2 || f[1] != "kB" {
				t.Fatalf("unexpected VmHWM line %q", line)
			}
			return kb * 1024
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// resetPeakRSS starts a new peak (VmHWM) of pid at its current RSS, so
// that a later peakRSS is the attack's, not an earlier transient's (Linux:
// writing 5 to /proc/<pid>/clear_refs). Where that is refused the peak
// stays the process's whole life's, which only makes a bound stricter.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("cannot reset the peak RSS (%v): the peak is the process's whole life's", err)
	}
}

// survived fails the test unless the manager that was pid before the
// attack still runs as pid: no exit, no restart.
func survived(f *framework.Fixture, pid int) {
	f.T.Helper()
	if exited, err := f.Manager.ExitError(); exited {
		f.T.Fatalf("the manager exited during the attack: %v", err)
	}
	if got := f.Manager.PID(); got != pid {
		f.T.Fatalf("the manager restarted during the attack: PID %d, then %d", pid, got)
	}
}

// attackStart samples the manager's memory before an attack and starts a
// new peak RSS.
func attackStart(f *framework.Fixture) memory {
	f.T.Helper()
	before := sampleMemory(f)
	resetPeakRSS(f.T, f.Manager.PID())
	return before
}

// requirePeakBelow fails the test when the manager's peak RSS since
// attackStart rose more than bound above its RSS before the attack.
func requirePeakBelow(f *framework.Fixture, what string, before memory, bound int64) {
	f.T.Helper()
	peak := peakRSS(f.T, f.Manager.PID())
	after := sampleMemory(f)
	f.T.Logf("%s: before %s; after %s; peak RSS %.1f MiB (%+.1f MiB over the RSS before; bound %.0f MiB)",
		what, before, after, faultkit.MiB(peak), faultkit.MiB(peak-before.RSS), faultkit.MiB(bound))
	if grew := peak - before.RSS; grew > bound {
		f.T.Errorf("%s: the manager's peak RSS rose %.1f MiB above its RSS before the attack (bound %.0f MiB)",
			what, faultkit.MiB(grew), faultkit.MiB(bound))
	}
}

// jobOf waits for the one Job of action that controls the workload object
// ns/name, and returns it.
func jobOf(f *framework.Fixture, w faultkit.Workload, action v1alpha1.JobAction) batchv1.Job {
	f.T.Helper()
	var job batchv1.Job
	f.WaitFor(fmt.Sprintf("the %s Job of %s", action, w), func() (bool, string) {
		var mine []batchv1.Job
		for _, j := range f.Jobs(w.Namespace, action) {
			if ref := metav1.GetControllerOf(&j); ref != nil && ref.Name == w.Name && ref.Kind == w.Kind {
				mine = append(mine, j)
			}
		}
		if len(mine) == 1 {
			job = mine[0]
		}
		return len(mine) == 1, fmt.Sprintf("%d Jobs", len(mine))
	})
	return job
}

// gzipRepeat is a gzip of head, n copies of unit and tail, written without
// holding the whole: a bomb of a few KiB.
func gzipRepeat(head, unit, tail string, n int) []byte {
	var b bytes.Buffer
	w, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = io.WriteString(w, head)
	chunk := strings.Repeat(unit, max(1, (64<<10)/len(unit)))
	per := len(chunk) / len(unit)
	for i := 0; i < n; i += per {
		_, _ = io.WriteString(w, chunk[:min(per, n-i)*len(unit)])
	}
	_, _ = io.WriteString(w, tail)
	_ = w.Close()
	return b.Bytes()
}

// getCounter counts the GETs of paths through a proxy in front of the API
// server.
type getCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// observe installs c on proxy: every request is forwarded, and the GETs
// whose path passes match counted.
func (c *getCounter) observe(proxy *faultkit.FlakyProxy, match func(path string) bool) {
	c.counts = map[string]int{}
	proxy.SetFaults(&faultkit.Faults{Only: func(r *http.Request) bool {
		if r.Method == http.MethodGet && match(r.URL.Path) {
			c.mu.Lock()
			c.counts[r.URL.Path]++
			c.mu.Unlock()
		}
		return false
	}})
}

func (c *getCounter) get(path string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[path]
}

// proxied starts a healthy proxy in front of the API server and returns it
// with a kubeconfig of the manager's user through it.
func proxied(t *testing.T) (*faultkit.FlakyProxy, string) {
	t.Helper()
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
	return proxy, kubeconfig
}
