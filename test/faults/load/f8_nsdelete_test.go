package load

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestNamespaceDeletionMidJobs is fault 8: a namespace is deleted while one
// object there is mid-apply (its apply Job running), one mid-destroy (its
// destroy Job running), one's destroy Job has just succeeded, and one never
// ran a Job. With kube-controller-manager running, the namespace controller
// deletes the Jobs and the mirror and marks the objects deleted. The
// manager must not error in a loop, and must not hold the namespace beyond
// what the captf.io/destroy finalizer requires: the object whose destroy
// succeeded and the one without a Job leave by themselves; the two whose
// destroy can no longer run (nothing can be created in a terminating
// namespace) stay until the operator sets captf.io/abandon-infrastructure,
// and then the namespace goes. What the operator sees is logged.
func TestNamespaceDeletionMidJobs(t *testing.T) {
	const sync = 5 * time.Second
	f := ownManager(t, "--sync-period="+sync.String(), "--identity-resync=3s", "--workers=4")
	e := f.Env
	ns := e.CreateNamespace(t, "doomed", nil)
	other := e.CreateNamespace(t, "bystander", nil)
	releaseAtEnd(f, ns, other)
	data := framework.DefaultData(secretValue)
	id := f.Identity(f.Source(data), framework.List(ns, other))
	midApply := mustCreate(f, kindCluster, ns, "mid-apply", id, moduleImage)
	midDestroy := mustCreate(f, kindMachine, ns, "mid-destroy", id, moduleImage)
	destroyed := mustCreate(f, kindPool, ns, "destroyed", id, moduleImage)
	noJob := mustCreate(f, kindCluster, ns, "no-job", id, "")
	bystander := mustCreate(f, kindCluster, other, "bystander", id, moduleImage)

	// Each object gets its apply Job; all but mid-apply's finish.
	applyJob := map[string]string{}
	f.WaitFor("apply Jobs", func() (bool, string) {
		for key, names := range jobsPerOwner(f, ns) {
			applyJob[key] = names[0]
		}
		return len(applyJob) == 3, fmt.Sprintf("%d apply Jobs", len(applyJob))
	})
	for _, w := range []workload{midDestroy, destroyed} {
		if err := e.FinishJob(f.Ctx, ns, applyJob[fmt.Sprintf("%s apply 1", w.UID)], ""); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(w.String(), conds(f, w), v1alpha1.ConditionApplyJobSucceeded, "True", v1alpha1.ReasonApplySucceeded)
	}
	f.WaitCondition(midApply.String(), conds(f, midApply), v1alpha1.ConditionApplyJobSucceeded, "Unknown", v1alpha1.ReasonJobRunning)
	bj := f.WaitJob(other, v1alpha1.JobActionApply)
	if err := e.FinishJob(f.Ctx, other, bj.Name, ""); err != nil {
		t.Fatal(err)
	}

	// mid-destroy and destroyed are deleted: their destroy Jobs start.
	for _, w := range []workload{midDestroy, destroyed} {
		if err := del(f.Ctx, e, w); err != nil {
			t.Fatal(err)
		}
	}
	destroyJob := map[string]string{}
	f.WaitFor("destroy Jobs", func() (bool, string) {
		for key, names := range jobsPerOwner(f, ns) {
			if strings.Contains(key, " destroy ") {
				destroyJob[strings.Fields(key)[0]] = names[0]
			}
		}
		return len(destroyJob) == 2, fmt.Sprintf("%d destroy Jobs", len(destroyJob))
	})
	f.WaitCondition(midDestroy.String(), conds(f, midDestroy), v1alpha1.ConditionApplyJobSucceeded, "Unknown", v1alpha1.ReasonJobRunning)

	// The destroy of "destroyed" succeeds, and at once the namespace is
	// deleted.
	if err := e.FinishJob(f.Ctx, ns, destroyJob[string(destroyed.UID)], ""); err != nil {
		t.Fatal(err)
	}
	logAt := len(f.Manager.Log())
	before := scrape(f)
	if err := e.Kube.CoreV1().Namespaces().Delete(f.Ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletedAt := time.Now()

	// The namespace controller removes the Jobs and the mirror; the objects
	// without a destroy to run leave. The test plays the kubelet for the
	// pods the namespace controller deletes (there is none here): a deleted
	// pod becomes Failed once its containers stopped. Without that, the
	// Jobs' pod failure policy (SPEC O2) keeps each deleted Pending pod
	// until the pod garbage collector marks it Failed, and the namespace
	// controller, which deletes pods first, backs off meanwhile: about
	// 5 minutes here (measured), docs/design.md.
	f.WaitFor("Jobs, mirror and the objects that need no destroy gone", func() (bool, string) {
		stopDeletedPods(f, ns)
		l, err := e.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(l.Items) > 0 {
			return false, fmt.Sprintf("%d Jobs left", len(l.Items))
		}
		for _, w := range []workload{destroyed, noJob} {
			s, err := get(f.Ctx, e, w)
			if err != nil {
				return false, err.Error()
			}
			if s.Exists {
				return false, w.String() + " still there, finalizers " + strings.Join(s.Finalizers, ",") + describeConds(s.Conditions)
			}
		}
		if m := f.Mirror(ns, id); m != nil {
			return false, "the mirror is still there"
		}
		return true, ""
	})
	t.Logf("nsdelete: %s after the namespace deletion: its Jobs and mirror are gone; %s (destroy Job succeeded just before) and %s (never ran a Job) left by themselves",
		since(deletedAt), destroyed, noJob)

	// The two whose destroy cannot run report it and keep the finalizer.
	stuck := []workload{midApply, midDestroy}
	seen := map[string][]metav1.Condition{}
	f.WaitFor("the stuck objects report why", func() (bool, string) {
		for _, w := range stuck {
			s, err := get(f.Ctx, e, w)
			if err != nil {
				return false, err.Error()
			}
			if !s.Exists || !s.Deleting || !framework.HasFinalizer(s.Finalizers) {
				return false, fmt.Sprintf("%s: exists %v deleting %v finalizers %v", w, s.Exists, s.Deleting, s.Finalizers)
			}
			c := meta.FindStatusCondition(s.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
			if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, v1alpha1.AnnotationAbandonInfrastructure+"="+string(w.UID)) {
				return false, w.String() + describeConds(s.Conditions)
			}
			seen[w.String()] = s.Conditions
		}
		return true, ""
	})
	for _, w := range stuck {
		t.Logf("nsdelete: operator sees on %s (deleting, finalizer %s kept):%s", w, v1alpha1.FinalizerDestroy, describeConds(seen[w.String()]))
		// docs/operator-guide.md and docs/design.md promise DestroyFailed
		// naming the abandon annotation; IdentityNotAllowed (V2) is for an
		// identity that no longer allows the namespace, and its advice to
		// allow the namespace again cannot help here.
		c := meta.FindStatusCondition(seen[w.String()], string(v1alpha1.ConditionApplyJobSucceeded))
		if c.Reason != string(v1alpha1.ReasonDestroyFailed) || strings.Contains(c.Message, "allow the namespace again") {
			t.Errorf("(docs/operator-guide.md, SPEC V2): %s in a terminating namespace reports ApplyJobSucceeded=%s/%s %q; want DestroyFailed naming the abandon annotation, without advice to allow the namespace again (it is allowed)",
				w, c.Status, c.Reason, c.Message)
		}
	}

	// No error loop: over a few sync periods, the stuck objects cost at
	// most a pass per resync.
	time.Sleep(sync) // let the first reactions land
	q0 := scrape(f)
	quietAt := len(f.Manager.Log())
	const periods = 3
	time.Sleep(periods * sync) // a measurement window, not a wait for a state
	q1 := scrape(f)
	dq := faultkit.Diff(q0, q1)
	quiet := factsOf(f.Manager.Log()[quietAt:])

	wr := dq.By("workqueue_retries_total", "name")
	t.Logf("nsdelete: over %d sync periods while the namespace waits: workqueue retries %s; reconciles requeued after an error %d; klog error lines %d; rejected events %d; mirror writes %s; API requests %.0f (%s)",
		periods, faultkit.FormatCounts(wr), quiet.Requeues, quiet.Errors, quiet.RejectedEvents, faultkit.FormatCounts(dq.Writes()), dq.TotalRequests(), faultkit.FormatCounts(dq.Requests()))
	// A pass per object per resync, at most: anything more is a loop.
	if bound := float64(len(stuck) * (periods + 1)); float64(quiet.Requeues) > bound || wr["terraformcluster"]+wr["terraformmachine"]+wr["terraformmachinepool"] > bound {
		t.Errorf("error loop: %d requeues after errors, workload retries %s in %d sync periods for %d stuck objects (bound %.0f):\n%s",
			quiet.Requeues, faultkit.FormatCounts(wr), periods, len(stuck), bound, grep(f.Manager.Log()[quietAt:], "Requeuing", 10))
	}
	if w := dq.Writes(); w["created"]+w["updated"]+w["error"] > float64(len(stuck)*(periods+1)) {
		t.Errorf("mirror write loop in the terminating namespace: %s", faultkit.FormatCounts(w))
	}
	nsObj, err := e.Kube.CoreV1().Namespaces().Get(f.Ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the namespace must wait for the finalizers: %v", err)
	}
	t.Logf("nsdelete: operator sees on namespace %s: phase %s%s", ns, nsObj.Status.Phase, describeNSConds(nsObj.Status.Conditions))
	if evs, err := e.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{}); err == nil {
		t.Logf("nsdelete: events in the namespace:%s", describeEvents(evs.Items))
	}
	rejected := grep(f.Manager.Log()[logAt:], "rejected event", 5)
	t.Logf("nsdelete: events the API server refused in the terminating namespace (manager log): %d\n%s", factsOf(f.Manager.Log()[logAt:]).RejectedEvents, rejected)

	// The operator abandons the two: the namespace goes.
	abandonAt := time.Now()
	for _, w := range stuck {
		if err := annotate(f.Ctx, e, w, v1alpha1.AnnotationAbandonInfrastructure, string(w.UID)); err != nil {
			t.Fatalf("annotating %s: %v", w, err)
		}
	}
	f.WaitFor("namespace gone", func() (bool, string) {
		n, err := e.Kube.CoreV1().Namespaces().Get(f.Ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		var left []string
		for _, w := range stuck {
			if s, _ := get(f.Ctx, e, w); s.Exists {
				left = append(left, w.String())
			}
		}
		return false, fmt.Sprintf("phase %s, objects left %v%s", n.Status.Phase, left, describeNSConds(n.Status.Conditions))
	})
	t.Logf("nsdelete: namespace gone %s after the abandon annotations (%s after its deletion)", since(abandonAt), since(deletedAt))
	f.WaitIdentityNamespaces(id, []string{other})
	after := scrape(f)
	all := faultkit.Diff(before, after)
	t.Logf("nsdelete: from the namespace deletion to its end: mirror writes %s; workqueue retries %s; API requests %.0f; log: %+v",
		faultkit.FormatCounts(all.Writes()), faultkit.FormatCounts(all.By("workqueue_retries_total", "name")), all.TotalRequests(), factsOf(f.Manager.Log()[logAt:]))

	// The bystander namespace is untouched.
	f.WaitCondition(bystander.String(), conds(f, bystander), v1alpha1.ConditionReady, "True", v1alpha1.ReasonReady)
	if m := f.Mirror(other, id); m == nil || m.Annotations[v1alpha1.AnnotationSourceHash] != framework.HashOf(data) {
		t.Errorf("the bystander namespace's mirror must stay current")
	}
	requireLogClean(f, secretValue, framework.HashOf(data))
}

func describeNSConds(cs []corev1.NamespaceCondition) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Status == corev1.ConditionTrue {
			fmt.Fprintf(&b, "\n    %s=%s/%s: %s", c.Type, c.Status, c.Reason, c.Message)
		}
	}
	return b.String()
}

