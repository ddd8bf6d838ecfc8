package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// failMessage is the e2e module's error when its variable fail_plan is
// set (test/e2e/module: a validation, so the plan inside apply fails).
const failMessage = "refuses to plan while fail_plan is set"

// failedRun proves O1 on the real node: a module that fails at plan is
// explained by status.lastRun (the failing step, its exit code and the end
// of Terraform's error) and a Warning RunFinished event, and kubectl
// describe still shows it after the Job is gone (deleted here, as pruning
// would). The spec is then fixed: the next apply succeeds, and the
// deletion destroys what it made.
func (e *env) failedRun(ctx context.Context, t *testing.T) {
	const name = "demo-fails"
	vars := map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint, "fail_plan": "yes"}
	c := e.createTenantCluster(ctx, t, "O1", name, moduleImage, vars)
	clusters := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant)
	var run *v1alpha1.LastRun
	e.waitFor(ctx, t, 5*time.Minute, "O1: the failed apply recorded in status.lastRun", func() (bool, string) {
		got, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		run = got.Status.LastRun
		return run != nil && run.Outcome == v1alpha1.RunFailed, fmt.Sprintf("lastRun %+v; %v; pods: %s", run, got.Status.Conditions, e.podSummary(ctx, tenant))
	})
	if run.Error == nil {
		t.Fatalf("O1: the failed run has no error: %+v", run)
	}
	t.Logf("O1: lastRun.error: kind %s, step %s, exit code %v, summary %q", run.Error.Kind, run.Error.Step, deref(run.Error.ExitCode), run.Error.Summary)
	if run.Error.Kind != v1alpha1.RunErrorStep || run.Error.Step != "apply" || deref(run.Error.ExitCode) != 1 {
		t.Errorf("O1: want a step error of apply with exit code 1, got %+v", *run.Error)
	}
	if !strings.Contains(run.Error.Summary, failMessage) {
		t.Errorf("O1: the error summary does not carry Terraform's error %q: %q", failMessage, run.Error.Summary)
	}
	steps := map[string]int32{}
	for _, s := range run.Steps {
		steps[s.Name] = s.ExitCode
	}
	if code, ok := steps["init"]; !ok || code != 0 {
		t.Errorf("O1: the steps do not show init succeeding: %+v", run.Steps)
	}
	e.waitFor(ctx, t, time.Minute, "O1: a Warning RunFinished event on the cluster", func() (bool, string) {
		evs, err := e.kube.CoreV1().Events(tenant).List(ctx, metav1.ListOptions{FieldSelector: "reason=RunFinished,involvedObject.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		for _, ev := range evs.Items {
			if ev.Type == "Warning" && strings.Contains(ev.Message, "apply") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d RunFinished events", len(evs.Items))
	})

	// The Job goes (pruning would take it after later runs): the record
	// stays, and kubectl describe shows why the run failed.
	for _, j := range e.jobsOf(ctx, t, c.UID, "") {
		e.kubectl(ctx, t, "delete", "job", "-n", tenant, j.Name, "--wait=true")
	}
	out := e.kubectl(ctx, t, "describe", "terraformcluster", "-n", tenant, name)
	for _, want := range []string{failMessage, "Last Run", "apply"} {
		if !strings.Contains(out, want) {
			t.Errorf("O1: kubectl describe after the Job was deleted does not show %q:\n%s", want, out)
		}
	}

	// Fixed: the next generation applies, and the deletion destroys it.
	delete(vars, "fail_plan")
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Variables = variables(t, vars) })
	e.waitTenantClusterReady(ctx, t, name, "the fixed cluster Ready")
	e.deleteTenantCluster(ctx, t, name)
}

func deref(p *int32) int32 {
	if p == nil {
		return -1
	}
	return *p
}

// unpullableImage is a module image no registry serves.
const unpullableImage = "captf.local/no-such-module:dev"

