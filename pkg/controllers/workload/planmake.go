package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/plans"
	"github.com/captf/captf/pkg/runclass"
	"github.com/captf/captf/pkg/runresult"
)

// createPlan makes the TerraformPlan of w from its finished plan Job job
// (O8, A1-137..A1-147): named <target>-<10 hex>, controlled by w, with the
// summary and fingerprint of the Job's result document (addresses and
// actions only, X1). It returns the plan's name, "" when the Job or its
// document is gone or holds no plan (ApplyJobSucceeded says so; a spec
// change or captf.io/retry plans again).
func (c *Controller) createPlan(ctx context.Context, w *workload, job string, reason v1alpha1.PlanReason, now time.Time) (string, error) {
	j := c.cachedJob(w, job)
	var doc *runresult.Result
	if j != nil {
		pod, err := c.readRunPod(ctx, j)
		if err != nil {
			return "", err
		}
		doc = runclass.Finished(j, pod).Result
	}
	if doc == nil || doc.Plan == nil {
		setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed,
			"%s Job %s planned but left no readable plan in its result document: no TerraformPlan is made; change the spec to plan again", jobs.ActionOf(j), job)
		return "", nil
	}
	p := newPlan(w, job, jobs.InputsHashOf(j), reason, doc.Plan)
	client := c.captf.InfrastructureV1alpha1().TerraformPlans(p.Namespace)
	created, err := client.Create(ctx, p, metav1.CreateOptions{FieldManager: fieldManager})
	switch {
	case apierrors.IsAlreadyExists(err):
		// An earlier pass made it; the cache has not shown it yet.
		return p.Name, nil
	case err != nil:
		return "", fmt.Errorf("creating TerraformPlan %s: %w", p.Name, err)
	}
	planStatus(created, plans.Update{Phase: v1alpha1.PlanPhasePending, Reason: v1alpha1.ReasonPlanPending}, now)
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return "", fmt.Errorf("updating the status of TerraformPlan %s: %w", p.Name, err)
	}
	s := p.Spec.Summary
	if reason == v1alpha1.PlanReasonDestructive {
		w.warn(string(v1alpha1.ReasonDestructivePlanBlocked), "apply Job %s applied nothing: its plan deletes %d and replaces %d resources; TerraformPlan %s of generation %d waits for approval: %d to create, %d to update, %d to replace, %d to delete",
			job, s.Delete, s.Replace, p.Name, w.obj.GetGeneration(), s.Create, s.Update, s.Replace, s.Delete)
	} else {
		w.normal(string(v1alpha1.ReasonPlanAwaitingApproval), "TerraformPlan %s of generation %d waits for approval: %d to create, %d to update, %d to replace, %d to delete",
			p.Name, w.obj.GetGeneration(), s.Create, s.Update, s.Replace, s.Delete)
	}
	klog.FromContext(ctx).Info("Created TerraformPlan", "plan", klog.KObj(created), "reason", reason, "job", job, "generation", w.obj.GetGeneration())
	return p.Name, nil
}

// newPlan is the TerraformPlan of w made from Job job (a plan Job, or an
// apply Job the destructive guard stopped), which ran with inputs of hash
// inputsHash and planned doc.
func newPlan(w *workload, job, inputsHash string, reason v1alpha1.PlanReason, doc *runresult.Plan) *v1alpha1.TerraformPlan {
	labels := map[string]string{
		plans.LabelPhase:       string(v1alpha1.PlanPhasePending),
		plans.LabelReason:      string(reason),
		plans.LabelDestructive: strconv.FormatBool(doc.Replace+doc.Delete > 0),
	}
	if cl := w.obj.GetLabels()[plans.LabelClusterName]; cl != "" {
		labels[plans.LabelClusterName] = cl
	}
	sum := v1alpha1.PlanSummary{
		Create: int32(doc.Create), Update: int32(doc.Update), Replace: int32(doc.Replace), Delete: int32(doc.Delete),
		Import: int32(doc.Import), Move: int32(doc.Move), Forget: int32(doc.Forget), OutputChanges: int32(doc.OutputChanges),
		Truncated: doc.Truncated,
	}
	for _, r := range doc.Resources {
		sum.Resources = append(sum.Resources, v1alpha1.PlanResourceChange{Address: r.Address, Action: v1alpha1.PlanAction(r.Action)})
	}
	return &v1alpha1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: w.obj.GetNamespace(),
			Name:      plans.Name(w.obj.GetName(), job),
			Labels:    labels,
			Annotations: map[string]string{
				plans.AnnotationGeneration: strconv.FormatInt(w.obj.GetGeneration(), 10),
				plans.AnnotationPlanJob:    job,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: w.kind.name,
				Name: w.obj.GetName(), UID: w.obj.GetUID(), Controller: ptr.To(true),
			}},
		},
		Spec: v1alpha1.TerraformPlanSpec{
			TargetRef:  v1alpha1.PlanTargetReference{Kind: w.kind.name, Name: w.obj.GetName()},
			PlanHash:   doc.Hash,
			InputsHash: inputsHash,
			Reason:     reason,
			Summary:    sum,
		},
	}
}
