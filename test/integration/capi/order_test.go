package capi

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// TestK4ClusterDestroyWaitsForItsMachines proves SPEC K4's second half
// where captf alone enforces it: a TerraformCluster deleted directly (not
// through its Cluster) while a machine of the cluster exists reports
// DeletionBlocked=True/DependentsExist and starts no destroy Job; once the
// machine is destroyed and gone, the cluster's destroy starts. Without the
// check, the cluster's destroy Job would start at once.
func TestK4ClusterDestroyWaitsForItsMachines(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.provisionedMachine("m1", "demo")

	e.deleteObject(kindTC, "demo")
	c := e.waitCond(kindTC, "demo", v1alpha1.ConditionDeletionBlocked, metav1.ConditionTrue, v1alpha1.ReasonDependentsExist)
	if !strings.Contains(c.Message, "TerraformMachine/m1") {
		t.Errorf("DeletionBlocked message %q does not name the machine", c.Message)
	}
	e.requireNoJobs(kindTC, "demo", v1alpha1.JobActionDestroy, "K4: a deleting cluster whose machine exists")

	// The machine goes the Cluster API way: its Machine is deleted, Cluster
	// API deletes the TerraformMachine, captf destroys it.
	if err := e.dyn.Resource(machineGVR).Namespace(e.ns).Delete(e.Ctx, "m1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	md := e.waitJob(kindTM, "m1", v1alpha1.JobActionDestroy, "Machine deleted", nil)
	e.requireNoJobs(kindTC, "demo", v1alpha1.JobActionDestroy, "K4: the machine's destroy is running")
	e.succeed(kindTM, "m1", md, nil)
	e.waitGone(kindTM, "m1")

	e.waitJob(kindTC, "demo", v1alpha1.JobActionDestroy, "its machines gone", nil)
	e.waitCond(kindTC, "demo", v1alpha1.ConditionDeletionBlocked, metav1.ConditionFalse, v1alpha1.ReasonNotBlocked)
}

// TestK4ClusterDeletionDestroysMachinesFirst proves SPEC K4 with Cluster
// API driving the deletion: deleting the Cluster, Cluster API deletes its
// Machines, captf destroys the machine (its destroy Job), and only once
// the TerraformMachine is gone does Cluster API delete the TerraformCluster
// and captf start the cluster's destroy Job; both finish and the Cluster
// goes.
func TestK4ClusterDeletionDestroysMachinesFirst(t *testing.T) {
	e := setup(t)
	e.provisionedCluster("demo", nil)
	e.provisionedMachine("m1", "demo")

	if err := e.dyn.Resource(clusterGVR).Namespace(e.ns).Delete(e.Ctx, "demo", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	md := e.waitJob(kindTM, "m1", v1alpha1.JobActionDestroy, "the Cluster deleted", nil)
	e.requireNoJobs(kindTC, "demo", v1alpha1.JobActionDestroy, "K4: the machine's destroy Job exists")
	if o, _, err := e.object(kindTC, "demo"); err != nil || o.GetDeletionTimestamp() != nil {
		t.Fatalf("the TerraformCluster is deleted (or unreadable: %v) while its machine is being destroyed", err)
	}
	e.succeed(kindTM, "m1", md, nil)
	// Read back now: the Job goes with its TerraformMachine.
	finished, err := e.Env.Kube.BatchV1().Jobs(e.ns).Get(e.Ctx, md.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	md = *finished
	e.waitGone(kindTM, "m1")

	cd := e.waitJob(kindTC, "demo", v1alpha1.JobActionDestroy, "its machines destroyed", nil)
	// The order of creation: the machine's destroy Job finished before the
	// cluster's was created (timestamps have a second's resolution).
	if md.Status.CompletionTime == nil || cd.CreationTimestamp.Before(md.Status.CompletionTime) || cd.CreationTimestamp.Before(&md.CreationTimestamp) {
		t.Errorf("cluster destroy Job %s created at %s, machine destroy Job %s created at %s and completed at %v",
			cd.Name, cd.CreationTimestamp, md.Name, md.CreationTimestamp, md.Status.CompletionTime)
	}
	e.succeed(kindTC, "demo", cd, nil)
	e.waitGone(kindTC, "demo")
	e.WaitFor("Cluster deleted", func() (bool, string) {
		_, err := e.getCAPI(clusterGVR, "demo")
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, "still there"
	})
}
