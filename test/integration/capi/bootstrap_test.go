package capi

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// machineBootstrap is the bootstrap data of TestK4K5MachineWaitsForClusterThenBootstrapData:
// it and its base64 must appear in the run Secret only.
const machineBootstrap = "#cloud-config\nruncmd: [join --token K5-b00tstrap-T0KEN-4e1d]\n"

// TestK4K5MachineWaitsForClusterThenBootstrapData proves SPEC K4's first
// half and K5 for a machine, with Cluster API adopting it: while its
// TerraformCluster's apply runs, the machine waits
// (WaitingForClusterInfrastructure); once the cluster is provisioned it
// waits for the Secret its Machine's spec.bootstrap.dataSecretName names
// (WaitingForBootstrapData); once that Secret exists, its apply Job starts
// and the Job's run Secret, owned by the Job, carries bootstrap_data
// (base64) and bootstrap_format, while the Job, the object's status, the
// events and the manager's log never hold the bootstrap value or its
// base64 (X1). The run Secret is deleted once the run is recorded.
func TestK4K5MachineWaitsForClusterThenBootstrapData(t *testing.T) {
	e := setup(t)
	e.terraformCluster("demo")
	e.clusterFor("demo", "demo", false)
	cj := e.waitJob(kindTC, "demo", v1alpha1.JobActionApply, "first", nil)

	e.terraformMachine("m1", nil)
	e.machine("m1", "demo", "m1", "m1-bootstrap", nil)
	c := e.waitCond(kindTM, "m1", v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForClusterInfrastructure)
	if !strings.Contains(c.Message, "TerraformCluster demo") {
		t.Errorf("WaitingForClusterInfrastructure message %q does not name the TerraformCluster", c.Message)
	}
	e.requireNoJobs(kindTM, "m1", "", "K4: a machine whose cluster is not provisioned")

	e.succeed(kindTC, "demo", cj, map[string]string{"control_plane_endpoint": `"cp.k5.example:6443"`})
	e.waitProvisioned(kindTC, "demo")
	c = e.waitCond(kindTM, "m1", v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForBootstrapData)
	if !strings.Contains(c.Message, "m1-bootstrap") {
		t.Errorf("WaitingForBootstrapData message %q does not name the Secret", c.Message)
	}
	e.requireNoJobs(kindTM, "m1", "", "K5: a machine without its bootstrap data")

	// What starts the Job is the Secret's creation: captf's metadata watch
	// of labelled Secrets. Without it the machine waits for the sync
	// period (10 minutes), longer than this test's polling deadline.
	e.bootstrapSecret("m1-bootstrap", "demo", machineBootstrap)
	created := time.Now()
	j := e.waitJob(kindTM, "m1", v1alpha1.JobActionApply, "bootstrap data Secret created", nil)
	t.Logf("the apply Job started %s after the bootstrap data Secret was created", time.Since(created).Round(time.Millisecond))
	in := e.runInputs(j)
	if got := inputString(t, in, "bootstrap_data"); got != b64(machineBootstrap) {
		t.Errorf("bootstrap_data = %q, want the base64 of the Secret's value", got)
	}
	if got := inputString(t, in, "bootstrap_format"); got != "cloud-config" {
		t.Errorf("bootstrap_format = %q, want cloud-config", got)
	}
	if got := inputString(t, in, "machine_name"); got != "m1" {
		t.Errorf("machine_name = %q, want m1", got)
	}

	e.succeed(kindTM, "m1", j, map[string]string{"provider_id": `"fake://m1"`})
	st := e.waitProvisioned(kindTM, "m1")
	// K5: the run Secret goes once the run is recorded.
	e.WaitFor("run Secret deleted once the run is recorded", func() (bool, string) {
		_, err := e.Env.Kube.CoreV1().Secrets(e.ns).Get(e.Ctx, jobs.RunSecretName(j.Name), metav1.GetOptions{})
		return err != nil, "run Secret " + jobs.RunSecretName(j.Name) + " still exists"
	})

	// X1: the Job, the status, the events and the manager's log.
	job, err := e.Env.Kube.BatchV1().Jobs(e.ns).Get(e.Ctx, j.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events, err := e.Env.Kube.CoreV1().Events(e.ns).List(e.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) == 0 {
		t.Fatal("no events in the namespace: the scan would prove nothing")
	}
	forbidden := []string{"K5-b00tstrap-T0KEN-4e1d", b64(machineBootstrap)}
	scanFor(t, "the apply Job", []any{job}, forbidden...)
	scanFor(t, "the TerraformMachine's status", []any{st}, forbidden...)
	var evs []any
	for _, ev := range events.Items {
		evs = append(evs, ev)
	}
	scanFor(t, "an event", evs, forbidden...)
	scanFor(t, "the manager's log", []any{e.Manager.Log()}, forbidden...)
	t.Logf("K5 scan: 1 Job, 1 status, %d events, %d bytes of manager log", len(evs), len(e.Manager.Log()))
}

// TestK5PoolReappliesWhenBootstrapDataChanges proves SPEC K5's pool rule:
// a pool re-applies when its bootstrap Secret's data changes (kubeadm
// rotates a pool's join token in place), with the new data in the new
// run's inputs. The Secret carries the cluster-name label, as Cluster
// API's bootstrap providers write it, which captf watches by metadata.
func TestK5PoolReappliesWhenBootstrapDataChanges(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.bootstrapSecret("pool-bootstrap", "demo", "#cloud-config token-one")
	e.terraformMachinePool("pool")
	e.machinePool("pool", "demo", "pool", "pool-bootstrap", 2)
	j := e.waitJob(kindTMP, "pool", v1alpha1.JobActionApply, "first", nil)
	if got := inputString(t, e.runInputs(j), "bootstrap_data"); got != b64("#cloud-config token-one") {
		t.Errorf("first run: bootstrap_data = %q", got)
	}
	e.succeed(kindTMP, "pool", j, map[string]string{"provider_id_list": `["fake://pool-0","fake://pool-1"]`})
	first := e.waitProvisioned(kindTMP, "pool")

	e.bootstrapSecret("pool-bootstrap", "demo", "#cloud-config token-two")
	j = e.waitJob(kindTMP, "pool", v1alpha1.JobActionApply, "bootstrap data rotated", notIn(j.Name))
	if got := inputString(t, e.runInputs(j), "bootstrap_data"); got != b64("#cloud-config token-two") {
		t.Errorf("re-apply: bootstrap_data = %q, want the rotated data", got)
	}
	e.succeed(kindTMP, "pool", j, nil)
	e.waitStatus(kindTMP, "pool", "the re-apply recorded with new inputs", func(st *v1alpha1.WorkloadStatus) (bool, string) {
		r := st.LastApply
		return r != nil && r.JobName == j.Name && r.Outcome == v1alpha1.RunSucceeded && r.InputsHash != first.LastApply.InputsHash,
			"lastApply " + describeRun(r)
	})
}
