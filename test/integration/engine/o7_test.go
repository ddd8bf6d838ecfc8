package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
	"github.com/captf/captf/test/integration/framework"
)

// driftIntervalSeconds is the test cluster's spec.drift.intervalSeconds:
// long enough for a steady window of several sync periods after a check,
// short enough for a test.
const driftIntervalSeconds = 30

// TestDriftO7 proves SPEC O7 on the API server, with the real Job
// controller and the manager's shipped RBAC: after a successful apply, no
// drift Job is created before spec.drift.intervalSeconds has passed since
// the apply finished (the Job's creationTimestamp against
// status.lastApply.finishTime, both the API server's clock), then one is,
// running `captf runner drift`; its pod ends with a result document that
// found drift, and the manager records status.lastDriftCheck,
// status.lastRun.drift and DriftDetected=True/DriftReported naming the
// resource, leaves ApplyJobSucceeded True, and writes nothing more until
// the next check is due. A TerraformMachine's spec.drift.action Remediate
// is refused by the CRD (machines report only).
func TestDriftO7(t *testing.T) {
	f := setup(t)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	id := f.Identity(f.Source(framework.DefaultData(secretValue)), framework.List(ns))

	m := &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "remediates", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformMachineSpec{Drift: &v1alpha1.DriftSpec{Action: v1alpha1.DriftRemediate}}}
	_, err := f.Env.Captf.InfrastructureV1alpha1().TerraformMachines(ns).Create(f.Ctx, m, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "machines report drift only") {
		t.Fatalf("O7: a machine's spec.drift.action Remediate must be refused, got %v", err)
	}

	c := &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "o7", Annotations: framework.Standalone()},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: id}, Source: v1alpha1.SourceSpec{Image: "example.com/module:1"},
			Drift: &v1alpha1.DriftSpec{IntervalSeconds: ptr.To[int32](driftIntervalSeconds)}}}
	if c, err = f.Env.Captf.InfrastructureV1alpha1().TerraformClusters(ns).Create(f.Ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply := f.WaitJob(ns, v1alpha1.JobActionApply)
	endPod(f, ns, apply, 0, resultDoc(t, &runresult.Result{Operation: runresult.OperationApply}), "")
	var applied *v1alpha1.RunRecord
	f.WaitFor("status.lastApply", func() (bool, string) {
		applied = f.GetCluster(ns, c.Name).Status.LastApply
		return applied != nil && applied.Outcome == v1alpha1.RunSucceeded, fmt.Sprintf("%+v", applied)
	})

	// The first drift Job: not before the interval.
	var dj batchv1.Job
	eventuallyWithin(t, time.Duration(driftIntervalSeconds)*time.Second+settle, func() (bool, string) {
		js := f.Jobs(ns, v1alpha1.JobActionDrift)
		if len(js) > 0 {
			dj = js[0]
		}
		return len(js) == 1, fmt.Sprintf("%d drift Jobs", len(js))
	})
	if early := dj.CreationTimestamp.Sub(applied.FinishTime.Time); early < driftIntervalSeconds*time.Second {
		t.Fatalf("O7: drift Job %s created %s after the apply finished, before the %ds interval", dj.Name, early, driftIntervalSeconds)
	}
	if cmd := strings.Join(dj.Spec.Template.Spec.Containers[0].Command, " "); !strings.Contains(cmd, "captf runner drift ") {
		t.Fatalf("O7: the drift Job runs %q", cmd)
	}

	f.WaitFor("the drift Job's run Secret", func() (bool, string) {
		_, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, jobs.RunSecretName(dj.Name), metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	endPod(f, ns, dj, 0, resultDoc(t, &runresult.Result{Operation: runresult.OperationDrift,
		Steps: []runresult.Step{{Name: "init"}, {Name: "refresh"}, {Name: "plan", ExitCode: 2}},
		Drift: &runresult.Drift{Changes: runresult.Changes{Update: 1}, Resources: []string{"terraform_data.server"}}}), "")
	cond := f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionDriftDetected, metav1.ConditionTrue, v1alpha1.ReasonDriftReported)
	if !strings.Contains(cond.Message, "terraform_data.server") {
		t.Fatalf("O7: DriftDetected does not name the resource: %s", cond.Message)
	}
	// K5: the finished drift Job's run Secret (its inputs) is deleted
	// though the Job stays.
	f.WaitFor("the drift Job's run Secret deleted", func() (bool, string) {
		_, err := f.Env.Kube.CoreV1().Secrets(ns).Get(f.Ctx, jobs.RunSecretName(dj.Name), metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	got := f.GetCluster(ns, c.Name)
	st := got.Status
	if st.LastDriftCheck == nil || st.LastDriftCheck.JobName != dj.Name || st.LastRun == nil || st.LastRun.Drift == nil ||
		st.LastRun.Drift.Update != 1 || strings.Join(st.LastRun.Drift.Resources, ",") != "terraform_data.server" {
		t.Fatalf("O7: status.lastDriftCheck %+v, status.lastRun %+v", st.LastDriftCheck, st.LastRun)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// Steady until the next check is due: no write, no Job.
	due := st.LastDriftCheck.FinishTime.Add(driftIntervalSeconds * time.Second)
	window := min(3*syncPeriod, time.Until(due)-2*time.Second)
	if window < 2*syncPeriod {
		t.Logf("O7: the steady window (%s) is under two sync periods on this machine; not checked", window)
		return
	}
	time.Sleep(window)
	if after := f.GetCluster(ns, c.Name); after.ResourceVersion != got.ResourceVersion {
		t.Fatalf("O7: a pass before the next check wrote the object: %+v", after.Status.Conditions)
	}
	if js := f.Jobs(ns, v1alpha1.JobActionDrift); len(js) != 1 {
		t.Fatalf("O7: %d drift Jobs before the next interval", len(js))
	}
}

// resultDoc marshals r as the runner writes it.
func resultDoc(t *testing.T, r *runresult.Result) string {
	t.Helper()
	r.Version = runresult.Version
	b, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventuallyWithin polls cond until it holds or d passes.
func eventuallyWithin(t *testing.T, d time.Duration, cond func() (bool, string)) {
	t.Helper()
	framework.Eventually(t, d, cond)
}
