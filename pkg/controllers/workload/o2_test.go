package workload

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/internal/controllertest"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/runclass"
	"github.com/captf/captf/pkg/runresult"
)

// Tests of SPEC O2: interrupted runs retried at once and not counted
// (A3-86), ImagePullFailed (A3-88), ImageInvalid (A3-06).

// disrupted makes a pod as the control plane leaves one it evicted.
func disrupted(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"})
	p.Status.ContainerStatuses[0].State.Terminated.ExitCode = 143
	return p
}

// withInterruptions sets captf.io/interruptions on a Job.
func withInterruptions(j *batchv1.Job, n int) *batchv1.Job {
	j.Annotations[v1alpha1.AnnotationJobInterruptions] = strconv.Itoa(n)
	return j
}

// O2 (A3-86): how each finished run counts. An interruption (the pod's
// DisruptionTarget, its deletion, the runner stopped by a signal) starts
// the next attempt at once, carrying the count of interruptions, and is
// counted as interrupted, not failed; a failure, a pod gone, and an
// interruption past maxFreeInterruptions wait the backoff.
func TestSyncO2InterruptedRetriedAtOnce(t *testing.T) {
	stopped, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationApply,
		Error: &runresult.Error{Kind: runresult.KindInterrupted, Step: "apply", Tail: "terminated by signal"}}).Marshal()
	require.NoError(t, err)
	for _, tt := range []struct {
		name        string
		attempt     int
		interrupted int // captf.io/interruptions on the finished Job
		pod         func(j *batchv1.Job) *corev1.Pod
		wantAtOnce  bool
		wantCarried int // captf.io/interruptions of the next Job
		wantOutcome string
	}{
		{"evicted", 1, 0, func(j *batchv1.Job) *corev1.Pod { return disrupted(runPod(j, "p", true, 137, "")) }, true, 1, metrics.OutcomeInterrupted},
		{"pod deleted", 1, 0, func(j *batchv1.Job) *corev1.Pod {
			p := runPod(j, "p", true, 137, "")
			p.DeletionTimestamp = ptr.To(metav1.NewTime(epoch))
			p.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
			return p
		}, true, 1, metrics.OutcomeInterrupted},
		{"signal", 2, 1, func(j *batchv1.Job) *corev1.Pod { return runPod(j, "p", true, 143, string(stopped)) }, true, 2, metrics.OutcomeInterrupted},
		{"step failure", 1, 0, func(j *batchv1.Job) *corev1.Pod { return runPod(j, "p", true, 1, failedApplyDoc(t)) }, false, 0, metrics.OutcomeFailed},
		{"pod gone", 1, 0, nil, false, 0, metrics.OutcomeFailed},
		{"past the free interruptions", maxFreeInterruptions + 1, maxFreeInterruptions, func(j *batchv1.Job) *corev1.Pod { return disrupted(runPod(j, "p", true, 137, "")) }, false, maxFreeInterruptions, metrics.OutcomeInterrupted},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			j := withInterruptions(attemptJob(c1, v1alpha1.JobActionApply, 1, tt.attempt, jobFailed, epoch.Add(-time.Minute), epoch), tt.interrupted)
			f.seedReady(c1, j)
			if tt.pod != nil {
				f.seed(tt.pod(j))
			}
			from := readJobCounters(t)

			require.NoError(t, f.sync(kindCluster, "c1"))

			st := f.lastStatus()
			require.Equal(t, j.Name, st.LastApply.JobName)
			require.Equal(t, v1alpha1.RunFailed, st.LastApply.Outcome, "T7: the record keeps the Job's outcome")
			require.Equal(t, j.Name, st.LastRun.Job)
			moved := map[string]float64{"runs apply " + tt.wantOutcome: 1}
			if !tt.wantAtOnce {
				require.Empty(t, f.createdJobs(), "a counted failure waits its backoff")
				requireMoved(t, from, moved, tt.name)
				return
			}
			require.Equal(t, v1alpha1.RunErrorInterrupted, st.LastRun.Error.Kind)
			created := f.createdJobs()
			require.Len(t, created, 1, "O2: a new Job at once")
			require.Equal(t, jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionApply, 1, tt.attempt+1), created[0].Name)
			require.Equal(t, tt.wantCarried, jobs.InterruptionsOf(created[0]))
			moved["retries apply "+metrics.TriggerInterrupt] = 1
			requireMoved(t, from, moved, tt.name)
		})
	}
}

