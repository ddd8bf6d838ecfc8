package sourcewatch

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// rotated is source data whose secret key holds secretValue with suffix.
func rotated(suffix string) map[string]string {
	return map[string]string{"AWS_ACCESS_KEY_ID": "AKIA" + strings.ToUpper(suffix), "AWS_SECRET_ACCESS_KEY": secretValue + "-" + suffix}
}

// create creates a workload object of kind naming identity, without Jobs.
func create(f *framework.Fixture, kind, ns, name, identity string) faultkit.Workload {
	f.T.Helper()
	w, err := faultkit.CreateWorkload(f.Ctx, f.Env.Captf, kind, ns, name, identity, "", nil)
	if err != nil {
		f.T.Fatal(err)
	}
	return w
}

// waitHash waits until the mirror of identity in ns carries the hash of data.
func waitHash(f *framework.Fixture, ns, identity string, data map[string]string, what string) {
	f.T.Helper()
	want := framework.HashOf(data)
	f.WaitMirror(ns, identity, what, func(m *corev1.Secret) bool {
		return m.Annotations[v1alpha1.AnnotationSourceHash] == want
	})
}

// logFrom returns the manager's log after offset bytes.
func logFrom(f *framework.Fixture, offset int) string {
	l := f.Manager.Log()
	if offset > len(l) {
		return ""
	}
	return l[offset:]
}

// logHas reports whether some line of log contains every fragment.
func logHas(log string, fragments ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, fr := range fragments {
			if !strings.Contains(line, fr) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// waitLog waits until a line of the manager's log after offset contains
// every fragment.
func waitLog(f *framework.Fixture, offset int, fragments ...string) {
	f.T.Helper()
	f.WaitFor(fmt.Sprintf("a manager log line with %q", fragments), func() (bool, string) {
		return logHas(logFrom(f, offset), fragments...), "not logged yet"
	})
}

func secretKV(ref v1alpha1.SecretReference) string {
	return fmt.Sprintf("secret=%q", ref.Namespace+"/"+ref.Name)
}

func scrape(f *framework.Fixture) faultkit.Metrics {
	f.T.Helper()
	m, err := f.Manager.Scrape()
	if err != nil {
		f.T.Fatal(err)
	}
	return m
}

// quiet is how long the manager must make no request (but its Lease
// renewals and events) with empty queues before a rotation: longer than
// the identity controller's delay after a mirror event (1s), so no
// follow-up of earlier writes, which would read the source and enqueue
// stale mirrors' users (S4), is pending when the source changes. Then only
// P2 can explain a rotation that reaches a mirror before the periods.
const quiet = 3 * time.Second

// waitQuiet waits until the manager has been quiet for quiet.
func waitQuiet(f *framework.Fixture) { f.WaitManagerQuiet(quiet) }

// TestRotationIsPushed checks P2: with --sync-period=10m and
// --identity-resync=5m, a rotated source reaches the mirrors of every kind
// of user (cluster, machine, pool) in every namespace well within either
// period, and the identity reports MirrorsCurrent.
func TestRotationIsPushed(t *testing.T) {
	f := setup(t)
	ns1 := f.Env.CreateNamespace(t, "tenant", nil)
	ns2 := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns1, ns2))
	create(f, faultkit.KindCluster, ns1, "c", id)
	create(f, faultkit.KindMachine, ns2, "m", id)
	create(f, faultkit.KindPool, ns2, "p", id)
	for _, ns := range []string{ns1, ns2} {
		waitHash(f, ns, id, data, "created")
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)

	waitQuiet(f)
	next := rotated("one")
	f.SetSource(ref, next)
	for _, ns := range []string{ns1, ns2} {
		waitHash(f, ns, id, next, "rotated by the source watch (P2), not by a period")
	}
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)
	if got := scrape(f).Sum("captf_source_watches", nil); got < 1 {
		t.Errorf("captf_source_watches = %v, want at least 1", got)
	}
}

// TestTwoIdentitiesOnOneSource checks P2's sharing: two identities naming
// one Secret share one watch, and a rotation reaches the users of both.
func TestTwoIdentitiesOnOneSource(t *testing.T) {
	f := setup(t)
	ns1 := f.Env.CreateNamespace(t, "tenant", nil)
	ns2 := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	a := f.Identity(ref, framework.List(ns1))
	b := f.Identity(ref, framework.List(ns2))
	create(f, faultkit.KindCluster, ns1, "c", a)
	create(f, faultkit.KindCluster, ns2, "c", b)
	waitHash(f, ns1, a, data, "created")
	waitHash(f, ns2, b, data, "created")

	waitQuiet(f)
	next := rotated("two")
	f.SetSource(ref, next)
	waitHash(f, ns1, a, next, "rotated (first identity)")
	waitHash(f, ns2, b, next, "rotated (second identity)")
}

// TestSourceDeletedAndRecreated checks P2 on a live watch: deleting the
// source makes its users report SecretNotFound, and recreating it with
// other data brings their mirrors up to date; the manager's log shows the
// watch saw both.
func TestSourceDeletedAndRecreated(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns))
	c := create(f, faultkit.KindCluster, ns, "c", id)
	waitHash(f, ns, id, data, "created")
	offset := len(f.Manager.Log())

	if err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Delete(f.Ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonSecretNotFound)
	waitLog(f, offset, "Source Secret changed", secretKV(ref), `change="deleted"`)

	next := rotated("three")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}, StringData: next}
	if _, err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Create(f.Ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitLog(f, offset, "Source Secret changed", secretKV(ref), `change="created"`)
	waitHash(f, ns, id, next, "recreated source mirrored")
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed)
}

