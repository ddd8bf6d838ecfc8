package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/test/integration/framework"
	"github.com/captf/captf/test/integration/framework/faultkit"
)

// TestT7OutcomesRecorded checks SPEC T7 against the API server: a
// succeeded apply is recorded in the stored status.lastApply; deleting its
// Job (as kubectl delete does) never runs the generation again; a new
// captf.io/retry value starts a new attempt Job at once, recorded in
// status.observedRetry, and a failed attempt is recorded as such.
//
// The T7 metrics move by exactly this: one succeeded and four failed apply
// runs recorded, four annotation retries, one pruned Job, whatever the
// resyncs in between (a record is counted once, by the write that stores
// it, against the real API server's resourceVersion checks).
func TestT7OutcomesRecorded(t *testing.T) {
	f := setup(t)
	metricsBefore := scrapeJobMetrics(f)
	ns := f.Env.CreateNamespace(t, "tenant", nil)
	data := framework.DefaultData(secretValue)
	id := f.Identity(f.Source(data), framework.List(ns))
	c := f.Cluster(ns, "t7", id)
	first := f.WaitJob(ns, v1alpha1.JobActionApply)
	if want := jobs.Name(v1alpha1.KindTerraformCluster, c.Name, c.UID, v1alpha1.JobActionApply, 1); first.Name != want {
		t.Fatalf("T7: attempt 1 keeps the name %s, got %s", want, first.Name)
	}
	if err := f.Env.FinishJob(f.Ctx, ns, first.Name, ""); err != nil {
		t.Fatal(err)
	}
	rec := waitLastApply(f, ns, c.Name, "the first apply, succeeded", func(r *v1alpha1.RunRecord) bool {
		return r.JobName == first.Name && r.Outcome == v1alpha1.RunSucceeded && r.Generation == 1 && r.Attempt == 1 &&
			r.SourceHash == framework.HashOf(data) && !r.FinishTime.IsZero()
	})

	// kubectl delete job: the record stays and the generation never runs
	// again, through the Job's delete event and several resyncs.
	bg := metav1.DeletePropagationBackground
	if err := f.Env.Kube.BatchV1().Jobs(ns).Delete(f.Ctx, first.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	f.WaitFor("the Job gone", func() (bool, string) {
		_, err := f.Env.Kube.BatchV1().Jobs(ns).Get(f.Ctx, first.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
	time.Sleep(3 * syncPeriod)
	if js := f.Jobs(ns, v1alpha1.JobActionApply); len(js) != 0 {
		t.Fatalf("T7: a deleted succeeded apply Job ran its generation again: %s", jobNames(js))
	}
	cl := f.GetCluster(ns, c.Name)
	if cl.Status.LastApply == nil || *cl.Status.LastApply != *rec {
		t.Fatalf("T7: status.lastApply changed after the Job was deleted: %+v, was %+v", cl.Status.LastApply, rec)
	}
	f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionTrue, v1alpha1.ReasonApplySucceeded)

	// captf.io/retry: a new attempt Job, at once.
	annotateRetry(f, ns, c.Name, "first")
	second := f.WaitJob(ns, v1alpha1.JobActionApply)
	if want := jobs.AttemptName(v1alpha1.KindTerraformCluster, c.Name, c.UID, v1alpha1.JobActionApply, 1, 2); second.Name != want ||
		second.Annotations[v1alpha1.AnnotationJobAttempt] != "2" || second.Annotations[v1alpha1.AnnotationRetry] != "first" {
		t.Fatalf("T7: the retry Job is %s with annotations %v, want %s, attempt 2, retry first", second.Name, second.Annotations, want)
	}
	f.WaitFor("status.observedRetry", func() (bool, string) {
		got := f.GetCluster(ns, c.Name).Status.ObservedRetry
		return got == "first", got
	})
	if err := f.Env.FinishJob(f.Ctx, ns, second.Name, "BackoffLimitExceeded"); err != nil {
		t.Fatal(err)
	}
	waitLastApply(f, ns, c.Name, "the retry, failed", func(r *v1alpha1.RunRecord) bool {
		return r.JobName == second.Name && r.Outcome == v1alpha1.RunFailed && r.Attempt == 2
	})
	cond := f.WaitCondition("cluster", f.ClusterConds(ns, c.Name), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	if !strings.Contains(cond.Message, v1alpha1.AnnotationRetry) || strings.Contains(cond.Message, "delete the Job") {
		t.Errorf("T7: the message must say when the retry happens and how to retry now: %q", cond.Message)
	}

	// A new value runs the next attempt; each fails. Past three failed
	// Jobs the oldest is pruned, with the manager's own RBAC.
	for n := 3; n <= 5; n++ {
		value := fmt.Sprintf("retry-%d", n)
		annotateRetry(f, ns, c.Name, value)
		var job batchv1.Job
		f.WaitFor(fmt.Sprintf("attempt %d", n), func() (bool, string) {
			for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
				if j.Annotations[v1alpha1.AnnotationJobAttempt] == fmt.Sprint(n) {
					job = j
					return j.Annotations[v1alpha1.AnnotationRetry] == value, "retry " + j.Annotations[v1alpha1.AnnotationRetry]
				}
			}
			return false, jobNames(f.Jobs(ns, v1alpha1.JobActionApply))
		})
		if err := f.Env.FinishJob(f.Ctx, ns, job.Name, "BackoffLimitExceeded"); err != nil {
			t.Fatal(err)
		}
		waitLastApply(f, ns, c.Name, fmt.Sprintf("attempt %d, failed", n), func(r *v1alpha1.RunRecord) bool {
			return r.JobName == job.Name && r.Outcome == v1alpha1.RunFailed && int(r.Attempt) == n
		})
	}
	f.WaitFor("the oldest failed Job pruned", func() (bool, string) {
		js := f.Jobs(ns, v1alpha1.JobActionApply)
		for _, j := range js {
			if j.Name == second.Name && j.DeletionTimestamp == nil {
				return false, jobNames(js)
			}
		}
		return len(js) >= 3, jobNames(js)
	})
	time.Sleep(2 * syncPeriod)
	var left []string
	for _, j := range f.Jobs(ns, v1alpha1.JobActionApply) {
		if j.DeletionTimestamp == nil {
			left = append(left, j.Annotations[v1alpha1.AnnotationJobAttempt])
		}
	}
	if fmt.Sprint(left) != "[3 4 5]" {
		t.Fatalf("T7: want the failed attempts 3, 4 and 5 kept and nothing new, got attempts %v", left)
	}

	got := map[string]float64{}
	for _, s := range faultkit.Diff(metricsBefore, scrapeJobMetrics(f)) {
		if s.Value != 0 {
			got[s.Key()] = s.Value
		}
	}
	want := map[string]float64{
		`captf_job_runs_total{action="apply",outcome="succeeded"}`:     1,
		`captf_job_runs_total{action="apply",outcome="failed"}`:        4,
		`captf_job_retries_total{action="apply",trigger="annotation"}`: 4,
		`captf_jobs_pruned_total{action="apply"}`:                      1,
	}
	// The counters are the manager's, shared with every other object of
	// the package: an earlier test's objects may record their own runs
	// in this window (seen: apply Jobs refused by Pod Security, failed).
	// So this object's runs are a lower bound here; that each run counts
	// exactly once is the unit tests' (TestSyncT7MetricsRunRecordedOnce).
	for k, v := range want {
		if got[k] < v {
			t.Errorf("T7 metrics: %s moved by %v, want at least %v (all: %v)", k, got[k], v, got)
		}
	}
}

// scrapeJobMetrics returns the manager's T7 Job counters.
func scrapeJobMetrics(f *framework.Fixture) faultkit.Metrics {
	f.T.Helper()
	m, err := f.Manager.Scrape()
	if err != nil {
		f.T.Fatal(err)
	}
	var out faultkit.Metrics
	for _, s := range m {
		switch s.Name {
		case "captf_job_runs_total", "captf_job_retries_total", "captf_jobs_pruned_total":
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		f.T.Fatal("the manager serves no T7 Job metrics")
	}
	return out
}

// waitLastApply waits until the stored status.lastApply satisfies ok and
// returns it.
func waitLastApply(f *framework.Fixture, ns, name, what string, ok func(*v1alpha1.RunRecord) bool) *v1alpha1.RunRecord {
	f.T.Helper()
	var rec *v1alpha1.RunRecord
	f.WaitFor("status.lastApply: "+what, func() (bool, string) {
		rec = f.GetCluster(ns, name).Status.LastApply
		if rec == nil {
			return false, "unset"
		}
		return ok(rec), fmt.Sprintf("%+v", *rec)
	})
	return rec
}

// annotateRetry sets captf.io/retry on a cluster.
func annotateRetry(f *framework.Fixture, ns, name, value string) {
	f.T.Helper()
	f.EditCluster(ns, name, func(cl *v1alpha1.TerraformCluster) {
		cl.Annotations[v1alpha1.AnnotationRetry] = value
	})
}

func jobNames(js []batchv1.Job) string {
	var out []string
	for _, j := range js {
		out = append(out, j.Name)
	}
	return strings.Join(out, ", ")
}
