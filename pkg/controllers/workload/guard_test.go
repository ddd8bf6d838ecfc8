package workload

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/plans"
	"github.com/captf/captf/pkg/runresult"
)

var plansGVR = v1alpha1.SchemeGroupVersion.WithResource("terraformplans")

// destructiveDoc is the runner's document of a guarded apply whose plan
// replaces a resource: nothing applied (SPEC O8, A3-64).
func destructiveDoc(t *testing.T, hash string) string {
	t.Helper()
	b, err := (&runresult.Result{
		Version: runresult.Version, Operation: runresult.OperationApply, Image: moduleImage,
		Steps: []runresult.Step{{Name: "init"}, {Name: "plan"}, {Name: "show"}},
		Plan: &runresult.Plan{Changes: runresult.Changes{Update: 1, Replace: 1}, Hash: hash,
			Resources: []runresult.PlanResource{{Address: "fake_lb.front", Action: "replace"}, {Address: "fake_net.main", Action: "update"}}},
		Error: &runresult.Error{Kind: runresult.KindDestructive, Step: runresult.StepApply, Tail: "the plan deletes 0 and replaces 1 resources"},
	}).Marshal()
	require.NoError(t, err)
	return string(b)
}

// runnerArgs is the Terraform container's command line.
func runnerArgs(j *batchv1.Job) []string { return j.Spec.Template.Spec.Containers[0].Command }

// TestSyncGuardDeletesO8: every apply of a provisioned TerraformCluster
// under applyPolicy Automatic runs with the destructive guard (SPEC O8,
// upstream A3-64); a first apply, a Manual cluster (its plans gate it),
// and pools and machines do not.
func TestSyncGuardDeletesO8(t *testing.T) {
	finish := time.Now().Add(-time.Hour)
	for _, tc := range []struct {
		name        string
		policy      v1alpha1.ApplyPolicy
		provisioned bool
		guard       bool
	}{
		{"automatic, provisioned: guarded", v1alpha1.ApplyAutomatic, true, true},
		{"policy unset, provisioned: guarded", "", true, true},
		{"automatic, first apply: not guarded", v1alpha1.ApplyAutomatic, false, false},
		{"manual: a plan Job, not guarded", v1alpha1.ApplyManual, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) {
				c.Generation = 2
				c.Spec.ApplyPolicy = tc.policy
				if tc.provisioned {
					provisionedStatus(&c.Status)
				}
			})
			f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish))
			require.NoError(t, f.sync(kindCluster, "c1"))
			created := f.createdJobs()
			require.Len(t, created, 1)
			require.Equal(t, tc.guard, slices.Contains(runnerArgs(created[0]), "--guard-deletes"), "%v", runnerArgs(created[0]))
		})
	}
	t.Run("a provisioned pool is not guarded", func(t *testing.T) {
		p := newPool("p1", withFinalizer, func(p *v1alpha1.TerraformMachinePool) { p.Generation = 2 })
		require.False(t, guarded(&workload{kind: &kind{name: v1alpha1.KindTerraformMachinePool}, robj: p,
			status: &v1alpha1.WorkloadStatus{Initialization: &v1alpha1.WorkloadInitialization{Provisioned: ptr.To(true)}}}))
	})
}

