package capi

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

const k7Exports = `{"vpc_id":"vpc-k7","subnets":["subnet-a","subnet-b"]}`

// TestK7ClusterAndMachineOutputs proves SPEC K7's mappings with Cluster
// API reading them. Cluster: failure_domains to status.failureDomains,
// which Cluster API copies to the Cluster's status, and exports to
// status.exports and on into a machine's captf_cluster_outputs input.
// Machine: provider_id to spec.providerID (Cluster API sets the Machine's
// spec.providerID and phase Provisioned), addresses to status.addresses
// (Cluster API copies them to the Machine's status), failure_domain to
// status.failureDomain; a failure_domain other than the Machine's
// spec.failureDomain is FailureDomainMismatch; a null provider_id is
// OutputsPending and leaves the machine unprovisioned.
func TestK7ClusterAndMachineOutputs(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", map[string]string{
		"failure_domains": `[{"name":"zone-a","controlPlane":true,"attributes":{"region":"r1"}},{"name":"zone-b"}]`,
		"exports":         k7Exports,
	})
	st := e.waitCondStatus(kindTC, "demo", v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
	if got := rawJSON(t, st.Exports); got != rawJSON(t, k7Exports) {
		t.Errorf("status.exports = %s, want %s", got, k7Exports)
	}
	var names []string
	for _, fd := range st.FailureDomains {
		names = append(names, fd.Name)
	}
	if !slices.Equal(names, []string{"zone-a", "zone-b"}) || st.FailureDomains[0].ControlPlane == nil || !*st.FailureDomains[0].ControlPlane || st.FailureDomains[0].Attributes["region"] != "r1" {
		t.Errorf("status.failureDomains = %+v", st.FailureDomains)
	}
	e.WaitFor("Cluster API copies the failure domains to the Cluster", func() (bool, string) {
		c, err := e.getCAPI(clusterGVR, "demo")
		if err != nil {
			return false, err.Error()
		}
		fds, _, _ := unstructured.NestedSlice(c.Object, "status", "failureDomains")
		var got []string
		for _, fd := range fds {
			if m, ok := fd.(map[string]any); ok {
				got = append(got, fmt.Sprint(m["name"]))
			}
		}
		return slices.Equal(got, []string{"zone-a", "zone-b"}), fmt.Sprintf("Cluster status.failureDomains %v", fds)
	})

	// A machine in zone-a: every output mapped.
	e.bootstrapSecret("boot", "demo", "#cloud-config k7")
	e.terraformMachine("m1", nil)
	e.machine("m1", "demo", "m1", "boot", func(spec map[string]any) { spec["failureDomain"] = "zone-a" })
	j := e.waitJob(kindTM, "m1", v1alpha1.JobActionApply, "first", nil)
	in := e.runInputs(j)
	if got := rawJSON(t, in["captf_cluster_outputs"]); got != rawJSON(t, k7Exports) {
		t.Errorf("captf_cluster_outputs = %s, want the cluster's exports %s", got, k7Exports)
	}
	if got := inputString(t, in, "failure_domain"); got != "zone-a" {
		t.Errorf("failure_domain input = %q, want zone-a", got)
	}
	e.succeed(kindTM, "m1", j, map[string]string{
		"provider_id":    `"fake://m1"`,
		"addresses":      `[{"type":"InternalIP","address":"10.0.0.5"},{"type":"Hostname","address":"m1.k7.example"}]`,
		"failure_domain": `"zone-a"`,
	})
	st = e.waitCondStatus(kindTM, "m1", v1alpha1.ConditionOutputsValid, metav1.ConditionTrue, v1alpha1.ReasonOutputsValid)
	e.waitProvisioned(kindTM, "m1")
	if len(st.Addresses) != 2 || st.Addresses[0].Address != "10.0.0.5" || st.FailureDomain != "zone-a" {
		t.Errorf("status.addresses %+v, status.failureDomain %q", st.Addresses, st.FailureDomain)
	}
	if tm, _, _ := e.object(kindTM, "m1"); tm.(*v1alpha1.TerraformMachine).Spec.ProviderID != "fake://m1" {
		t.Errorf("spec.providerID = %q", tm.(*v1alpha1.TerraformMachine).Spec.ProviderID)
	}
	e.WaitFor("Cluster API's Machine provisioned with the provider ID and addresses", func() (bool, string) {
		m, err := e.getCAPI(machineGVR, "m1")
		if err != nil {
			return false, err.Error()
		}
		pid, _, _ := unstructured.NestedString(m.Object, "spec", "providerID")
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		addrs, _, _ := unstructured.NestedSlice(m.Object, "status", "addresses")
		var got []string
		for _, a := range addrs {
			if am, ok := a.(map[string]any); ok {
				got = append(got, fmt.Sprintf("%v=%v", am["type"], am["address"]))
			}
		}
		want := []string{"InternalIP=10.0.0.5", "Hostname=m1.k7.example"}
		return pid == "fake://m1" && phase == "Provisioned" && slices.Equal(got, want),
			fmt.Sprintf("spec.providerID %q, phase %q, status.addresses %v", pid, phase, got)
	})

	// A machine placed in zone-b whose module reports zone-a.
	e.terraformMachine("m2", nil)
	e.machine("m2", "demo", "m2", "boot", func(spec map[string]any) { spec["failureDomain"] = "zone-b" })
	j = e.waitJob(kindTM, "m2", v1alpha1.JobActionApply, "first", nil)
	e.succeed(kindTM, "m2", j, map[string]string{"provider_id": `"fake://m2"`, "failure_domain": `"zone-a"`})
	c := e.waitCond(kindTM, "m2", v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonFailureDomainMismatch)
	t.Logf("FailureDomainMismatch: %s", c.Message)
	if st := e.status(kindTM, "m2"); st.FailureDomain != "" {
		t.Errorf("a mismatched failure domain reached status.failureDomain: %q", st.FailureDomain)
	}

	// A machine whose provider ID is not known yet.
	e.terraformMachine("m3", nil)
	e.machine("m3", "demo", "m3", "boot", nil)
	j = e.waitJob(kindTM, "m3", v1alpha1.JobActionApply, "first", nil)
	e.succeed(kindTM, "m3", j, map[string]string{"provider_id": `null`})
	st = e.waitCondStatus(kindTM, "m3", v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonOutputsPending)
	requireCond(t, "m3", st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if isProvisioned(st) {
		t.Errorf("K7: a machine whose provider_id is null is provisioned")
	}
	if m, err := e.getCAPI(machineGVR, "m3"); err == nil {
		if phase, _, _ := unstructured.NestedString(m.Object, "status", "phase"); phase == "Provisioned" {
			t.Errorf("Cluster API's Machine m3 is Provisioned without a provider ID")
		}
	}
}

// TestK7InvalidEndpoint proves SPEC K7's validation for a cluster: an
// endpoint output that is not host:port is OutputsInvalid, the
// TerraformCluster is not provisioned, and Cluster API's Cluster does not
// get its infrastructure provisioned.
func TestK7InvalidEndpoint(t *testing.T) {
	e := setup(t)
	e.terraformCluster("bad")
	e.clusterFor("bad", "bad", false)
	j := e.waitJob(kindTC, "bad", v1alpha1.JobActionApply, "first", nil)
	e.succeed(kindTC, "bad", j, map[string]string{"control_plane_endpoint": `"no-port-here"`})
	st := e.waitCondStatus(kindTC, "bad", v1alpha1.ConditionOutputsValid, metav1.ConditionFalse, v1alpha1.ReasonOutputsInvalid)
	requireCond(t, "bad", st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)
	if isProvisioned(st) {
		t.Fatal("K7: a cluster whose endpoint output is invalid is provisioned")
	}
	c, err := e.getCAPI(clusterGVR, "bad")
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedBool(c.Object, "status", "initialization", "infrastructureProvisioned"); p {
		t.Error("Cluster API's Cluster has its infrastructure provisioned")
	}
}

// waitCondStatus is waitCond returning the status it saw.
func (e *env) waitCondStatus(kind, name string, typ v1alpha1.ConditionType, status metav1.ConditionStatus, reason v1alpha1.ConditionReason) *v1alpha1.WorkloadStatus {
	e.T.Helper()
	e.waitCond(kind, name, typ, status, reason)
	return e.status(kind, name)
}