// imagePullFailed proves O2's ImagePullFailed on the real node: a cluster
// whose module image cannot be pulled is reported within a minute of its
// Job's creation (the SPEC's bound; the test allows two and logs the
// figure), naming the image, instead of after the Job's deadline; the
// spec fixed, the next generation applies, and the deletion destroys it.
func (e *env) imagePullFailed(ctx context.Context, t *testing.T) {
	const name = "demo-nopull"
	c := e.createTenantCluster(ctx, t, "O2", name, unpullableImage, map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint})
	job := e.waitJob(ctx, t, c.UID, v1alpha1.JobActionApply, 1)
	clusters := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant)
	var cond *metav1.Condition
	e.waitFor(ctx, t, 2*time.Minute, "O2: ImagePullFailed", func() (bool, string) {
		got, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond = meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		return cond != nil && cond.Reason == string(v1alpha1.ReasonImagePullFailed), fmt.Sprintf("%v; pods: %s", got.Status.Conditions, e.podSummary(ctx, tenant))
	})
	t.Logf("O2: ImagePullFailed %s after the Job %s was created: %s", time.Since(job.CreationTimestamp.Time).Round(time.Second), job.Name, cond.Message)
	if cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, unpullableImage) {
		t.Errorf("O2: want ApplyJobSucceeded=False naming %s, got %s: %s", unpullableImage, cond.Status, cond.Message)
	}
	got, err := clusters.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r := got.Status.LastRun; r == nil || r.Error == nil || r.Error.Kind != v1alpha1.RunErrorImagePull {
		t.Errorf("O2: status.lastRun does not record an image-pull error: %+v", r)
	}

	// Fixed: the next generation applies, and the deletion destroys it.
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Source.Image = moduleImage })
	e.waitTenantClusterReady(ctx, t, name, name+" Ready with the module image")
	e.deleteTenantCluster(ctx, t, name)
}

// deleteTenantCluster deletes the tenant's TerraformCluster name, waits
// until it is gone, and checks that its fake-cloud resource went with it.
func (e *env) deleteTenantCluster(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	clusters := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant)
	if err := clusters.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(ctx, t, 5*time.Minute, name+" destroyed and gone", func() (bool, string) {
		_, err := clusters.Get(ctx, name, metav1.GetOptions{})
		return err != nil, "still there; pods: " + e.podSummary(ctx, tenant)
	})
	id := moduleID(tenant, name)
	for _, r := range e.cloud.resources(ctx, t, tokenB) {
		if r.ID == id {
			t.Errorf("the fake cloud still holds %s after %s's deletion", id, name)
		}
	}
}

// createTenantCluster creates a standalone TerraformCluster name in the
// tenant's namespace with the e2e identity, image and variables vars; rule
// names the SPEC rule in a failure; edits change the object first.
func (e *env) createTenantCluster(ctx context.Context, t *testing.T, rule, name, image string, vars map[string]any, edits ...func(*v1alpha1.TerraformCluster)) *v1alpha1.TerraformCluster {
	t.Helper()
	c := &v1alpha1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, Annotations: map[string]string{v1alpha1.AnnotationStandalone: v1alpha1.LabelTrue}},
		Spec: v1alpha1.TerraformClusterSpec{
			IdentityRef: &v1alpha1.IdentityReference{Name: identity},
			Source:      v1alpha1.SourceSpec{Image: image},
			Variables:   variables(t, vars),
		},
	}
	for _, edit := range edits {
		edit(c)
	}
	c, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s: creating %s: %v", rule, name, err)
	}
	return c
}

// waitTenantClusterReady waits until the tenant's TerraformCluster name
// is Ready.
func (e *env) waitTenantClusterReady(ctx context.Context, t *testing.T, name, what string) {
	t.Helper()
	e.waitFor(ctx, t, 5*time.Minute, what, func() (bool, string) {
		got, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, string(v1alpha1.ConditionReady)), fmt.Sprintf("%v; pods: %s", got.Status.Conditions, e.podSummary(ctx, tenant))
	})
}

