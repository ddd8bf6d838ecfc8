package workload

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
)

// Tests of SPEC O1: status.lastRun and RunFinished from a finished Job's
// pod, read once.

// runPod is the pod of Job j as the Job controller makes it, its
// Terraform container terminated with exit code and message.
func runPod(j *batchv1.Job, name string, controlled bool, exit int32, message string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: j.Namespace, UID: types.UID("uid-pod-" + name),
			Labels: map[string]string{batchv1.ControllerUidLabel: string(j.UID)}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{
			Name:  jobs.ContainerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Error", Message: message}},
		}}},
	}
	ref := metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID}
	if controlled {
		ref.Controller = ptr.To(true)
	}
	p.OwnerReferences = []metav1.OwnerReference{ref}
	return p
}

// failedApplyDoc is the runner's document of an apply that failed at its
// apply step.
func failedApplyDoc(t *testing.T) string {
	t.Helper()
	b, err := (&runresult.Result{
		Version: runresult.Version, Operation: runresult.OperationApply, Image: moduleImage, Runtime: "OpenTofu v1.12.6",
		Steps:   []runresult.Step{{Name: "setup", DurationMilliseconds: 10}, {Name: "init", DurationMilliseconds: 1500}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 2500}},
		Changes: &runresult.Changes{Create: 1},
		Error:   &runresult.Error{Kind: runresult.KindStep, Step: "apply", Tail: "Error: creating network: quota exceeded"},
	}).Marshal()
	require.NoError(t, err)
	return string(b)
}

// countPodLists counts the pod LISTs of the controller (the fixture logs no
// list).
func (f *fixture) countPodLists() *atomic.Int32 {
	var n atomic.Int32
	f.prependKubeReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.Add(1)
		return false, nil, nil
	})
	return &n
}

// O1: a failed apply's pod message becomes status.lastRun (steps, exit
// code, error), RunFinished on the object and its Job, PlanSummary; the
// next pass neither reads nor writes.
func TestSyncO1RecordsLastRunOnce(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	j.Status.StartTime = ptr.To(metav1.NewTime(epoch.Add(-50 * time.Second)))
	f.seedReady(c1, j)
	f.seed(runPod(j, "c1-apply-pod", true, 1, failedApplyDoc(t)))
	lists := f.countPodLists()

	require.NoError(t, f.sync(kindCluster, "c1"))

	st := f.lastStatus()
	require.Equal(t, &v1alpha1.LastRun{
		Job: j.Name, Operation: v1alpha1.JobActionApply, Generation: 1, Attempt: 1, Outcome: v1alpha1.RunFailed,
		StartTime: ptr.To(metav1.NewTime(epoch.Add(-50 * time.Second).UTC())), FinishTime: st.LastApply.FinishTime,
		Image: moduleImage, RuntimeVersion: "OpenTofu v1.12.6",
		Steps:   []v1alpha1.RunStep{{Name: "setup", DurationMilliseconds: 10}, {Name: "init", DurationMilliseconds: 1500}, {Name: "apply", ExitCode: 1, DurationMilliseconds: 2500}},
		Changes: &v1alpha1.RunChanges{Create: 1},
		Error:   &v1alpha1.RunError{Kind: v1alpha1.RunErrorStep, Step: "apply", ExitCode: ptr.To[int32](1), Summary: "Error: creating network: quota exceeded"},
	}, st.LastRun)
	require.Equal(t, int32(1), lists.Load())
	events := f.PopEvents()
	require.ElementsMatch(t, []string{"Warning " + v1alpha1.EventRunFinished, "Warning " + v1alpha1.EventRunFinished, "Normal " + v1alpha1.EventPlanSummary},
		eventReasons(events))
	require.Contains(t, strings.Join(events, "\n"), "step apply failed with exit code 1: Error: creating network: quota exceeded")
	require.Contains(t, strings.Join(events, "\n"), "1 to create, 0 to update, 0 to replace, 0 to delete")

	// The steady pass: the cache has caught up with the write.
	f.catchUp()
	f.resetActions()
	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.writes(), "steady: no write")
	require.Equal(t, int32(1), lists.Load(), "steady: the pod is not read again")
	require.Empty(t, f.PopEvents())
}

// O1: before the cache shows the write, the next pass keeps what this
// process wrote: no second read, no second event.
func TestSyncO1LaggingCacheNoReread(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	f.seed(runPod(j, "p", true, 1, failedApplyDoc(t)))
	lists := f.countPodLists()
	require.NoError(t, f.sync(kindCluster, "c1"))
	first := f.lastStatus()
	f.PopEvents()
	f.resetActions()

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, int32(1), lists.Load())
	// A write may repeat (the cache lags; the API server refuses it on its
	// resourceVersion): what it carries is what the first pass recorded.
	for _, st := range f.statusWrites() {
		require.Equal(t, first.LastRun, st.LastRun)
	}
	require.NotContains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventRunFinished)
}

// O1 (B1, trust): pods that claim the Job by its label but are not
// controlled by it are never read; the run is recorded from the Job.
func TestSyncO1ForgedPodIgnored(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	forged := failedApplyDoc(t)
	f.seed(runPod(j, "forged", false, 3, strings.ReplaceAll(forged, "quota exceeded", "forged tail")))

	require.NoError(t, f.sync(kindCluster, "c1"))

	l := f.lastStatus().LastRun
	require.NotNil(t, l)
	require.Empty(t, l.Steps)
	require.Equal(t, v1alpha1.RunErrorUnknown, l.Error.Kind)
	require.Contains(t, l.Error.Summary, "pod is gone")
	require.NotContains(t, l.Error.Summary, "forged")
}

