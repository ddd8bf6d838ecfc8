package api

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestDeletionPolicyCRDO5: the CRDs take upstream's spec.deletionPolicy
// values Destroy and Retain (SPEC O5, upstream A1-72), still take captf's
// earlier name Delete (a deprecated alias of Destroy) so that stored
// objects keep validating, and refuse anything else.
func TestDeletionPolicyCRDO5(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "deletionpolicy", nil)
	api := e.Captf.InfrastructureV1alpha1()
	for _, p := range []v1alpha1.DeletionPolicy{v1alpha1.DeletionPolicyDestroy, v1alpha1.DeletionPolicyDelete, v1alpha1.DeletionPolicyRetain} {
		name := strings.ToLower(string(p))
		c, err := api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "id"},
				StatePolicy: v1alpha1.StatePolicy{DeletionPolicy: p}}}, metav1.CreateOptions{})
		if err != nil || c.Spec.DeletionPolicy != p {
			t.Fatalf("O5: a cluster with deletionPolicy %s must be accepted and kept as written: %v", p, err)
		}
		m, err := api.TerraformMachines(ns).Create(ctx, &v1alpha1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.TerraformMachineSpec{StatePolicy: v1alpha1.StatePolicy{DeletionPolicy: p}}}, metav1.CreateOptions{})
		if err != nil || m.Spec.DeletionPolicy != p {
			t.Fatalf("O5: a machine with deletionPolicy %s must be accepted: %v", p, err)
		}
	}
	_, err := api.TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec: v1alpha1.TerraformMachinePoolSpec{StatePolicy: v1alpha1.StatePolicy{DeletionPolicy: "Orphan"}}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "deletionPolicy") {
		t.Fatalf("O5: a deletionPolicy other than Destroy, Delete or Retain must be refused, got %v", err)
	}
}
