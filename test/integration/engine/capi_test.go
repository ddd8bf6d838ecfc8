package engine

import (
	"fmt"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/tfstate"
	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/captf/captf/test/integration/framework"
)

// TestProviderFieldsFromOutputs proves T5 on the real API server: after
// the first successful apply the manager sets spec.controlPlaneEndpoint
// from the output control_plane_endpoint (a "[v6]:port" string here); the
// API server makes that a new generation, which is not applied again
// (J1); the next user change of the spec is applied.
func TestProviderFieldsFromOutputs(t *testing.T) {
	f := setup(t)
	ns, c, suffix := stateUser(t, f, "capi", "cp")

	j := applyJob(f, ns, 1)
	writeState(f, ns, suffix, tfstate.SecretName(suffix), tfstatetest.Gzip(tfstatetest.State(sensitiveOutputValue, map[string]string{
		"control_plane_endpoint": `"[2001:db8::10]:6443"`,
	})))
	if err := f.Env.FinishJob(f.Ctx, ns, j.Name, ""); err != nil {
		t.Fatal(err)
	}

	var got *v1alpha1.TerraformCluster
	f.WaitFor("spec.controlPlaneEndpoint from the output", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		return !got.Spec.ControlPlaneEndpoint.IsZero(), fmt.Sprintf("generation %d, spec %+v", got.Generation, got.Spec.ControlPlaneEndpoint)
	})
	if want := (v1alpha1.APIEndpoint{Host: "2001:db8::10", Port: 6443}); got.Spec.ControlPlaneEndpoint != want {
		t.Errorf("T5: spec.controlPlaneEndpoint %+v, want %+v", got.Spec.ControlPlaneEndpoint, want)
	}
	// K11: the mark names the object too ("<generation>/<uid>"), so a copy
	// restored elsewhere does not inherit it.
	if want := "2/" + string(got.UID); got.Generation != 2 || got.Annotations[v1alpha1.AnnotationProviderFieldsGeneration] != want {
		t.Fatalf("T5: generation %d, %s=%q; want 2 and %q", got.Generation, v1alpha1.AnnotationProviderFieldsGeneration,
			got.Annotations[v1alpha1.AnnotationProviderFieldsGeneration], want)
	}

	// The manager has reconciled generation 2 (its conditions say so) and
	// started no Job for it.
	f.WaitFor("a pass over generation 2", func() (bool, string) {
		got = f.GetCluster(ns, c.Name)
		cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
		return cond != nil && cond.ObservedGeneration == 2, framework.Describe(got.Status.Conditions)
	})
	cond := meta.FindStatusCondition(got.Status.Conditions, string(v1alpha1.ConditionApplyJobSucceeded))
	if cond.Status != metav1.ConditionTrue || cond.Reason != string(v1alpha1.ReasonApplySucceeded) {
		t.Errorf("T5: ApplyJobSucceeded after the manager's own write: %s/%s %s", cond.Status, cond.Reason, cond.Message)
	}
	for _, x := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if x.Annotations[v1alpha1.AnnotationJobGeneration] != "1" {
			t.Errorf("J1, T5: the manager's own write of the Cluster API fields started Job %s (generation %s)", x.Name, x.Annotations[v1alpha1.AnnotationJobGeneration])
		}
	}

	// A user's change is a new generation, applied as always.
	nextGeneration(f, ns, c.Name, 3)
	j3 := applyJob(f, ns, 3)
	if gen, _ := strconv.Atoi(j3.Annotations[v1alpha1.AnnotationJobGeneration]); gen != 3 {
		t.Errorf("apply Job %s for generation %d", j3.Name, gen)
	}
	if ep := f.GetCluster(ns, c.Name).Spec.ControlPlaneEndpoint; ep.Host != "2001:db8::10" {
		t.Errorf("T5: the endpoint must stay: %+v", ep)
	}
}