// variablesFromConfigMap proves O9 on the real node: a variable taken from
// a ConfigMap labelled captf.io/variables=true reaches the module (its
// credential_check asks the fake cloud whoami once with each credential
// path for each new value), and a change of the ConfigMap re-applies the
// cluster with the new value. The new value replaces the module's check
// resource, so the re-apply also proves O8's destructive guard (A3-64):
// the guarded apply applies nothing (no whoami) and stops at a
// Destructive TerraformPlan naming the replacement; approved, exactly that
// plan is applied.
func (e *env) variablesFromConfigMap(ctx context.Context, t *testing.T) {
	const name, source = "demo-vars", "e2e-shared-vars"
	cms := e.kube.CoreV1().ConfigMaps(tenant)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: source, Namespace: tenant, Labels: map[string]string{v1alpha1.LabelVariables: v1alpha1.LabelTrue}},
		Data: map[string]string{"credential_check": "first"}}
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	whoami := func(after int) []string {
		var sources []string
		for _, r := range (match{after: after, method: "GET", path: "/whoami"}).filter(e.cloud.seen(ctx, t)) {
			sources = append(sources, r.Source)
		}
		return sources
	}
	before := lastSeq(e.cloud.seen(ctx, t))
	e.createTenantCluster(ctx, t, "O9", name, moduleImage, map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint},
		func(c *v1alpha1.TerraformCluster) {
			c.Spec.VariablesFrom = []v1alpha1.VariablesFromSource{{ConfigMapRef: &v1alpha1.LocalObjectReference{Name: source}}}
		})
	e.waitTenantClusterReady(ctx, t, name, "O9: "+name+" Ready")
	if got := whoami(before); len(got) != 2 {
		t.Errorf("O9: the ConfigMap's credential_check did not reach the module: whoami calls %v, want one per credential path", got)
	}

	// The ConfigMap changes: the cluster re-applies with the new value.
	afterFirst := lastSeq(e.cloud.seen(ctx, t))
	cm.Data["credential_check"] = "second"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	plan := e.destructivePlan(ctx, t, name)
	if got := whoami(afterFirst); len(got) != 0 {
		t.Errorf("O8: the guarded apply ran the module's checks before the approval: whoami calls %v", got)
	}
	e.approvePlan(ctx, t, plan.Name)
	e.waitFor(ctx, t, 5*time.Minute, "O9: a re-apply with the ConfigMap's new value", func() (bool, string) {
		got := whoami(afterFirst)
		return len(got) == 2, fmt.Sprintf("whoami calls %v; pods: %s", got, e.podSummary(ctx, tenant))
	})
	e.waitFor(ctx, t, 2*time.Minute, "O8: TerraformPlan "+plan.Name+" Applied", func() (bool, string) {
		p, err := e.captf.InfrastructureV1alpha1().TerraformPlans(tenant).Get(ctx, plan.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1alpha1.PlanPhaseApplied, fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
	e.deleteTenantCluster(ctx, t, name)
	if err := cms.Delete(ctx, source, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// destructivePlan waits until the tenant's cluster name stops at a
// Destructive TerraformPlan (SPEC O8, A3-64): ApplyJobSucceeded
// DestructivePlanBlocked naming status.pendingPlanRef, a plan that
// replaces the module's credential check and nothing else, unapproved.
func (e *env) destructivePlan(ctx context.Context, t *testing.T, name string) *v1alpha1.TerraformPlan {
	t.Helper()
	_, ref := e.waitPendingPlan(ctx, t, name, v1alpha1.ReasonDestructivePlanBlocked)
	plan, err := e.captf.InfrastructureV1alpha1().TerraformPlans(tenant).Get(ctx, ref, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("O8: the pending plan %s: %v", ref, err)
	}
	s := plan.Spec.Summary
	want := []v1alpha1.PlanResourceChange{{Address: "terraform_data.credential_check[0]", Action: v1alpha1.PlanAction("replace")}}
	if plan.Spec.Reason != v1alpha1.PlanReasonDestructive || plan.Labels["captf.io/destructive"] != "true" || plan.Spec.Approved ||
		s.Replace != 1 || s.Delete != 0 || s.Create != 0 || !slices.Equal(s.Resources, want) {
		t.Errorf("O8: the Destructive plan %s: reason %s, labels %v, approved %t, summary %+v; want reason Destructive replacing only %v",
			ref, plan.Spec.Reason, plan.Labels, plan.Spec.Approved, s, want)
	}
	t.Logf("O8: %s stopped at Destructive plan %s (%d to replace), fingerprint %s", name, ref, s.Replace, plan.Spec.PlanHash)
	return plan
}

// approvePlan approves the tenant's TerraformPlan as the test's user: the
// captf webhook sets spec.approvedBy from the request (SPEC O8).
func (e *env) approvePlan(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	p, err := e.captf.InfrastructureV1alpha1().TerraformPlans(tenant).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"approved":true}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("O8: approving TerraformPlan %s: %v", name, err)
	}
	if p.Spec.ApprovedBy == "" {
		t.Errorf("O8: TerraformPlan %s approved without approvedBy", name)
	}
	t.Logf("O8: TerraformPlan %s approved by %s", name, p.Spec.ApprovedBy)
}

// waitPendingPlan waits until the tenant's cluster name waits for the
// approval of a plan (SPEC O8): ApplyJobSucceeded with reason, naming the
// plan status.pendingPlanRef names. It returns the cluster and the plan's
// name.
func (e *env) waitPendingPlan(ctx context.Context, t *testing.T, name string, reason v1alpha1.ConditionReason) (*v1alpha1.TerraformCluster, string) {
	t.Helper()
	var got *v1alpha1.TerraformCluster
	e.waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("O8: %s waits for a plan's approval (%s)", name, reason), func() (bool, string) {
		var err error
		if got, err = e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		if c == nil || c.Reason != string(reason) || got.Status.PendingPlanRef == nil {
			return false, fmt.Sprintf("ApplyJobSucceeded %+v; pods: %s", c, e.podSummary(ctx, tenant))
		}
		if !strings.Contains(c.Message, got.Status.PendingPlanRef.Name) {
			t.Errorf("O8: ApplyJobSucceeded does not name the plan %s: %s", got.Status.PendingPlanRef.Name, c.Message)
		}
		return true, ""
	})
	return got, got.Status.PendingPlanRef.Name
}
