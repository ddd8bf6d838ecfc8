package workload

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
)

// TestSyncPlanGateO8: under applyPolicy Manual, the apply of a new
// generation of a provisioned cluster is a plan Job, not an apply Job
// (SPEC O8), with ApplyJobSucceeded=Unknown/PlanAwaitingApproval; the
// first apply (not provisioned) is not gated (A3-63), and Automatic
// applies at once.
func TestSyncPlanGateO8(t *testing.T) {
	finish := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		policy      v1alpha1.ApplyPolicy
		provisioned bool
		want        v1alpha1.JobAction
	}{
		{"manual, applied before: a plan Job", v1alpha1.ApplyManual, true, v1alpha1.JobActionPlan},
		{"manual, first apply: not gated", v1alpha1.ApplyManual, false, v1alpha1.JobActionApply},
		{"automatic: an apply Job", v1alpha1.ApplyAutomatic, true, v1alpha1.JobActionApply},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) {
				c.Generation = 2
				c.Spec.ApplyPolicy = tc.policy
				if tc.provisioned {
					c.Status.Initialization = &v1alpha1.WorkloadInitialization{Provisioned: ptr.To(true)}
				}
			})
			f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish))
			require.NoError(t, f.sync(kindCluster, "c1"))
			created := f.createdJobs()
			require.Len(t, created, 1)
			require.Equal(t, tc.want, jobs.ActionOf(created[0]))
			if tc.want == v1alpha1.JobActionPlan {
				require.Contains(t, created[0].Spec.Template.Spec.Containers[0].Command, "plan")
				requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonPlanAwaitingApproval)
			}
		})
	}
}

// TestCountPlanChangedO8: a recorded apply that found another plan than
// the approved one counts as plan_changed in captf_job_runs_total, not as
// failed (SPEC O8, A3-69: not a failure, no alert).
func TestCountPlanChangedO8(t *testing.T) {
	rec := &v1alpha1.RunRecord{Generation: 2, JobName: "c1-apply-2-a2", Outcome: v1alpha1.RunFailed, Attempt: 2}
	written := &v1alpha1.WorkloadStatus{LastApply: rec, LastRun: &v1alpha1.LastRun{Job: rec.JobName, Operation: v1alpha1.JobActionApply,
		Outcome: v1alpha1.RunFailed, Error: &v1alpha1.RunError{Kind: v1alpha1.RunErrorPlanChanged}}}
	metrics.Register()
	from := readJobCounters(t)
	countRecorded(written, &v1alpha1.WorkloadStatus{}, nil)
	requireMoved(t, from, map[string]float64{"runs apply plan_changed": 1}, "a plan-changed apply")
}