// O2: the backoff of a failure does not count the interrupted attempts
// before it: attempt 3 after two interruptions waits one minute, as a
// first failure does, not four.
func TestSyncO2BackoffSkipsInterruptions(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := withInterruptions(attemptJob(c1, v1alpha1.JobActionApply, 1, 3, jobFailed, epoch.Add(-time.Minute), epoch), 2)
	f.seedReady(c1, j)
	f.seed(runPod(j, "p", true, 1, failedApplyDoc(t)))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs())
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonApplyFailed)
	require.Contains(t, c.Message, epoch.Add(time.Minute).UTC().Format(time.RFC3339))
	f.catchUp()
	controllertest.RequireRequeuedAfter(t, f.c.queues[kindCluster], f.Clock, cache.ObjectName{Namespace: testNS, Name: "c1"}, time.Minute)
	require.NoError(t, f.sync(kindCluster, "c1"))
	created := f.createdJobs()
	require.Len(t, created, 1)
	require.Equal(t, 2, jobs.InterruptionsOf(created[0]), "the count stays with the generation")
}

// O2: an interrupted destroy is retried at once as well.
func TestSyncO2InterruptedDestroy(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", deleting)
	apply := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobSucceeded, epoch.Add(-time.Hour), epoch.Add(-time.Hour))
	d := attemptJob(c1, v1alpha1.JobActionDestroy, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, apply, d)
	f.seed(disrupted(runPod(d, "p", true, 137, "")))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, []string{jobs.AttemptName(kindCluster, "c1", c1.UID, v1alpha1.JobActionDestroy, 1, 2)}, f.createdJobNames())
	require.Equal(t, v1alpha1.RunErrorInterrupted, f.lastStatus().LastRun.Error.Kind)
}

// O2 (A3-86): while the new Job cannot start (paused), the condition says
// the run was interrupted, Unknown: its outcome is not known.
func TestSyncO2InterruptedCondition(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer, func(c *v1alpha1.TerraformCluster) {
		c.Annotations = map[string]string{v1alpha1.AnnotationPaused: ""}
	})
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	f.seed(disrupted(runPod(j, "p", true, 137, "")))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs())
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobInterrupted)
	require.Contains(t, c.Message, "EvictionByEvictionAPI")
	require.Contains(t, c.Message, "not counted as a failure")
}

// O2 (A3-06): the runner's image-layout error is ImageInvalid.
func TestSyncO2ImageInvalid(t *testing.T) {
	doc, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationApply, Image: moduleImage,
		Error: &runresult.Error{Kind: runresult.KindImageLayout, Step: "setup", Tail: "no .tf file in /module"}}).Marshal()
	require.NoError(t, err)
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	f.seed(runPod(j, "p", true, 1, string(doc)))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Empty(t, f.createdJobs(), "a real failure: the backoff holds")
	c := requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonImageInvalid)
	require.Contains(t, c.Message, "not a module image")
}

