package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// podDeletedMidRun proves O2's "deleted" interruption on the real node, as
// an operator does it: `kubectl delete pod` of a running apply. The kubelet
// stops the runner (SIGTERM), the runner stops Terraform and exits 143, and
// the pod is gone before the manager could read it; the Job's pod failure
// policy fails the Job with reason PodFailurePolicy, which the Job keeps.
// The run is recorded as interrupted and the next attempt starts at once,
// not after the 1-minute backoff of a failure. The module's rotation probe
// keeps the first apply running until the pod is deleted; the spec then
// drops the probe, the object becomes Ready, and its deletion destroys it.
func (e *env) podDeletedMidRun(ctx context.Context, t *testing.T) {
	const name = "demo-interrupted"
	vars := map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "rotation_wait_seconds": 120}
	c := e.createTenantCluster(ctx, t, "O2", name, moduleImage, vars)
	first := e.waitJob(ctx, t, c.UID, v1alpha1.JobActionApply, 1)
	id := moduleID(tenant, name)
	e.waitFor(ctx, t, 3*time.Minute, "O2: the first apply created its resource and waits in its rotation probe", func() (bool, string) {
		for _, r := range e.cloud.resources(ctx, t, tokenB) {
			if r.ID == id {
				return true, ""
			}
		}
		return false, "pods: " + e.podSummary(ctx, tenant)
	})
	pod := e.jobPodName(ctx, t, first.Name)
	deleted := time.Now()
	e.kubectl(ctx, t, "-n", tenant, "delete", "pod", pod, "--wait=true")
	t.Logf("O2: kubectl delete pod %s returned after %s", pod, time.Since(deleted).Round(time.Millisecond))

	clusters := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant)
	var run *v1alpha1.LastRun
	e.waitFor(ctx, t, 2*time.Minute, "O2: the deleted pod's run recorded", func() (bool, string) {
		got, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		run = got.Status.LastRun
		return run != nil && run.Job == first.Name, fmt.Sprintf("lastRun %+v; pods: %s", run, e.podSummary(ctx, tenant))
	})
	if run.Error == nil || run.Error.Kind != v1alpha1.RunErrorInterrupted {
		t.Fatalf("O2: the deleted pod's run is recorded as %+v, error %+v; want interrupted", run, run.Error)
	}
	t.Logf("O2: recorded %s after the deletion: %s", time.Since(deleted).Round(time.Second), run.Error.Summary)
	second := e.waitJob(ctx, t, c.UID, v1alpha1.JobActionApply, 2)
	done := e.job(ctx, t, first.Name)
	finished := finishTime(done)
	t.Logf("O2: the first Job finished %s after the deletion (%s); the second Job was created %s after that",
		finished.Sub(deleted).Round(time.Second), jobState(done), second.CreationTimestamp.Sub(finished).Round(time.Second))
	if !second.CreationTimestamp.Time.Before(finished.Add(time.Minute)) {
		t.Errorf("O2: the second Job came %s after the first finished: the 1-minute backoff of a failure, not at once", second.CreationTimestamp.Sub(finished))
	}
	if n := second.Annotations[v1alpha1.AnnotationJobInterruptions]; n != "1" {
		t.Errorf("O2: the second Job carries %s=%q, want 1 (not counted as a failure)", v1alpha1.AnnotationJobInterruptions, n)
	}

	// Without the probe the next generation applies; then the deletion
	// destroys what the runs made.
	vars["rotation_wait_seconds"] = 0
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Variables = variables(t, vars) })
	e.waitTenantClusterReady(ctx, t, name, name+" Ready without the rotation probe")
	e.deleteTenantCluster(ctx, t, name)
}

// jobPodName returns the name of the pod Job job controls.
func (e *env) jobPodName(ctx context.Context, t *testing.T, job string) string {
	t.Helper()
	var name string
	e.waitFor(ctx, t, time.Minute, "the pod of Job "+job, func() (bool, string) {
		pods, err := e.kube.CoreV1().Pods(tenant).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				name = p.Name
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(pods.Items))
	})
	return name
}

// finishTime is when the Job's Failed or Complete condition became true;
// zero while it runs.
func finishTime(j *batchv1.Job) time.Time {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
