package api

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/test/integration/framework"
)

// SPEC O8's CEL on TerraformPlan, without any webhook (none runs in this
// package): targetRef is immutable, approval cannot be withdrawn,
// approvedBy goes with approved, and an approved plan's spec is immutable.
// Also the printer columns (upstream A1-40) as the API server computes them.
func TestPlanCELAndColumns(t *testing.T) {
	e := framework.Get(t)
	ctx := framework.Context(t)
	ns := e.CreateNamespace(t, "plans", nil)
	plans := e.Captf.InfrastructureV1alpha1().TerraformPlans(ns)
	p, err := plans.Create(ctx, &v1alpha1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-0123456789"},
		Spec: v1alpha1.TerraformPlanSpec{
			TargetRef: v1alpha1.PlanTargetReference{Kind: v1alpha1.KindTerraformCluster, Name: "prod"},
			PlanHash:  "p2:0123", Reason: v1alpha1.PlanReasonDestructive,
			Summary: v1alpha1.PlanSummary{Create: 1, Replace: 2},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	patch := func(body string) error {
		_, err := plans.Patch(ctx, p.Name, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	refused := func(body string, fragment string) {
		t.Helper()
		if err := patch(body); err == nil || !strings.Contains(err.Error(), fragment) {
			t.Fatalf("patch %s: %v, want a refusal with %q", body, err, fragment)
		}
	}
	refused(`{"spec":{"targetRef":{"name":"other"}}}`, "spec.targetRef is immutable")
	refused(`{"spec":{"approvedBy":"alice"}}`, "spec.approvedBy is set exactly on approved plans")
	refused(`{"spec":{"approved":true}}`, "spec.approvedBy is set exactly on approved plans")
	if err := patch(`{"spec":{"summary":{"delete":1}}}`); err != nil {
		t.Fatalf("a pending plan's spec may change: %v", err)
	}
	// Without the webhook nothing checks who approves: the CEL rules only.
	if err := patch(`{"spec":{"approved":true,"approvedBy":"alice"}}`); err != nil {
		t.Fatal(err)
	}
	refused(`{"spec":{"approved":false,"approvedBy":null}}`, "spec.approved cannot be withdrawn")
	refused(`{"spec":{"planHash":"p2:other"}}`, "an approved plan's spec is immutable")
	refused(`{"spec":{"approvedBy":"bob"}}`, "an approved plan's spec is immutable")

	p, err = plans.Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = v1alpha1.PlanPhaseApproved
	if _, err := plans.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := e.Captf.InfrastructureV1alpha1().RESTClient().Get().Namespace(ns).Resource("terraformplans").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var names, cells []string
	for i, col := range table.ColumnDefinitions {
		name := col.Name
		if col.Priority > 0 {
			name = "+" + name
		}
		names = append(names, name)
		if col.Name != "Age" && len(table.Rows) == 1 && i < len(table.Rows[0].Cells) {
			cells = append(cells, fmt.Sprint(table.Rows[0].Cells[i]))
		}
	}
	want := []string{"Name", "Target", "Reason", "Phase", "Create", "Update", "Replace", "Delete", "Approved", "+Approved By", "Age"}
	if !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	wantCells := []string{"prod-0123456789", "prod", "Destructive", "Approved", "1", "0", "2", "1", "true", "alice"}
	if !slices.Equal(cells, wantCells) {
		t.Errorf("row %v, want %v", cells, wantCells)
	}
}