func describeEvents(evs []corev1.Event) string {
	sort.Slice(evs, func(i, j int) bool { return evs[i].LastTimestamp.Before(&evs[j].LastTimestamp) })
	var b strings.Builder
	for _, ev := range evs {
		if ev.Source.Component != "captf-manager" && ev.ReportingController != "captf-manager" {
			continue
		}
		fmt.Fprintf(&b, "\n    %s %s %s/%s: %s", ev.Type, ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
	return b.String()
}

// TestNamespaceDeletionDestroySucceededWhileManagerDown is the other order
// of fault 8's race: an object's destroy Job succeeds while the manager is
// down, and the namespace is deleted before the manager comes back, so the
// namespace controller deletes the finished Job before the manager has seen
// it. The destroy ran: the object should leave by itself (J8).
func TestNamespaceDeletionDestroySucceededWhileManagerDown(t *testing.T) {
	const sync = 5 * time.Second
	args := []string{"--sync-period=" + sync.String(), "--identity-resync=3s", "--workers=4"}
	f := ownManager(t, args...)
	e := f.Env
	ns := e.CreateNamespace(t, "doomed", nil)
	releaseAtEnd(f, ns)
	data := framework.DefaultData(secretValue)
	id := f.Identity(f.Source(data), framework.List(ns))
	w := mustCreate(f, kindPool, ns, "destroyed", id, moduleImage)
	apply := f.WaitJob(ns, v1alpha1.JobActionApply)
	if err := e.FinishJob(f.Ctx, ns, apply.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(w.String(), conds(f, w), v1alpha1.ConditionApplyJobSucceeded, "True", v1alpha1.ReasonApplySucceeded)
	if err := del(f.Ctx, e, w); err != nil {
		t.Fatal(err)
	}
	destroy := f.WaitJob(ns, v1alpha1.JobActionDestroy)
	f.WaitCondition(w.String(), conds(f, w), v1alpha1.ConditionApplyJobSucceeded, "Unknown", v1alpha1.ReasonJobRunning)
	requireLogClean(f, secretValue, framework.HashOf(data))

	f.Manager.Stop(t)
	if err := e.FinishJob(f.Ctx, ns, destroy.Name, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.Kube.CoreV1().Namespaces().Delete(f.Ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the namespace controller deleted the Jobs", func() (bool, string) {
		l, err := e.Kube.BatchV1().Jobs(ns).List(f.Ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 0, fmt.Sprintf("%d Jobs left", len(l.Items))
	})
	f.Manager = e.StartManager(t, framework.ManagerOptions{User: "system:serviceaccount:captf-system:captf-manager", Args: args})
	restarted := time.Now()

	// Poll for the object's departure over a few sync periods.
	var last state
	deadline := time.Now().Add(4 * sync)
	for time.Now().Before(deadline) {
		s, err := get(f.Ctx, e, w)
		if err != nil {
			t.Fatal(err)
		}
		if last = s; !s.Exists {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	// The destroy Job succeeded while the manager was down, and the
	// namespace's deletion took it before the manager could read its
	// outcome. Nothing records that outcome, and nothing can be created in
	// the namespace, so the manager must not guess: the object keeps its
	// finalizer and says the outcome is unknown and how to release it
	// (docs/reliability.md). The abandon annotation then lets it go.
	if last.Exists {
		c := meta.FindStatusCondition(last.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		if c == nil || c.Reason != string(v1alpha1.ReasonDestroyFailed) || !strings.Contains(c.Message, "outcome is unknown") ||
			!strings.Contains(c.Message, v1alpha1.AnnotationAbandonInfrastructure+"="+string(w.UID)) {
			t.Errorf("%s after the restart: want DestroyFailed saying the outcome is unknown and naming the abandon annotation:%s",
				w, describeConds(last.Conditions))
		}
		t.Logf("nsdelete: operator sees on %s after the restart:%s", w, describeConds(last.Conditions))
		if err := annotate(f.Ctx, e, w, v1alpha1.AnnotationAbandonInfrastructure, string(w.UID)); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("nsdelete: %s left by itself %s after the manager restarted", w, since(restarted))
	}
	f.WaitFor("namespace gone", func() (bool, string) {
		_, err := e.Kube.CoreV1().Namespaces().Get(f.Ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	requireLogClean(f, secretValue, framework.HashOf(data))
}

// stopDeletedPods does what a kubelet does for the deleted pods of ns that
// it ran: once their containers stopped, their phase is Failed.
func stopDeletedPods(f *framework.Fixture, ns string) {
	pods, err := f.Env.Kube.CoreV1().Pods(ns).List(f.Ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			continue
		}
		p.Status.Phase = corev1.PodFailed
		_, _ = f.Env.Kube.CoreV1().Pods(ns).UpdateStatus(f.Ctx, p, metav1.UpdateOptions{}) // a conflict is tried at the next poll
	}
}
