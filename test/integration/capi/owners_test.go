package capi

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestK2ClusterWaitsForItsOwner proves SPEC K2 for a TerraformCluster: no
// Cluster names it, so its credentials resolve and mirror as before but no
// Job starts (DependenciesReady=False/WaitingForOwner); once a Cluster
// names it in spec.infrastructureRef, its apply Job starts. Were the owner
// check skipped, the Job would start before any Cluster exists.
func TestK2ClusterWaitsForItsOwner(t *testing.T) {
	e := setup(t)
	e.terraformCluster("demo")
	c := e.waitCond(kindTC, "demo", v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonWaitingForOwner)
	if !strings.Contains(c.Message, "no Cluster in namespace") {
		t.Errorf("DependenciesReady message %q does not say no Cluster names it", c.Message)
	}
	// Sections 2-6 unchanged: the credentials mirror while it waits.
	e.waitCond(kindTC, "demo", v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored)
	e.WaitMirror(e.ns, e.id, "mirrored while the TerraformCluster waits for its owner", func(*corev1.Secret) bool { return true })
	// The pass that reported WaitingForOwner decided on Jobs before it
	// wrote that status: none.
	e.requireNoJobs(kindTC, "demo", "", "K2: a TerraformCluster that no Cluster names")
	st := e.status(kindTC, "demo")
	requireCond(t, "no apply before an owner", st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonNoApplyYet)

	e.clusterFor("demo", "demo", false)
	e.waitJob(kindTC, "demo", v1alpha1.JobActionApply, "once a Cluster names it", nil)
	c = e.waitCond(kindTC, "demo", v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	if !strings.Contains(c.Message, "Cluster demo") {
		t.Errorf("DependenciesReady message %q does not name the Cluster", c.Message)
	}
}

// TestK2MachineOwners proves SPEC K2 for machines: a TerraformMachine
// whose controller owner Machine names another object is OwnerMismatch,
// and one whose Machine's Cluster names an infrastructure of another kind
// is ClusterNotTerraform; neither starts a Job. The Cluster of the second
// names a kind no CRD serves: without Cluster API's webhooks the API
// server stores it as written, and Cluster API's Machine controller still
// adopts the TerraformMachine its Machine names.
func TestK2MachineOwners(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.bootstrapSecret("boot", "demo", "#cloud-config k2")

	// A Machine naming "other"; "tm" claims it as its controller owner.
	m := e.machine("m1", "demo", "other", "boot", nil)
	e.terraformMachine("tm", m)
	c := e.waitCond(kindTM, "tm", v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonOwnerMismatch)
	if !strings.Contains(c.Message, `"other"`) || !strings.Contains(c.Message, "m1") {
		t.Errorf("OwnerMismatch message %q does not name the Machine and what it names", c.Message)
	}

	// A Cluster whose infrastructure is another provider's.
	e.capiCluster("foreign", "infrastructure.example.com", "FakeCluster", "fake", false)
	e.machine("m2", "foreign", "tm2", "boot", nil)
	e.terraformMachine("tm2", nil)
	c = e.waitCond(kindTM, "tm2", v1alpha1.ConditionDependenciesReady, metav1.ConditionFalse, v1alpha1.ReasonClusterNotTerraform)
	if !strings.Contains(c.Message, "FakeCluster") {
		t.Errorf("ClusterNotTerraform message %q does not name the Cluster's infrastructure kind", c.Message)
	}
	// Cluster API adopted it: the controller owner is the Machine.
	o, _, err := e.object(kindTM, "tm2")
	if err != nil {
		t.Fatal(err)
	}
	if owner := metav1.GetControllerOfNoCopy(o); owner == nil || owner.Kind != "Machine" || owner.Name != "m2" {
		t.Errorf("tm2's controller owner is %+v, want Machine m2 (set by Cluster API)", owner)
	}

	e.requireNoJobs(kindTM, "tm", "", "K2: OwnerMismatch")
	e.requireNoJobs(kindTM, "tm2", "", "K2: ClusterNotTerraform")
}

// TestK3ClusterPausePausesItsObjects proves SPEC K3: Cluster.spec.paused
// pauses the TerraformCluster and its machines (Paused=True naming the
// Cluster, no Job) and, once unpaused, their Jobs start. The machine is
// created while its cluster is provisioned and the Cluster paused, so
// nothing but the pause holds it back (DependenciesReady=True).
func TestK3ClusterPausePausesItsObjects(t *testing.T) {
	e := setup(t)
	e.terraformCluster("demo")
	e.clusterFor("demo", "demo", true)
	c := e.waitCond(kindTC, "demo", v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	if !strings.Contains(c.Message, "Cluster demo has spec.paused: true") {
		t.Errorf("Paused message %q does not name the Cluster", c.Message)
	}
	e.waitCond(kindTC, "demo", v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	e.requireNoJobs(kindTC, "demo", "", "K3: a TerraformCluster of a paused Cluster")

	e.setPaused("demo", false)
	j := e.waitJob(kindTC, "demo", v1alpha1.JobActionApply, "unpaused", nil)
	e.waitCond(kindTC, "demo", v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused)
	e.succeed(kindTC, "demo", j, map[string]string{"control_plane_endpoint": `"cp.k3.example:6443"`})
	e.waitProvisioned(kindTC, "demo")

	// Paused again: a new machine of the cluster waits. Cluster API does
	// not reconcile a paused Cluster's Machines, so the test sets the owner
	// reference it would.
	e.setPaused("demo", true)
	e.waitCond(kindTC, "demo", v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	e.bootstrapSecret("m1-bootstrap", "demo", "#cloud-config k3")
	m := e.machine("m1", "demo", "m1", "m1-bootstrap", nil)
	e.terraformMachine("m1", m)
	c = e.waitCond(kindTM, "m1", v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused)
	if !strings.Contains(c.Message, "Cluster demo has spec.paused: true") {
		t.Errorf("machine's Paused message %q does not name the Cluster", c.Message)
	}
	e.waitCond(kindTM, "m1", v1alpha1.ConditionDependenciesReady, metav1.ConditionTrue, v1alpha1.ReasonDependenciesReady)
	e.requireNoJobs(kindTM, "m1", "", "K3: a machine of a paused Cluster")

	e.setPaused("demo", false)
	e.waitJob(kindTM, "m1", v1alpha1.JobActionApply, "unpaused", nil)
	e.waitCond(kindTM, "m1", v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused)
}
