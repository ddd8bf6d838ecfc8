package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/integration/framework"
)

// TestLastRunO1 proves SPEC O1 on the API server, with the real Job
// controller and the manager's shipped RBAC (X2: an uncached pod list):
// the pod the Job controller made ends as the kubelet would report it
// (there is no kubelet: the test writes its status), with the runner's
// result document as its termination message. The Job controller fails the
// Job; the manager records status.lastRun once, with the steps, the exit
// code and the error, and a RunFinished event, and the steady passes after
// write nothing. A pod that carries the Job's label but that another
// object controls is ignored; a hostile message (far over the kubelet's
// 4 KiB) is recorded once as unreadable and the manager carries on.
func TestLastRunO1(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))

	doc, err := (&runresult.Result{
		Version: runresult.Version, Operation: runresult.OperationApply, Image: "registry.example/m:1", Runtime: "OpenTofu v1.12.6",
		Steps: []runresult.Step{{Name: "setup", DurationMilliseconds: 5}, {Name: "init", DurationMilliseconds: 1200}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 800}},
		Error: &runresult.Error{Kind: runresult.KindStep, Step: "apply", Tail: "Error: creating network: quota exceeded"},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}

	c := f.Cluster(ns, "o1", id)
	j := f.WaitJob(ns, v1alpha1.JobActionApply)
	forgeClaim(f, ns, j, strings.ReplaceAll(string(doc), "quota exceeded", "forged"))
	failPod(f, ns, j, string(doc))
	l := waitLastRun(f, ns, c.Name, j.Name)
	if l.Outcome != v1alpha1.RunFailed || len(l.Steps) != 3 || l.Steps[2] != (v1alpha1.RunStep{Name: "apply", ExitCode: 1, DurationMilliseconds: 800}) ||
		l.Error == nil || l.Error.Kind != v1alpha1.RunErrorStep || l.Error.Step != "apply" || ptr.Deref(l.Error.ExitCode, 0) != 1 ||
		l.Error.Summary != "Error: creating network: quota exceeded" || l.RuntimeVersion != "OpenTofu v1.12.6" {
		t.Fatalf("O1: status.lastRun %+v, error %+v", l, l.Error)
	}
	requireSteadyOnce(f, ns, c.Name)

	// A hostile message: refused whole, recorded once.
	c2 := f.Cluster(ns, "o1-hostile", id)
	var j2 batchv1.Job
	f.WaitFor("the hostile cluster's apply Job", func() (bool, string) {
		for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if metav1.IsControlledBy(&x, c2) {
				j2 = x
				return true, ""
			}
		}
		return false, "none"
	})
	failPod(f, ns, j2, `{"version":1,"error":{"tail":"`+strings.Repeat("A", 512<<10)+`"}}`)
	l2 := waitLastRun(f, ns, c2.Name, j2.Name)
	if l2.Error == nil || l2.Error.Kind != v1alpha1.RunErrorUnknown || !strings.Contains(l2.Error.Summary, "result document") ||
		strings.Contains(l2.Error.Summary, "AAAA") || len(l2.Steps) != 0 {
		t.Fatalf("O1: a hostile message must be recorded as unreadable: %+v, error %+v", l2, l2.Error)
	}
	requireSteadyOnce(f, ns, c2.Name)
}

// waitLastRun waits for status.lastRun of the cluster to describe Job job.
func waitLastRun(f *framework.Fixture, ns, name, job string) *v1alpha1.LastRun {
	f.T.Helper()
	var l *v1alpha1.LastRun
	f.WaitFor("status.lastRun of "+job, func() (bool, string) {
		l = f.GetCluster(ns, name).Status.LastRun
		return l != nil && l.Job == job, fmt.Sprintf("%+v", l)
	})
	return l
}

