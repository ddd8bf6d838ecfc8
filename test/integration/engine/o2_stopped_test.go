package engine

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework"
)

// TestStoppedPodRunRetriedAtOnce proves SPEC O2 (A3-86) for a pod deleted
// while it ran, as `kubectl delete pod` does it on a node: the kubelet
// stops the runner, which exits 143 (stopped by SIGTERM), and the pod is
// gone before anyone reads it. The test writes what the kubelet leaves
// (phase Failed, exit code 143, no result document) and deletes the pod at
// once. The real Job controller fails the Job through the pod failure
// policy's exit-code rule, whose reason the Job keeps after the pod is gone,
// so the manager records the run as interrupted and starts the next
// attempt at once, not after the failure's backoff. Without the policy
// the Job says BackoffLimitExceeded and the pod is gone: an unknown
// failure that waits a minute.
func TestStoppedPodRunRetriedAtOnce(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))
	c := f.Cluster(ns, "stopped-pod", id)
	first := f.WaitJob(ns, v1alpha1.JobActionApply)
	pod := jobPod(f, ns, first)

	endPod(f, ns, first, 143, "", "")
	if err := f.Env.Kube.CoreV1().Pods(ns).Delete(f.Ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	l := waitLastRun(f, ns, c.Name, first.Name)
	if l.Error == nil || l.Error.Kind != v1alpha1.RunErrorInterrupted {
		t.Fatalf("O2: status.lastRun %+v, error %+v; want kind interrupted", l, l.Error)
	}
	if !strings.Contains(l.Error.Summary, "deleted") {
		t.Errorf("O2: the summary %q should say the pod was deleted or stopped", l.Error.Summary)
	}
	waitRetriedAtOnce(f, ns, c, first)
	t.Logf("O2: %s", l.Error.Summary)
}

// waitRetriedAtOnce waits for the second apply Job of c after its first,
// interrupted one and checks O2's promise: status.lastApply records the
// first run (attempt 1), the second was created before the first
// failure's backoff ended, and it carries captf.io/interruptions=1.
func waitRetriedAtOnce(f *framework.Fixture, ns string, c *v1alpha1.TerraformCluster, first batchv1.Job) batchv1.Job {
	t := f.T
	t.Helper()
	second := jobs.AttemptName(v1alpha1.KindTerraformCluster, c.Name, c.UID, v1alpha1.JobActionApply, 1, 2)
	var next batchv1.Job
	f.WaitFor("the second apply Job", func() (bool, string) {
		for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
			if j.Name == second {
				next = j
				return true, ""
			}
		}
		return false, "not created"
	})
	failed := f.GetCluster(ns, c.Name).Status.LastApply
	if failed == nil || failed.JobName != first.Name || failed.Attempt != 1 {
		t.Fatalf("O2: lastApply %+v; want the first Job's run", failed)
	}
	if backoffEnd := failed.FinishTime.Add(time.Minute); !next.CreationTimestamp.Time.Before(backoffEnd) {
		t.Errorf("O2: the second Job was created at %s, after the first failure's backoff (%s): not at once", next.CreationTimestamp, backoffEnd)
	}
	t.Logf("O2: the interrupted run finished at %s; the next Job was created at %s", failed.FinishTime.UTC(), next.CreationTimestamp.UTC())
	if n := next.Annotations[v1alpha1.AnnotationJobInterruptions]; n != "1" {
		t.Errorf("O2: the second Job carries %s=%q, want 1", v1alpha1.AnnotationJobInterruptions, n)
	}
	return next
}