// pendingPod is the pod of running Job j waiting for image, which it
// cannot pull.
func pendingPod(j *batchv1.Job, controlled bool, image string) *corev1.Pod {
	p := runPod(j, "pending", controlled, 0, "")
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
		Name: jobs.ContainerName, Image: image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "` + image + `"`}},
	}}}
	return p
}

// runningJob is an apply Job of c for generation gen that started at
// start and has no ready pod.
func runningJob(c *v1alpha1.TerraformCluster, gen int64, start time.Time) *batchv1.Job {
	j := attemptJob(c, v1alpha1.JobActionApply, gen, 1, jobRunning, start, start)
	j.Status.StartTime = ptr.To(metav1.NewTime(start))
	j.Status.Ready = ptr.To[int32](0)
	return j
}

// O2 (A3-88): a running Job whose pod cannot pull its image is ended once
// runclass.PullGrace has passed since it started (in the foreground, with
// a UID precondition) and recorded as a failed run naming the image:
// ImagePullFailed, status.lastRun kind image-pull, a RunFinished event;
// the next attempt waits the failure backoff. Before the grace nothing is
// read and the key comes back at the grace.
func TestSyncO2ImagePullFailed(t *testing.T) {
	const image = "registry.example.com/modules/missing:v9"
	key := cache.ObjectName{Namespace: testNS, Name: "c1"}
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := runningJob(c1, 1, epoch.Add(-10*time.Second))
	f.seedReady(c1, j)
	f.seed(pendingPod(j, true, image))
	lists := f.countPodLists()

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Zero(t, lists.Load(), "nothing is read before the grace")
	f.catchUp()
	controllertest.RequireRequeuedAfter(t, f.c.queues[kindCluster], f.Clock, key, runclass.PullGrace-10*time.Second)
	f.resetActions()

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Equal(t, int32(1), lists.Load())
	del, ok := f.find("delete", "jobs", "")
	require.True(t, ok, "the Job is ended")
	opts := del.raw.(k8stesting.DeleteActionImpl).DeleteOptions
	require.Equal(t, metav1.DeletePropagationForeground, *opts.PropagationPolicy)
	require.Equal(t, j.UID, *opts.Preconditions.UID)
	require.Empty(t, f.createdJobs())
	st := f.lastStatus()
	require.Equal(t, &v1alpha1.RunRecord{Generation: 1, JobName: j.Name, Outcome: v1alpha1.RunFailed, Attempt: 1,
		FinishTime: metav1.NewTime(f.Clock.Now().UTC().Truncate(time.Second)), SourceHash: st.LastApply.SourceHash}, st.LastApply)
	require.Equal(t, v1alpha1.RunErrorImagePull, st.LastRun.Error.Kind)
	require.Equal(t, image, st.LastRun.Image)
	c := requireCondition(t, st, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonImagePullFailed)
	require.Contains(t, c.Message, image)
	require.Contains(t, c.Message, "a new apply Job starts at")
	require.Contains(t, strings.Join(f.PopEvents(), "\n"), image)
}

// O2 (trust): a pod that claims the Job without its controller reference
// is not read for a pull failure; a Job with a ready pod, or whose pod
// only waits to be scheduled, is not ended.
func TestSyncO2PullNotEnded(t *testing.T) {
	for _, tt := range []struct {
		name  string
		ready int32
		pod   func(j *batchv1.Job) *corev1.Pod
	}{
		{"forged pod", 0, func(j *batchv1.Job) *corev1.Pod { return pendingPod(j, false, "registry.example.com/x:1") }},
		{"ready", 1, func(j *batchv1.Job) *corev1.Pod { return pendingPod(j, true, "registry.example.com/x:1") }},
		{"unscheduled", 0, func(j *batchv1.Job) *corev1.Pod {
			p := pendingPod(j, true, "")
			p.Status.ContainerStatuses = nil
			return p
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			c1 := newCluster("c1", withFinalizer)
			j := runningJob(c1, 1, epoch.Add(-time.Minute))
			j.Status.Ready = ptr.To(tt.ready)
			f.seedReady(c1, j)
			f.seed(tt.pod(j))
			require.NoError(t, f.sync(kindCluster, "c1"))
			_, deleted := f.find("delete", "jobs", "")
			require.False(t, deleted)
			require.Nil(t, f.lastStatus().LastApply)
		})
	}
}

// O2: a Job of an outdated generation whose image cannot be pulled is
// ended at once, without waiting for the grace.
func TestSyncO2PullOutdatedAtOnce(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer, generation(2))
	j := runningJob(c1, 1, epoch.Add(-time.Second))
	f.seedReady(c1, j)
	f.seed(pendingPod(j, true, "registry.example.com/x:old"))
	require.NoError(t, f.sync(kindCluster, "c1"))
	_, deleted := f.find("delete", "jobs", "")
	require.True(t, deleted)
	require.Equal(t, int64(1), f.lastStatus().LastApply.Generation)
}

// O2: when the pass reads a running Job's pod: never for a finished,
// deleted, suspended or ready Job; at once for an outdated generation;
// else from PullGrace after its start, then at growing intervals.
func TestPullCheckO2(t *testing.T) {
	start := epoch
	job := func(mods ...func(*batchv1.Job)) *batchv1.Job {
		j := runningJob(newCluster("c1"), 2, start)
		for _, m := range mods {
			m(j)
		}
		return j
	}
	for _, tt := range []struct {
		name     string
		j        *batchv1.Job
		now      time.Time
		wantRead bool
		wantNext time.Time
	}{
		{"none", nil, start, false, time.Time{}},
		{"finished", attemptJob(newCluster("c1"), v1alpha1.JobActionApply, 2, 1, jobFailed, start, start), start.Add(time.Hour), false, time.Time{}},
		{"ready", job(func(j *batchv1.Job) { j.Status.Ready = ptr.To[int32](1) }), start.Add(time.Hour), false, time.Time{}},
		{"suspended (K5)", job(func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }), start.Add(time.Hour), false, time.Time{}},
		{"being deleted", job(func(j *batchv1.Job) { j.DeletionTimestamp = ptr.To(metav1.NewTime(start)) }), start.Add(time.Hour), false, time.Time{}},
		{"before the grace", job(), start.Add(time.Second), false, start.Add(runclass.PullGrace)},
		{"at the grace", job(), start.Add(runclass.PullGrace), true, start.Add(runclass.PullGrace + pullRecheck)},
		{"outdated", job(func(j *batchv1.Job) { j.Annotations[v1alpha1.AnnotationJobGeneration] = "1" }), start.Add(time.Second), true, start.Add(runclass.PullGrace)},
		{"no start time", job(func(j *batchv1.Job) { j.Status.StartTime = nil }), start.Add(runclass.PullGrace), true, start.Add(runclass.PullGrace + pullRecheck)},
	} {
		read, next := pullCheck(tt.j, 2, tt.now)
		require.Equal(t, tt.wantRead, read, tt.name)
		require.Equal(t, tt.wantNext, next, tt.name)
	}
}

// O2: the reads of a pod that stays pending without a pull failure: 30 s,
// 40 s, 60 s, 100 s... after the start, within a minute at first, then at
// most pullRecheckMax apart.
func TestNextPullCheckO2(t *testing.T) {
	start := epoch
	for _, tt := range []struct {
		now, want time.Duration
	}{
		{0, 30 * time.Second},
		{30 * time.Second, 40 * time.Second},
		{45 * time.Second, 60 * time.Second},
		{60 * time.Second, 100 * time.Second},
		{time.Hour, time.Hour + pullRecheckMax},
	} {
		require.Equal(t, start.Add(tt.want), nextPullCheck(start, start.Add(tt.now)), "at %s", tt.now)
	}
}

// O2: a pod read that fails does not fail the pass (the check is tried
// again at its next instant) and ends nothing.
func TestSyncO2PullReadErrorNotFatal(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := runningJob(c1, 1, epoch.Add(-time.Minute))
	f.seedReady(c1, j)
	f.seed(pendingPod(j, true, "registry.example.com/x:1"))
	f.prependKubeReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
	})
	require.NoError(t, f.sync(kindCluster, "c1"))
	_, deleted := f.find("delete", "jobs", "")
	require.False(t, deleted)
	requireCondition(t, f.lastStatus(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning)
}

// O2 (A7-13): an interrupted run is reported by a Warning JobInterrupted
// event on the object naming the Job and what happened, once: the retry
// starts in the same pass (so the condition already says JobRunning), and
// later passes, while the retry runs, report nothing again.
func TestSyncO2InterruptedEventOnce(t *testing.T) {
	f := newFixture(t)
	c1 := newCluster("c1", withFinalizer)
	j := attemptJob(c1, v1alpha1.JobActionApply, 1, 1, jobFailed, epoch.Add(-time.Minute), epoch)
	f.seedReady(c1, j)
	f.seed(disrupted(runPod(j, "p", true, 137, "")))

	require.NoError(t, f.sync(kindCluster, "c1"))
	require.Len(t, f.createdJobs(), 1, "the retry starts in the same pass")
	var interrupted []string
	for _, ev := range f.PopEvents() {
		if strings.HasPrefix(ev, "Warning "+v1alpha1.EventJobInterrupted+" ") {
			interrupted = append(interrupted, ev)
		}
	}
	require.Len(t, interrupted, 1, "one JobInterrupted event")
	require.Contains(t, interrupted[0], j.Name)
	require.Contains(t, interrupted[0], "EvictionByEvictionAPI")

	f.steadyPasses(kindCluster, "c1")
	for _, ev := range f.PopEvents() {
		require.NotContains(t, ev, v1alpha1.EventJobInterrupted, "reported once per Job, not on every pass")
	}
}
