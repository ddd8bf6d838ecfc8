package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/fakecloud"
)

const (
	// driftModuleImage is test/e2e/module-drift with the fakecloud
	// provider in its provider mirror (hack/build-e2e-images.sh).
	driftModuleImage = "captf.local/fakecloud-module-drift:dev"
	// driftAddress is the drift module's resource.
	driftAddress = "fakecloud_resource.resource"
	// driftInterval is the drift cluster's spec.drift.intervalSeconds.
	driftInterval = 60
	// driftContent is the content the module gives its resource.
	driftContent = "as the module says"
)

// driftOnNode proves SPEC O7 on the real node (issue 24): a cluster of
// the drift module (its fakecloud provider reads the resource back from
// the fake cloud on refresh) with spec.drift every 60 s, action Report.
// After its apply, the resource's content is changed in the fake cloud
// behind the module's back: a drift Job reports DriftDetected=True with
// fakecloud_resource.resource in status.lastRun.drift within about the
// interval, and the fake cloud keeps the changed content (Report applies
// nothing). Then action Remediate (a spec change: its own apply puts the
// content back), and the content is changed behind its back again: a
// drift Job finds it, a remediation apply Job
// (captf.io/drift-remediation) puts the content back, and the next check
// says DriftDetected=False/NoDrift. The deletion leaves the fake cloud
// without the resource. The measured times are logged.
func (e *env) driftOnNode(ctx context.Context, t *testing.T) {
	const name = "demo-drift"
	id := moduleID(tenant, name)
	c := e.createTenantCluster(ctx, t, "O7", name, driftModuleImage, map[string]any{"name": name, "namespace": tenant, "fakecloud_endpoint": cloudEndpoint},
		func(c *v1alpha1.TerraformCluster) {
			c.Spec.Drift = &v1alpha1.DriftSpec{IntervalSeconds: ptrTo[int32](driftInterval), Action: v1alpha1.DriftReport}
		})
	e.waitTenantClusterReady(ctx, t, name, "O7: "+name+" Ready")
	e.requireContent(ctx, t, id, driftContent, "after the apply")

	// Report: changed behind the module's back, reported, not applied.
	changed := time.Now()
	e.cloud.send(ctx, t, http.MethodPatch, "/resources/"+id, `{"content":"changed behind its back (report)"}`)
	got := e.waitDrift(ctx, t, name, v1alpha1.ReasonDriftReported, changed)
	applied := got.Status.LastApply.FinishTime.Time
	t.Logf("O7 Report: DriftDetected=True %s after the change, %s after the apply finished (interval %ds, jitter under 10%%): %s",
		time.Since(changed).Round(time.Second), time.Since(applied).Round(time.Second), driftInterval,
		meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionDriftDetected)).Message)
	e.requireContent(ctx, t, id, "changed behind its back (report)", "after a Report check (Report applies nothing)")
	if n := len(e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply)); n != 1 {
		t.Errorf("O7 Report: %d apply Jobs, want the first only", n)
	}

	// Remediate: the spec change applies (the content comes back by that
	// apply); then a change behind its back is put back by a drift Job's
	// remediation.
	e.editClusterNamed(ctx, t, name, func(c *v1alpha1.TerraformCluster) { c.Spec.Drift.Action = v1alpha1.DriftRemediate })
	e.waitFor(ctx, t, 5*time.Minute, "O7: the apply of the Remediate generation", func() (bool, string) {
		got, err := e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		a := got.Status.LastApply
		return a != nil && a.Outcome == v1alpha1.RunSucceeded && a.Generation == got.Generation, fmt.Sprintf("lastApply %+v; pods: %s", a, e.podSummary(ctx, tenant))
	})
	e.requireContent(ctx, t, id, driftContent, "after the Remediate generation's apply")
	changed = time.Now()
	e.cloud.send(ctx, t, http.MethodPatch, "/resources/"+id, `{"content":"changed behind its back (remediate)"}`)
	e.waitDrift(ctx, t, name, v1alpha1.ReasonDriftRemediating, changed)
	found := time.Now()
	t.Logf("O7 Remediate: DriftDetected=True/DriftRemediating %s after the change", found.Sub(changed).Round(time.Second))
	e.waitFor(ctx, t, 5*time.Minute, "O7: the remediation apply puts the content back", func() (bool, string) {
		return e.contentOf(ctx, t, id) == driftContent, "content " + e.contentOf(ctx, t, id) + "; pods: " + e.podSummary(ctx, tenant)
	})
	t.Logf("O7 Remediate: the content back %s after the change", time.Since(changed).Round(time.Second))
	var remediations []string
	for _, j := range e.jobsOf(ctx, t, c.UID, v1alpha1.JobActionApply) {
		if j.Annotations[v1alpha1.AnnotationJobDriftRemediation] != "" && j.CreationTimestamp.After(changed.Add(-time.Second)) {
			remediations = append(remediations, j.Name)
		}
	}
	if len(remediations) != 1 {
		t.Errorf("O7 Remediate: remediation apply Jobs since the change: %v, want one", remediations)
	}
	back := time.Now()
	e.waitDrift(ctx, t, name, v1alpha1.ReasonNoDrift, back)
	t.Logf("O7 Remediate: DriftDetected=False/NoDrift %s after the change", time.Since(changed).Round(time.Second))

	e.deleteTenantCluster(ctx, t, name)
	left := e.cloud.resources(ctx, t, tokenB)
	t.Logf("O7: the fake cloud holds %d resources after the deletion", len(left))
	if len(left) != 0 {
		t.Errorf("O7: the fake cloud still holds %+v after the drift cluster's deletion", left)
	}
}