// TestSyncDestructivePlanO8: a guarded apply that stopped at a
// replacement is not a failure (no backoff, A3-69): the same pass makes a
// TerraformPlan with reason Destructive from its document, the apply waits
// (ApplyJobSucceeded=Unknown/DestructivePlanBlocked, status.pendingPlanRef,
// a DestructivePlanBlocked event, captf_job_runs_total outcome
// destructive), later passes start nothing, and the approval starts the
// apply of exactly that plan (--expect-plan, captf.io/plan), unguarded.
func TestSyncDestructivePlanO8(t *testing.T) {
	f := newFixture(t)
	finish := f.Clock.Now().Add(-time.Hour)
	c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) {
		c.Generation = 2
		provisionedStatus(&c.Status)
	})
	f.seedReady(c1, attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, finish.Add(-time.Minute), finish))
	require.NoError(t, f.sync(kindCluster, "c1"))
	guardedJob := f.createdJobs()[0]
	require.Contains(t, runnerArgs(guardedJob), "--guard-deletes")
	f.catchUp()
	f.PopEvents()

	metrics.Register()
	from := readJobCounters(t)
	const hash = "sha256:0123456789abcdef"
	f.finishDrift(guardedJob, jobFailed, destructiveDoc(t, hash))
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "O8: nothing applies before the approval")
	requireMoved(t, from, map[string]float64{"runs apply destructive": 1}, "a destructive stop")
	st := f.lastStatus()
	cond := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonDestructivePlanBlocked)
	require.NotNil(t, st.PendingPlanRef)
	require.Contains(t, cond.Message, st.PendingPlanRef.Name)
	require.Equal(t, v1alpha1.RunErrorBlocked, st.LastRun.Error.Kind, "upstream A1-80's kind")
	require.Contains(t, eventReasons(f.PopEvents()), "Warning "+string(v1alpha1.ReasonDestructivePlanBlocked))

	o, err := f.Captf.Tracker().Get(plansGVR, testNS, st.PendingPlanRef.Name)
	require.NoError(t, err)
	plan := o.(*v1alpha1.TerraformPlan)
	require.Equal(t, plans.Name("c1", guardedJob.Name), plan.Name)
	require.Equal(t, v1alpha1.PlanReasonDestructive, plan.Spec.Reason)
	require.Equal(t, hash, plan.Spec.PlanHash)
	require.Equal(t, int32(1), plan.Spec.Summary.Replace)
	require.Equal(t, "true", plan.Labels[plans.LabelDestructive])
	require.Equal(t, string(v1alpha1.PlanReasonDestructive), plan.Labels[plans.LabelReason])
	require.Equal(t, guardedJob.Name, plan.Annotations[plans.AnnotationPlanJob])
	require.False(t, plan.Spec.Approved)

	// Later passes, even past any backoff, wait.
	f.catchUp()
	f.Clock.Step(10 * time.Minute)
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "O8: a Destructive plan waits for approval")

	approved := plan.DeepCopy()
	approved.Spec.Approved, approved.Spec.ApprovedBy = true, "alice"
	require.NoError(t, f.Captf.Tracker().Update(plansGVR, approved, testNS))
	f.catchUp()
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1, "actions %v", f.allActions())
	require.Equal(t, v1alpha1.JobActionApply, jobs.ActionOf(created[0]))
	require.Contains(t, runnerArgs(created[0]), "--expect-plan="+hash)
	require.NotContains(t, runnerArgs(created[0]), "--guard-deletes", "O8: an approved plan is applied as approved")
	require.Equal(t, plan.Name, jobs.PlanOf(created[0]))
}

// O8, A1-80: the destructive guard's stop is recorded as kind blocked
// (upstream's name); a status an earlier captf stored with kind
// destructive is still read as that stop, so an upgrade neither counts it
// as a failure nor loses the pending Destructive plan.
func TestDestructiveRunBlockedAndLegacyO8(t *testing.T) {
	rec := &v1alpha1.RunRecord{JobName: "c1-apply-2", Outcome: v1alpha1.RunFailed}
	for kind, want := range map[v1alpha1.RunErrorKind]bool{
		v1alpha1.RunErrorBlocked:     true,
		v1alpha1.RunErrorDestructive: true,
		v1alpha1.RunErrorPlanChanged: false,
		v1alpha1.RunErrorStep:        false,
	} {
		l := &v1alpha1.LastRun{Job: rec.JobName, Error: &v1alpha1.RunError{Kind: kind}}
		require.Equal(t, want, destructiveRun(l, rec), "kind %s", kind)
	}
}