// requireSteadyOnce checks that over three sync periods the cluster's
// object is not written again and that it has one RunFinished event.
func requireSteadyOnce(f *framework.Fixture, ns, name string) {
	f.T.Helper()
	before := f.GetCluster(ns, name)
	time.Sleep(3 * syncPeriod)
	after := f.GetCluster(ns, name)
	if after.ResourceVersion != before.ResourceVersion {
		f.T.Fatalf("O1: a steady pass wrote the object: lastRun %+v, then %+v", before.Status.LastRun, after.Status.LastRun)
	}
	evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.name", name), fields.OneTermEqualSelector("reason", v1alpha1.EventRunFinished)).String()})
	if err != nil {
		f.T.Fatal(err)
	}
	n := int32(0)
	for _, e := range evs.Items {
		n += max(e.Count, 1)
	}
	if n != 1 {
		f.T.Fatalf("O1: want one RunFinished event on %s, got %d", name, n)
	}
}

// jobPod waits for the pod the Job controller made for j.
func jobPod(f *framework.Fixture, ns string, j batchv1.Job) *corev1.Pod {
	f.T.Helper()
	var pod *corev1.Pod
	f.WaitFor("the pod of Job "+j.Name, func() (bool, string) {
		l, err := f.Env.Kube.CoreV1().Pods(ns).List(f.Ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + j.Name})
		if err != nil {
			return false, err.Error()
		}
		for i := range l.Items {
			if metav1.IsControlledBy(&l.Items[i], &j) {
				pod = &l.Items[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(l.Items))
	})
	return pod
}

// failPod ends the Job's pod as the kubelet reports a failed run: phase
// Failed, the Terraform container terminated with exit code 1 and message.
func failPod(f *framework.Fixture, ns string, j batchv1.Job, message string) {
	f.T.Helper()
	endPod(f, ns, j, 1, message, "")
}

// endPod ends the Job's pod as the kubelet reports a run that exited with
// code (phase Succeeded for 0, else Failed), the Terraform container's
// termination message and imageID.
func endPod(f *framework.Fixture, ns string, j batchv1.Job, code int32, message, imageID string) {
	f.T.Helper()
	setPodStatus(f, ns, j, func(p *corev1.Pod) {
		terminated := func(c string, code int32, msg string) corev1.ContainerStatus {
			return corev1.ContainerStatus{Name: c, Image: "registry.example/m:1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: code, Reason: "Error", Message: msg, StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}
		}
		p.Status.Phase = corev1.PodFailed
		if code == 0 {
			p.Status.Phase = corev1.PodSucceeded
		}
		p.Status.InitContainerStatuses = nil
		for _, ic := range p.Spec.InitContainers {
			s := terminated(ic.Name, 0, "")
			s.State.Terminated.Reason = "Completed"
			p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, s)
		}
		main := terminated(jobs.ContainerName, code, message)
		main.ImageID = imageID
		if code == 0 {
			main.State.Terminated.Reason = "Completed"
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{main}
	})
}

// setPodStatus waits for the pod the Job controller made for j and writes
// its status as edit makes it, as the kubelet would.
func setPodStatus(f *framework.Fixture, ns string, j batchv1.Job, edit func(*corev1.Pod)) {
	f.T.Helper()
	name := jobPod(f, ns, j).Name
	pods := f.Env.Kube.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(f.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		edit(p)
		_, err = pods.UpdateStatus(f.Ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.T.Fatal(err)
	}
}

// forgeClaim creates, as a tenant can, a pod with the Job's controller-uid
// label whose controller is another object (a ConfigMap: the Job
// controller does not adopt a pod something else controls), ended with a
// forged document.
func forgeClaim(f *framework.Fixture, ns string, j batchv1.Job, message string) {
	f.T.Helper()
	owner, err := f.Env.Kube.CoreV1().ConfigMaps(ns).Create(f.Ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forger"}}, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	real := jobPod(f, ns, j)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "forged-claim", Namespace: ns,
			Labels:          map[string]string{batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Spec: *real.Spec.DeepCopy(),
	}
	p.Spec.NodeName = ""
	created, err := f.Env.Kube.CoreV1().Pods(ns).Create(f.Ctx, p, metav1.CreateOptions{})
	if err != nil {
		f.T.Fatal(err)
	}
	created.Status.Phase = corev1.PodFailed
	created.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 3, Reason: "Error", Message: message}}}}
	if _, err := f.Env.Kube.CoreV1().Pods(ns).UpdateStatus(f.Ctx, created, metav1.UpdateOptions{}); err != nil {
		f.T.Fatal(err)
	}
}
