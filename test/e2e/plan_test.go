package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// manualPlanOnNode proves SPEC O8's Manual flow on the real node (issue
// 24): a cluster of the drift module (its fakecloud provider reads and
// writes the fake cloud) under applyPolicy Manual applies its first
// generation at once (A3-63); a spec change of the resource's content
// makes a TerraformPlan whose summary is exactly that change (one update
// of fakecloud_resource.resource), the fake cloud keeps the old content
// and no apply Job of the generation starts while the plan waits; the
// approval starts one apply Job of that plan (captf.io/plan,
// --expect-plan), the content changes, and the plan is Applied.
func (e *env) manualPlanOnNode(ctx context.Context, t *testing.T) {
	const name, content = "demo-manual", "approved by a person"
	id := moduleID(tenant, name)
	vars := map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint}
	c := e.createTenantCluster(ctx, t, "O8", name, driftModuleImage, vars, func(c *v1alpha1.TerraformCluster) {
		c.Spec.ApplyPolicy = v1alpha1.ApplyManual
	})
	e.waitTenantClusterReady(ctx, t, name, "O8: "+name+" Ready (the first apply is not gated)")
	e.requireContent(ctx, t, id, driftContent, "after the first apply")

	vars["content"] = content
	changed := time.Now()
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Variables = variables(t, vars) })
	got, ref := e.waitPendingPlan(ctx, t, name, v1alpha1.ReasonPlanAwaitingApproval)
	gen := got.Generation
	t.Logf("O8 Manual: TerraformPlan %s waits for approval %s after the spec change", ref, time.Since(changed).Round(time.Second))
	plan, err := e.captf.InfrastructureV1alpha1().TerraformPlans(tenant).Get(ctx, ref, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := plan.Spec.Summary
	want := []v1alpha1.PlanResourceChange{{Address: driftAddress, Action: v1alpha1.PlanAction("update")}}
	if plan.Spec.Reason != v1alpha1.PlanReasonManual || s.Update != 1 || s.Create+s.Replace+s.Delete != 0 || !slices.Equal(s.Resources, want) {
		t.Errorf("O8 Manual: plan %s: reason %s, summary %+v; want Manual with one update of %s", ref, plan.Spec.Reason, s, driftAddress)
	}
	// Nothing changes while it waits: a few sync periods' worth.
	time.Sleep(15 * time.Second)
	e.requireContent(ctx, t, id, driftContent, "while the plan waits for approval")
	for _, j := range e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply) {
		if g, _ := jobs.GenerationOf(&j); g == gen {
			t.Fatalf("O8 Manual: apply Job %s of generation %d before the approval", j.Name, gen)
		}
	}

	e.approvePlan(ctx, t, ref)
	approved := time.Now()
	e.waitFor(ctx, t, 5*time.Minute, "O8 Manual: the approved plan applied", func() (bool, string) {
		return e.contentOf(ctx, t, id) == content, "content " + e.contentOf(ctx, t, id) + "; pods: " + e.podSummary(ctx, tenant)
	})
	t.Logf("O8 Manual: the content changed %s after the approval", time.Since(approved).Round(time.Second))
	var applies []string
	for _, j := range e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply) {
		if g, _ := jobs.GenerationOf(&j); g == gen {
			applies = append(applies, j.Name+" plan="+jobs.PlanOf(&j))
		}
	}
	if len(applies) != 1 || !strings.HasSuffix(applies[0], " plan="+ref) {
		t.Errorf("O8 Manual: apply Jobs of generation %d: %v, want one applying %s", gen, applies, ref)
	}
	e.waitFor(ctx, t, 2*time.Minute, "O8: TerraformPlan "+ref+" Applied", func() (bool, string) {
		p, err := e.captf.InfrastructureV1alpha1().TerraformPlans(tenant).Get(ctx, ref, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == v1alpha1.PlanPhaseApplied, fmt.Sprintf("phase %s", p.Status.Phase)
	})
	e.deleteTenantCluster(ctx, t, name)
	if got := e.contentOf(ctx, t, id); got != "(none)" {
		t.Errorf("O8 Manual: the fake cloud still holds %s (%q) after the deletion", id, got)
	}
}
