package faultscp

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestEtcdRestart is fault 2: during steady state (every mirror current,
// every apply Job finished), etcd is stopped and started again on the same
// data directory while kube-apiserver and the manager keep running. The
// manager keeps running and afterwards works as before: a rotation and a
// new namespace's object converge, no owner reference was lost, no Job
// was created twice, and the objects' conditions did not regress.
func TestEtcdRestart(t *testing.T) {
	e := framework.Get(t)
	preserveLogs(t, e)
	ctx := framework.Context(t)
	n := size(20, 100)
	rec := e.RecordJobs(t, nil)
	// A short sync period, so the manager is making requests (uncached
	// source reads, M6) while etcd is down.
	const syncPeriod = 5 * time.Second
	m := startManager(t, e, "--sync-period="+syncPeriod.String(), "--identity-resync=5s", "--workers=4")
	f := fixture(t, e, m)
	d1 := sourceData(11)
	h1 := hashOf(d1)
	ref := f.Source(d1)
	labels := map[string]string{"faults.captf.io/etcd": framework.Name("f2")}
	nss := createNamespaces(t, e, "etcd", n, labels)
	identity := framework.Name("steady")
	createIdentity(t, e, identity, ref, selectorOf(labels))
	objs := createClusters(t, e, nss, identity)
	all := nss
	cleanUp(t, e, &[]*framework.Manager{m}, &all, identity)

	// Steady state: mirrors current, apply Jobs finished, objects Ready.
	waitConverged(t, e, m, rec, identity, h1, nss, objs)
	finishApplyJobs(t, e, rec, objs)
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "steady state", func(s *snapshot) (bool, string) {
		return s.conditionAll(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	})
	before := writesReport(m, len(objs))

	// The fault.
	logFrom := mark(m)
	stopped := time.Now()
	e.CP.StopEtcd()
	t.Logf("stopped etcd (SIGTERM) in %s", time.Since(stopped).Round(time.Millisecond))
	framework.Eventually(t, time.Minute, func() (bool, string) {
		code := apiReadyz(e)
		return code != http.StatusOK, fmt.Sprintf("kube-apiserver /readyz still %d with etcd stopped", code)
	})
	// Keep etcd down across two sync periods, so the manager's resyncs
	// run into the outage (this sleep shapes the fault; nothing is
	// asserted after it without polling).
	time.Sleep(2 * syncPeriod)
	requireAlive(t, m, "while etcd was down")
	if err := e.CP.StartEtcd(ctx); err != nil {
		t.Fatalf("restarting etcd: %v", err)
	}
	etcdUp := time.Now()
	framework.Eventually(t, 2*time.Minute, func() (bool, string) {
		code := apiReadyz(e)
		return code == http.StatusOK, fmt.Sprintf("kube-apiserver /readyz %d after etcd came back", code)
	})
	apiReady := time.Since(etcdUp).Round(time.Millisecond)
	requireAlive(t, m, "after etcd came back")
	requireControlPlane(t, e)
	t.Logf("etcd down %s; kube-apiserver ready %s after etcd was up", etcdUp.Sub(stopped).Round(time.Millisecond), apiReady)

	// The manager still works: steady state kept, then a rotation and a new
	// namespace's object.
	waitSnapshot(t, e, identity, nss, 3*time.Minute, "steady state after the restart", func(s *snapshot) (bool, string) {
		if ok, msg := s.mirrorsConverged(identity, h1, nss); !ok {
			return false, msg
		}
		return s.conditionAll(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
	})
	steadyAgain := time.Since(etcdUp).Round(time.Millisecond)
	t.Logf("fault 2: the manager's log from the stop to the steady state again: %s", logSummary(m, logFrom))
	d2 := sourceData(12)
	h2 := hashOf(d2)
	framework.Eventually(t, time.Minute, func() (bool, string) {
		s, err := e.Kube.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		s.Data, s.StringData = nil, d2
		_, err = e.Kube.CoreV1().Secrets(ref.Namespace).Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, fmt.Sprint(err)
	})
	extra := createNamespaces(t, e, "etcd-new", 1, labels)
	o, err := createCluster(ctx, e, extra[0], "c0", identity)
	if err != nil {
		t.Fatal(err)
	}
	objs = append(objs, o)
	all = append(append([]string(nil), nss...), extra...)
	took := waitConverged(t, e, m, rec, identity, h2, all, objs)
	t.Logf("fault 2: steady state confirmed %s after etcd was up; rotation and a new object converged %s after the change (%s after etcd was up)",
		steadyAgain, took, time.Since(etcdUp).Round(time.Millisecond))
	t.Logf("fault 2 writes: before the fault %s; at the end %s", before, writesReport(m, len(objs)))

	s, err := takeSnapshot(ctx, e, identity, nss)
	if err != nil {
		t.Fatal(err)
	}
	if ok, msg := s.conditionAll(v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded); !ok {
		t.Errorf("the steady objects' ApplyJobSucceeded regressed: %s", msg)
	}
	requireOneJobEach(t, e, rec, objs, map[types.UID]int{})
	for _, path := range []string{"/readyz", "/healthz"} {
		if code, body := m.Get(path); code != http.StatusOK {
			t.Errorf("manager %s: %d %s", path, code, body)
		}
	}
	requireAlive(t, m, "at the end")
}

// apiReadyz returns kube-apiserver's /readyz status code (0 when it does
// not answer).
func apiReadyz(e *framework.Env) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var code int
	e.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).StatusCode(&code)
	return code
}