// O1: a Job already gone (pruned) when its record is read gives lastRun
// from the record alone, without a pod read and never as an interruption;
// the failed run keeps its backoff (T7).
func TestSyncO1JobGoneFromRecord(t *testing.T) {
	f := newFixture(t)
	rec := &v1alpha1.RunRecord{Generation: 1, JobName: "c1-apply-gone", Outcome: v1alpha1.RunFailed, FinishTime: metav1.NewTime(epoch), Attempt: 1}
	c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) { c.Status.LastApply = rec })
	f.seedReady(c1)
	lists := f.countPodLists()

	require.NoError(t, f.sync(kindCluster, "c1"))

	require.Zero(t, lists.Load())
	require.Empty(t, f.createdJobs(), "T7: the backoff still holds")
	l := f.lastStatus().LastRun
	require.Equal(t, "c1-apply-gone", l.Job)
	require.Equal(t, v1alpha1.RunFailed, l.Outcome)
	require.Equal(t, v1alpha1.RunErrorUnknown, l.Error.Kind)
	require.Contains(t, l.Error.Summary, "the Job is gone")
}

// O1 (B10, B11): a message over the kubelet's bound is refused whole
// (unknown kind, nothing of it quoted); a refused pod read is recorded as
// unread, not an error.
func TestSyncO1HostileOrUnreadable(t *testing.T) {
	t.Run("huge message", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer)
		j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
		f.seedReady(c1, j)
		f.seed(runPod(j, "p", true, 1, `{"version":1,"error":{"tail":"`+strings.Repeat("A", 1<<20)+`"}}`))
		require.NoError(t, f.sync(kindCluster, "c1"))
		l := f.lastStatus().LastRun
		require.Equal(t, v1alpha1.RunErrorUnknown, l.Error.Kind)
		require.Contains(t, l.Error.Summary, "result document")
		require.NotContains(t, l.Error.Summary, "AAAA")
		require.LessOrEqual(t, len(l.Error.Summary), v1alpha1.MaxRunErrorSummary)
	})
	t.Run("forbidden", func(t *testing.T) {
		f := newFixture(t)
		c1 := newCluster("c1", withFinalizer)
		j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
		f.seedReady(c1, j)
		f.prependKubeReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
		})
		require.NoError(t, f.sync(kindCluster, "c1"))
		l := f.lastStatus().LastRun
		require.Equal(t, v1alpha1.RunErrorUnknown, l.Error.Kind)
		require.Contains(t, l.Error.Summary, "could not be read")
	})
}

// O1: the newest recorded run is the one that finished last.
func TestNewestRunO1(t *testing.T) {
	at := func(s int64) metav1.Time { return metav1.NewTime(time.Unix(s, 0)) }
	a := &v1alpha1.RunRecord{JobName: "a", FinishTime: at(10)}
	d := &v1alpha1.RunRecord{JobName: "d", FinishTime: at(20)}
	for _, tt := range []struct {
		name   string
		st     v1alpha1.WorkloadStatus
		action v1alpha1.JobAction
		want   *v1alpha1.RunRecord
	}{
		{"none", v1alpha1.WorkloadStatus{}, "", nil},
		{"apply only", v1alpha1.WorkloadStatus{LastApply: a}, v1alpha1.JobActionApply, a},
		{"destroy newer", v1alpha1.WorkloadStatus{LastApply: a, LastDestroy: d}, v1alpha1.JobActionDestroy, d},
		{"apply newer", v1alpha1.WorkloadStatus{LastApply: &v1alpha1.RunRecord{JobName: "a2", FinishTime: at(30)}, LastDestroy: d}, v1alpha1.JobActionApply, &v1alpha1.RunRecord{JobName: "a2", FinishTime: at(30)}},
		{"same time: the destroy", v1alpha1.WorkloadStatus{LastApply: &v1alpha1.RunRecord{JobName: "a3", FinishTime: at(20)}, LastDestroy: d}, v1alpha1.JobActionDestroy, d},
	} {
		action, got := newestRun(&tt.st)
		require.Equal(t, tt.action, action, tt.name)
		require.Equal(t, tt.want, got, tt.name)
	}
}

// O1, section 10: a pass whose status write fails (a Conflict) sends no
// RunFinished; the pass done again, whose write succeeds, sends it once.
func TestSyncO1RunFinishedOnceAfterAConflict(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	f.seed(runPod(j, "c1-apply-pod", true, 1, failedApplyDoc(t)))
	conflicts := 1
	f.Captf.PrependReactor("update", "terraformclusters", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(v1alpha1.Resource("terraformclusters"), "c1", fmt.Errorf("the object has been modified"))
		}
		return false, nil, nil
	})

	require.Error(t, f.sync(kindCluster, "c1"))
	require.NotContains(t, eventReasons(f.PopEvents()), "Warning "+v1alpha1.EventRunFinished, "nothing recorded yet")

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.ElementsMatch(t, []string{"Warning " + v1alpha1.EventRunFinished, "Warning " + v1alpha1.EventRunFinished, "Normal " + v1alpha1.EventPlanSummary},
		eventReasons(f.PopEvents()))
}