// TestSwitchedSecretRefStopsTheOldWatch checks that the watches follow
// spec.secretRef (R4 with P2): the identity's users move to the new Secret
// at once, the old Secret's watch stops (logged), editing the old Secret
// enqueues nothing (no change logged for it), and a rotation of the new one
// is pushed.
func TestSwitchedSecretRefStopsTheOldWatch(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	oldData := framework.DefaultData(secretValue)
	oldRef := f.Source(oldData)
	newData := rotated("four")
	newRef := f.Source(newData)
	id := f.Identity(oldRef, framework.List(ns))
	create(f, faultkit.KindCluster, ns, "c", id)
	waitHash(f, ns, id, oldData, "created from the old Secret")
	offset := len(f.Manager.Log())

	f.EditIdentity(id, func(i *v1alpha1.TerraformClusterIdentity) { i.Spec.SecretRef = newRef })
	waitHash(f, ns, id, newData, "switched to the new Secret (R4)")
	waitLog(f, offset, "Stopped watching source Secret", secretKV(oldRef))
	waitLog(f, offset, "Watching source Secret", secretKV(newRef))

	// Edit the old Secret first, then rotate the new one: once the new
	// one's change is logged and mirrored, no change of the old one was.
	waitQuiet(f)
	f.SetSource(oldRef, rotated("old-edited"))
	next := rotated("five")
	f.SetSource(newRef, next)
	waitLog(f, offset, "Source Secret changed", secretKV(newRef), `change="updated"`)
	waitHash(f, ns, id, next, "rotation of the new Secret pushed")
	if logHas(logFrom(f, offset), "Source Secret changed", secretKV(oldRef)) {
		t.Fatalf("P2: an edit of the Secret the identity no longer names was pushed:\n%s", logFrom(f, offset))
	}
}

// TestWatchFailuresAreRetried checks P2's failure mode: while every list
// and watch of a source fails (500), the manager logs and counts the
// failures, keeps running and retries with backoff (the retry after the
// outage is what brings the change); a rotation made during
// the outage, and later a deletion and recreation with other data, reach
// the mirror once the API answers again (the relist compares with what the
// watch saw last), with the periods still far away.
func TestWatchFailuresAreRetried(t *testing.T) {
	f := setup(t)
	// The reflector's backoff grows to 30s (with jitter, up to a minute)
	// over repeated failures: still far below --identity-resync.
	f.Settle = 2 * time.Minute
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	ref := f.Source(data)
	id := f.Identity(ref, framework.List(ns))
	c := create(f, faultkit.KindCluster, ns, "c", id)
	waitHash(f, ns, id, data, "created")
	f.WaitCondition("identity", f.IdentityConds(id), v1alpha1.ConditionMirrorsCurrent, metav1.ConditionTrue, v1alpha1.ReasonAllMirrorsCurrent)

	// Only the source's own list and watch fail: the uncached GET of
	// reconciles, and every other informer, go through.
	sourceWatch := func(r *http.Request) bool {
		return r.URL.Path == "/api/v1/namespaces/"+ref.Namespace+"/secrets" &&
			r.URL.Query().Get("fieldSelector") == "metadata.name="+ref.Name
	}
	outage := func(change func()) {
		t.Helper()
		waitQuiet(f)
		start := time.Now()
		defer func() { t.Logf("outage lasted %s", time.Since(start).Round(time.Millisecond)) }()
		before := scrape(f).Sum("captf_source_watch_errors_total", nil)
		proxy.SetFaults(&faultkit.Faults{Error500: 1, Only: sourceWatch})
		proxy.CutStreams()
		f.WaitFor("the source watch to fail and be counted", func() (bool, string) {
			got := scrape(f).Sum("captf_source_watch_errors_total", nil)
			return got > before, fmt.Sprintf("captf_source_watch_errors_total %v (before the outage %v)", got, before)
		})
		change()
		if exited, err := f.Manager.ExitError(); exited {
			t.Fatalf("the manager exited during the outage: %v", err)
		}
		proxy.SetFaults(nil)
	}
	defer proxy.SetFaults(nil)

	next := rotated("six")
	outage(func() { f.SetSource(ref, next) })
	healed := time.Now()
	waitHash(f, ns, id, next, "rotation made during the outage, seen by the relist")
	t.Logf("rotation mirrored %s after the outage ended", time.Since(healed).Round(time.Millisecond))

	recreated := rotated("seven")
	outage(func() {
		if err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Delete(f.Ctx, ref.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ref.Namespace, Name: ref.Name}, StringData: recreated}
		if _, err := f.Env.Kube.CoreV1().Secrets(ref.Namespace).Create(f.Ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	healed = time.Now()
	waitHash(f, ns, id, recreated, "source deleted and recreated during the outage, seen by the relist")
	t.Logf("recreated source mirrored %s after the outage ended", time.Since(healed).Round(time.Millisecond))
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	if !strings.Contains(f.Manager.Log(), "Watching a source Secret failed; retrying with backoff") {
		t.Error("the watch failures were not logged")
	}
}
