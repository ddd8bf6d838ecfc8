package api

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// TestApplyPolicyCRDO8: spec.applyPolicy defaults to Automatic on
// clusters and pools, accepts Manual, and refuses anything else (SPEC O8,
// upstream A1-97).
func TestApplyPolicyCRDO8(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "policy", nil)
	api := e.Captf.InfrastructureV1alpha1()
	c, err := api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "unset"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "id"}}}, metav1.CreateOptions{})
	if err != nil || c.Spec.ApplyPolicy != v1alpha1.ApplyAutomatic {
		t.Fatalf("O8: an unset applyPolicy defaults to Automatic: %v %q", err, c.Spec.ApplyPolicy)
	}
	p, err := api.TerraformMachinePools(ns).Create(ctx, &v1alpha1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "manual"},
		Spec: v1alpha1.TerraformMachinePoolSpec{ApplyPolicy: v1alpha1.ApplyManual}}, metav1.CreateOptions{})
	if err != nil || p.Spec.ApplyPolicy != v1alpha1.ApplyManual {
		t.Fatalf("O8: a pool takes Manual: %v %q", err, p.Spec.ApplyPolicy)
	}
	_, err = api.TerraformClusters(ns).Create(ctx, &v1alpha1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: v1alpha1.TerraformClusterSpec{IdentityRef: &v1alpha1.IdentityReference{Name: "id"}, ApplyPolicy: "manual"}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "applyPolicy") {
		t.Fatalf("O8: applyPolicy other than Automatic or Manual must be refused, got %v", err)
	}
}
