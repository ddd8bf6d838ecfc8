package faultscp

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestAPIServerRestart is fault 1: kube-apiserver is SIGKILLed in the
// middle of a fan-out (an identity created for objects in n namespaces
// that were waiting for it) and again in the middle of a rotation, and
// started again on the same etcd each time. The manager must not exit,
// must reconnect by itself, and afterwards every mirror carries the current
// source hash and exactly the owner references of its namespace's users,
// and no Job was created twice.
func TestAPIServerRestart(t *testing.T) {
	e := framework.Get(t)
	preserveLogs(t, e)
	n := size(40, 200)
	rec := e.RecordJobs(t, nil)
	// A sync period longer than the test: recovery must come from the
	// manager's reconnecting watches and retries, not from a resync. The
	// identity resync (S4) is what carries the rotation.
	m := startManager(t, e, "--sync-period=10m", "--identity-resync=5s", "--workers=4")
	f := fixture(t, e, m)
	d1 := sourceData(1)
	h1 := hashOf(d1)
	ref := f.Source(d1)
	labels := map[string]string{"faults.captf.io/fanout": framework.Name("f1")}
	nss := createNamespaces(t, e, "fan", n, labels)
	identity := framework.Name("fanout")

	// One cluster per namespace, a second one in every fourth: objects
	// created before their identity exists (IdentityNotFound).
	objs := createClusters(t, e, nss, identity)
	cleanUp(t, e, &[]*framework.Manager{m}, &nss, identity)
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "objects waiting for their identity", func(s *snapshot) (bool, string) {
		if len(s.objects) != len(objs) {
			return false, fmt.Sprintf("%d of %d objects", len(s.objects), len(objs))
		}
		return s.conditionAll(v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, v1alpha1.ReasonIdentityNotFound)
	})
	mt := trackMirrors(t, e, identity)

	// The fan-out: creating the identity enqueues every user (I4).
	fanoutStart := time.Now()
	createIdentity(t, e, identity, ref, selectorOf(labels))
	atKill := mt.waitCount(t, h1, max(1, n/4), 2*time.Minute)
	logFrom := mark(m)
	downtime := restartAPIServer(t, e, m, fmt.Sprintf("fan-out (%d/%d mirrors written, %s after the identity was created)", atKill, n, time.Since(fanoutStart).Round(time.Millisecond)))
	fanoutTook := waitConverged(t, e, m, rec, identity, h1, nss, objs)
	t.Logf("fault 1, fan-out: API server down %s; converged %s after it was ready again (whole fan-out %s); %s",
		downtime, fanoutTook, time.Since(fanoutStart).Round(time.Millisecond), writesReport(m, len(objs)))
	t.Logf("fault 1, fan-out: the manager's log from the kill to convergence: %s", logSummary(m, logFrom))

	// The rotation: nothing watches the source (R1); the identity
	// controller's resync (S4) enqueues the users of stale mirrors.
	d2 := sourceData(2)
	h2 := hashOf(d2)
	rotated := time.Now()
	f.SetSource(ref, d2)
	atKill = mt.waitCount(t, h2, 1, 2*time.Minute)
	logFrom = mark(m)
	downtime = restartAPIServer(t, e, m, fmt.Sprintf("rotation (%d/%d mirrors rotated, %s after the source changed)", atKill, n, time.Since(rotated).Round(time.Millisecond)))
	rotationTook := waitConverged(t, e, m, rec, identity, h2, nss, objs)
	t.Logf("fault 1, rotation: API server down %s; converged %s after it was ready again (whole rotation %s); %s",
		downtime, rotationTook, time.Since(rotated).Round(time.Millisecond), writesReport(m, len(objs)))
	t.Logf("fault 1, rotation: the manager's log from the kill to convergence: %s", logSummary(m, logFrom))

	requireOneJobEach(t, e, rec, objs, map[types.UID]int{})
	requireAlive(t, m, "at the end")
	requireControlPlane(t, e)
}

// restartAPIServer SIGKILLs kube-apiserver and starts it again on the same
// etcd; it returns how long the API was down (kill to /readyz ok) and
// checks the manager survived.
func restartAPIServer(t *testing.T, e *framework.Env, m *framework.Manager, during string) time.Duration {
	t.Helper()
	killed := time.Now()
	e.CP.StopAPIServer(true)
	t.Logf("SIGKILLed kube-apiserver during the %s", during)
	if err := e.CP.StartAPIServer(framework.Context(t)); err != nil {
		t.Fatalf("restarting kube-apiserver: %v", err)
	}
	downtime := time.Since(killed).Round(time.Millisecond)
	requireAlive(t, m, "while kube-apiserver was down")
	return downtime
}
