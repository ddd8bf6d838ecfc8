package capi

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestK8ReadyHoldsThroughAFailedReapply proves SPEC K8 with Cluster API
// copying Ready: once a cluster and a machine are provisioned, a re-apply
// of each (a spec change) that runs and then fails shows in
// ApplyJobSucceeded and status.lastApply only; their Ready stays True, and
// so do the Cluster's InfrastructureReady and the Machine's
// InfrastructureReady (Cluster API's mirror of the TerraformMachine's
// Ready; the Machine's own Ready also needs a Node, which this control
// plane has none of), polled throughout. Then an apply whose health output
// says unhealthy turns the cluster's Ready False, and Cluster API's
// InfrastructureReady with it.
func TestK8ReadyHoldsThroughAFailedReapply(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.provisionedMachine("m1", "demo")
	e.WaitFor("Cluster API's InfrastructureReady True on the Cluster and the Machine", func() (bool, string) {
		c := e.capiCondition(clusterGVR, "demo", "InfrastructureReady")
		m := e.capiCondition(machineGVR, "m1", "InfrastructureReady")
		return c["status"] == "True" && m["status"] == "True", fmt.Sprintf("Cluster %v, Machine %v", c, m)
	})

	w := watch(e.Ctx, func() []string {
		var problems []string
		if c := e.capiCondition(clusterGVR, "demo", "InfrastructureReady"); c["status"] != "True" {
			problems = append(problems, fmt.Sprintf("Cluster InfrastructureReady %v", c))
		}
		if m := e.capiCondition(machineGVR, "m1", "InfrastructureReady"); m["status"] != "True" {
			problems = append(problems, fmt.Sprintf("Machine InfrastructureReady %v", m))
		}
		for _, kind := range []string{kindTC, kindTM} {
			name := map[string]string{kindTC: "demo", kindTM: "m1"}[kind]
			if _, st, err := e.object(kind, name); err == nil {
				if c := meta.FindStatusCondition(st.Conditions, string(v1alpha1.ConditionReady)); c == nil || c.Status != metav1.ConditionTrue {
					problems = append(problems, fmt.Sprintf("%s Ready %+v", kind, c))
				}
			}
		}
		return problems
	})

	cg := e.setVariables(kindTC, "demo", `{"size":"large"}`)
	mg := e.setVariables(kindTM, "m1", `{"size":"large"}`)
	cj := e.waitJob(kindTC, "demo", v1alpha1.JobActionApply, "the re-apply", ofGeneration(cg))
	mj := e.waitJob(kindTM, "m1", v1alpha1.JobActionApply, "the re-apply", ofGeneration(mg))
	e.waitCond(kindTC, "demo", v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	e.waitCond(kindTM, "m1", v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
	w.waitPolls(e, 10) // Cluster API reconciles what it was told of the runs
	e.fail(cj)
	e.fail(mj)
	e.waitCond(kindTC, "demo", v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	e.waitCond(kindTM, "m1", v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	w.waitPolls(e, 20) // and of the failures
	for _, kind := range []string{kindTC, kindTM} {
		name := map[string]string{kindTC: "demo", kindTM: "m1"}[kind]
		st := e.status(kind, name)
		requireCond(t, kind+" after a failed re-apply", st, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
		if r := st.LastApply; r == nil || r.Outcome != v1alpha1.RunFailed {
			t.Errorf("%s: status.lastApply %s, want the failed re-apply", kind, describeRun(r))
		}
	}

	// Health: the next apply (a new generation, at once) leaves a state
	// whose health output says unhealthy. Polling stops as its Job
	// finishes: until then, everything Cluster API saw came from the
	// failed re-apply.
	hg := e.setVariables(kindTC, "demo", `{"size":"larger"}`)
	hj := e.waitJob(kindTC, "demo", v1alpha1.JobActionApply, "the health apply", ofGeneration(hg))
	polls, problems := w.stop()
	t.Logf("K8: %d polls of Ready during the failed re-apply", polls)
	for _, p := range problems {
		t.Errorf("K8: not Ready during a re-apply: %s", p)
	}
	e.succeed(kindTC, "demo", hj, map[string]string{
		"control_plane_endpoint": `{"host":"cp.demo.example","port":6443}`,
		"health":                 `{"state":"unhealthy","message":"the load balancer has no healthy target"}`,
	})
	e.waitCond(kindTC, "demo", v1alpha1.ConditionInfrastructureHealthy, metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy)
	e.waitCond(kindTC, "demo", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInstanceUnhealthy)
	e.WaitFor("Cluster API's InfrastructureReady False on the Cluster", func() (bool, string) {
		c := e.capiCondition(clusterGVR, "demo", "InfrastructureReady")
		return c["status"] == "False", fmt.Sprintf("%v", c)
	})
}
