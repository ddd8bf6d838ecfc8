package capi

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// TestK6K7PoolFollowsReplicasAndProviderIDs proves SPEC K6 and the pool's
// K7 outputs: the first apply runs with the MachinePool's replicas and
// name; its provider_id_list and replicas outputs reach spec.providerIDList
// and status.replicas, and status.ready is set (Cluster API v1.14 reads
// it). A pass with nothing changed starts no Job. A change of the
// MachinePool's replicas (not of the TerraformMachinePool: no new
// generation of it by the user) makes the rendered inputs differ, so a new
// apply Job runs at once with the new replicas, status.lastApply.inputsHash
// changes, and the provider ID list follows the second apply's output.
// InputsApplied (K1, A1-171) is True after each apply and False while the
// re-apply of the new replicas is due or running.
func TestK6K7PoolFollowsReplicasAndProviderIDs(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.bootstrapSecret("pool-bootstrap", "demo", "#cloud-config pool")
	e.terraformMachinePool("pool")
	e.machinePool("pool", "demo", "pool", "pool-bootstrap", 2)

	j1 := e.waitJob(kindTMP, "pool", v1alpha1.JobActionApply, "first", nil)
	in := e.runInputs(j1)
	if got := string(in["replicas"]); got != "2" {
		t.Errorf("first run: replicas = %s, want 2", got)
	}
	if got := inputString(t, in, "machinepool_name"); got != "pool" {
		t.Errorf("machinepool_name = %q, want pool", got)
	}
	e.succeed(kindTMP, "pool", j1, map[string]string{
		"provider_id_list": `["fake://pool-1","fake://pool-0"]`,
		"replicas":         `2`,
	})
	first := e.waitPool("after the first apply", []string{"fake://pool-0", "fake://pool-1"}, 2)
	if first.LastApply.InputsHash == "" || first.LastApply.InputsHash != j1.Annotations[v1alpha1.AnnotationInputsHash] {
		t.Fatalf("status.lastApply.inputsHash %q, want the first Job's %q", first.LastApply.InputsHash, j1.Annotations[v1alpha1.AnnotationInputsHash])
	}
	requireCond(t, "after the first apply", first, v1alpha1.ConditionInputsApplied, metav1.ConditionTrue, v1alpha1.ReasonInputsApplied)

	// An unchanged pass (the object is touched, nothing it renders from
	// changed): no Job, and the record stays.
	e.annotate(kindTMP, "pool", "test.captf.io/touch", "1")
	e.never(10*time.Second, func() (bool, string) {
		js := e.jobsOf(kindTMP, "pool", v1alpha1.JobActionApply)
		return len(js) != 1, fmt.Sprintf("K6: an unchanged pass started a Job: %d apply Jobs", len(js))
	})

	e.patchCAPI(poolGVR, "pool", map[string]any{"spec": map[string]any{"replicas": 3}})
	j2 := e.waitJob(kindTMP, "pool", v1alpha1.JobActionApply, "replicas changed", notIn(j1.Name))
	if got := string(e.runInputs(j2)["replicas"]); got != "3" {
		t.Errorf("re-apply: replicas = %s, want 3", got)
	}
	t.Logf("the re-apply Job %s: generation %s, attempt %d", j2.Name, j2.Annotations[v1alpha1.AnnotationJobGeneration], jobs.AttemptOf(&j2))
	// K1 (A1-171): while the re-apply runs, the applied inputs are not the
	// current ones.
	e.waitStatus(kindTMP, "pool", "InputsApplied=False while the re-apply runs", func(st *v1alpha1.WorkloadStatus) (bool, string) {
		c := meta.FindStatusCondition(st.Conditions, string(v1alpha1.ConditionInputsApplied))
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == string(v1alpha1.ReasonInputsChanged), "want InputsApplied=False/InputsChanged"
	})
	e.succeed(kindTMP, "pool", j2, map[string]string{
		"provider_id_list": `["fake://pool-0","fake://pool-1","fake://pool-2"]`,
		"replicas":         `3`,
	})
	second := e.waitPool("after the re-apply", []string{"fake://pool-0", "fake://pool-1", "fake://pool-2"}, 3)
	if r := second.LastApply; r.JobName != j2.Name || r.InputsHash == first.LastApply.InputsHash || r.InputsHash != j2.Annotations[v1alpha1.AnnotationInputsHash] {
		t.Errorf("K6: status.lastApply %s after the re-apply, first %s", describeRun(r), describeRun(first.LastApply))
	}
	requireCond(t, "after the re-apply", second, v1alpha1.ConditionInputsApplied, metav1.ConditionTrue, v1alpha1.ReasonInputsApplied)
	if n := len(e.jobsOf(kindTMP, "pool", v1alpha1.JobActionApply)); n != 2 {
		t.Errorf("%d apply Jobs, want 2", n)
	}
}

// waitPool waits until the pool "pool" shows the provider IDs, replicas
// and readiness of an apply (K7), and returns its status.
func (e *env) waitPool(what string, ids []string, replicas int32) *v1alpha1.WorkloadStatus {
	e.T.Helper()
	var st *v1alpha1.WorkloadStatus
	e.WaitFor("pool "+what, func() (bool, string) {
		p, err := e.Env.Captf.InfrastructureV1alpha1().TerraformMachinePools(e.ns).Get(e.Ctx, "pool", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st = &p.Status
		outputs, _ := json.Marshal(p.Status.Outputs)
		ok := slices.Equal(p.Spec.ProviderIDList, ids) && ptr.Deref(p.Status.Replicas, -1) == replicas && p.Status.Ready && isProvisioned(&p.Status)
		return ok, fmt.Sprintf("spec.providerIDList %v, status.replicas %v, status.ready %v, provisioned %v, outputs %s, lastApply %s",
			p.Spec.ProviderIDList, ptr.Deref(p.Status.Replicas, -1), p.Status.Ready, isProvisioned(&p.Status), outputs, describeRun(p.Status.LastApply))
	})
	return st
}

// TestK6EndpointEchoIsNoInput: once Cluster API copied a cluster's
// endpoint output into the Cluster, that copy is no input (it is the
// module's own output): no apply follows it, and the next generation's
// run does not get control_plane_endpoint. (A Cluster whose endpoint is
// not the cluster's own still passes it: pkg/contract's unit test.)
func TestK6EndpointEchoIsNoInput(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("echo", nil)
	first := e.jobsOf(kindTC, "echo", v1alpha1.JobActionApply)
	if len(first) != 1 {
		t.Fatalf("K6: %d apply Jobs after the first apply and the endpoint copy", len(first))
	}
	gen := e.setVariables(kindTC, "echo", `{"size":"2"}`)
	j := e.waitJob(kindTC, "echo", v1alpha1.JobActionApply, "the next generation", ofGeneration(gen))
	if in := e.runInputs(j); in["control_plane_endpoint"] != nil {
		t.Errorf("K6: the cluster's own endpoint, copied back by Cluster API, reached the run as an input: %s", in["control_plane_endpoint"])
	}
	if all := e.jobsOf(kindTC, "echo", v1alpha1.JobActionApply); len(all) != 2 {
		t.Errorf("K6: apply Jobs %d, want the first and the new generation's", len(all))
	}
}