// waitDrift waits until the tenant's cluster name says DriftDetected with
// reason, from a drift check that finished after since, and returns the
// cluster.
// A drift found must name the drift module's resource in
// status.lastRun.drift.
func (e *env) waitDrift(ctx context.Context, t *testing.T, name string, reason v1alpha1.ConditionReason, since time.Time) *v1alpha1.TerraformCluster {
	t.Helper()
	var got *v1alpha1.TerraformCluster
	e.waitFor(ctx, t, 5*time.Minute, fmt.Sprintf("O7: DriftDetected %s on %s", reason, name), func() (bool, string) {
		var err error
		if got, err = e.captf.InfrastructureV1alpha1().TerraformClusters(tenant).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionDriftDetected))
		run, chk := got.Status.LastRun, got.Status.LastDriftCheck
		last := fmt.Sprintf("DriftDetected %+v; lastRun %+v; pods: %s", cond, run, e.podSummary(ctx, tenant))
		if cond == nil || cond.Reason != string(reason) || chk == nil || run == nil || run.Operation != v1alpha1.JobActionDrift || run.Job != chk.JobName {
			return false, last
		}
		// The API server and the test share this host's clock.
		return chk.FinishTime.After(since.Add(-time.Second)), "a drift check that finished before it could see the change: " + last
	})
	run := got.Status.LastRun
	if reason == v1alpha1.ReasonNoDrift {
		return got
	}
	if run.Drift == nil || run.Drift.Update != 1 || !slices.Contains(run.Drift.Resources, driftAddress) {
		t.Errorf("O7: status.lastRun.drift %+v, want one update of %s", run.Drift, driftAddress)
	}
	if msg := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionDriftDetected)).Message; !strings.Contains(msg, driftAddress) {
		t.Errorf("O7: DriftDetected's message does not name %s: %s", driftAddress, msg)
	}
	return got
}

// contentOf is the content of the fake cloud's resource id, "(none)" when
// it holds none.
func (e *env) contentOf(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	for _, r := range e.cloud.resources(ctx, t, tokenB) {
		if r.ID == id {
			return r.Content
		}
	}
	return "(none)"
}

func (e *env) requireContent(ctx context.Context, t *testing.T, id, want, when string) {
	t.Helper()
	if got := e.contentOf(ctx, t, id); got != want {
		t.Fatalf("O7: the fake cloud's %s holds %q %s, want %q", id, got, when, want)
	}
}

// send changes the fake cloud directly, behind any module's back, with
// the current credential (tokenB after the lifecycle's rotation).
func (c cloud) send(ctx context.Context, t *testing.T, method, path, body string) {
	t.Helper()
	base, err := c.url(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenB)
	req.Header.Set(fakecloud.SourceHeader, "test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %s: %s", method, path, resp.Status, b)
	}
}
