package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/runresult"
)

// driftHold is how long each Job of the drift scenario runs before the
// finisher completes it.
const driftHold = time.Second

// driftState is what the drift scenario's Job informer, finisher and
// status handler saw, under one lock.
type driftState struct {
	mu sync.Mutex
	// jobs by namespace/Job name.
	jobs map[string]*driftJob
	// recorded: when a cluster's status.lastDriftCheck was first seen
	// naming a Job (namespace/Job name).
	recorded map[string]time.Time
	// open drift Jobs and the most at once since resetOpen.
	open, maxOpen int
	// errs are the finisher's failures (at most a few kept).
	errs []error
	// noDoc counts drift Jobs completed without a result document (their
	// pod could not be made): the manager records them as failed checks.
	// podErr is the first reason.
	noDoc  int
	podErr error
}

func newDriftState() *driftState {
	return &driftState{jobs: map[string]*driftJob{}, recorded: map[string]time.Time{}}
}

func (s *driftState) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.errs) < 5 {
		s.errs = append(s.errs, err)
	}
}

func (s *driftState) podFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.podErr == nil {
		s.podErr = err
	}
}

// resetOpen starts counting the most drift Jobs unfinished at once anew.
func (s *driftState) resetOpen() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxOpen = s.open
}

// snapshot copies the Jobs and the recorded times, merged: a Job's
// recorded time is when its object's status named it.
func (s *driftState) snapshot() []driftJob {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]driftJob, 0, len(s.jobs))
	for k, j := range s.jobs {
		c := *j
		c.recorded = s.recorded[k]
		out = append(out, c)
	}
	return out
}

// recorder is the tracker's cluster handler that notes when each drift
// check is recorded (status.lastDriftCheck names its Job).
func (s *driftState) recorder() cache.ResourceEventHandlerFuncs {
	note := func(obj interface{}) {
		c, ok := obj.(*v1alpha1.TerraformCluster)
		if !ok || c.Status.LastDriftCheck == nil {
			return
		}
		k := c.Namespace + "/" + c.Status.LastDriftCheck.JobName
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.recorded[k]; !ok {
			s.recorded[k] = now
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, n interface{}) { note(n) }}
}

// watchJobs starts an informer on the manager's Jobs (it relists and
// rewatches on its own: the scenario outlives the API server's watch
// timeout) and hands each new unfinished Job to the finisher.
func (b *bench) watchJobs(ctx context.Context, s *driftState) error {
	f := kubeinformers.NewSharedInformerFactoryWithOptions(b.e.kube, 0, kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue
	}))
	inf := f.Batch().V1().Jobs().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj interface{}) {
		j, ok := obj.(*batchv1.Job)
		if !ok || jobs.Finished(j) {
			return
		}
		if s.add(j) {
			go b.finishDriftJob(ctx, s, j, inf.GetStore())
		}
	}})
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("drift: %v cache did not sync", typ)
		}
	}
	return nil
}

// add records a Job seen for the first time; false when it was seen.
func (s *driftState) add(j *batchv1.Job) bool {
	k := j.Namespace + "/" + j.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[k]; ok {
		return false
	}
	dj := &driftJob{name: j.Name, action: jobs.ActionOf(j), created: j.CreationTimestamp.Time, seen: time.Now()}
	if o := metav1.GetControllerOfNoCopy(j); o != nil {
		dj.key = j.Namespace + "/" + o.Name
	}
	s.jobs[k] = dj
	if dj.action == v1alpha1.JobActionDrift {
		s.open++
		s.maxOpen = max(s.maxOpen, s.open)
	}
	return true
}

func (s *driftState) finished(j *batchv1.Job, doc bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	dj := s.jobs[j.Namespace+"/"+j.Name]
	dj.finished = time.Now()
	if dj.action == v1alpha1.JobActionDrift {
		s.open--
		if !doc {
			s.noDoc++
		}
	}
}

// finishDriftJob completes j driftHold after it appeared, as the Job
// controller would when its pod succeeds (there is no node here). Before
// it completes a drift Job it makes the pod the Job controller would have
// made and ends it as the kubelet would, with the result document of a
// drift run that found no drift in its termination message, so the
// manager reads and records a real check (O1, O7). Apply Jobs end without
// a pod, as in the jobs scenario.
func (b *bench) finishDriftJob(ctx context.Context, s *driftState, j *batchv1.Job, store cache.Store) {
	select {
	case <-time.After(driftHold):
	case <-ctx.Done():
		return
	}
	if err := b.waitResumed(ctx, j, store); err != nil {
		if ctx.Err() == nil {
			s.fail(err)
		}
		return
	}
	doc := false
	if jobs.ActionOf(j) == v1alpha1.JobActionDrift {
		err := b.endDriftPod(ctx, j)
		if err != nil && ctx.Err() == nil {
			s.podFailed(fmt.Errorf("the pod of drift Job %s/%s: %w", j.Namespace, j.Name, err))
		}
		doc = err == nil
	}
	if err := b.e.fw.FinishJob(ctx, j.Namespace, j.Name, ""); err != nil {
		if ctx.Err() == nil {
			s.fail(fmt.Errorf("finishing Job %s/%s: %w", j.Namespace, j.Name, err))
		}
		return
	}
	s.finished(j, doc)
}

// waitResumed waits, on the informer's cache, until j is no longer
// suspended (a Job with inputs is created suspended and resumed once its
// run Secret exists, K5).
func (b *bench) waitResumed(ctx context.Context, j *batchv1.Job, store cache.Store) error {
	_, err := waitFor(ctx, "Job "+j.Namespace+"/"+j.Name+" resumed", b.cfg.Timeout, 200*time.Millisecond, func() (bool, string) {
		o, ok, _ := store.GetByKey(j.Namespace + "/" + j.Name)
		if !ok {
			return false, "not in the cache"
		}
		cur, ok := o.(*batchv1.Job)
		return ok && !ptr.Deref(cur.Spec.Suspend, false), "suspended"
	})
	return err
}

// endDriftPod creates the pod of drift Job j (controlled by it and
// labelled with its UID, as the Job controller makes it; only what the
// manager reads) and writes its status as the kubelet would after the
// runner exited 0: the Terraform container terminated with the result
// document as its message.
func (b *bench) endDriftPod(ctx context.Context, j *batchv1.Job) error {
	img := ""
	if cs := j.Spec.Template.Spec.Containers; len(cs) > 0 {
		img = cs[0].Image
	}
	doc, err := (&runresult.Result{Version: runresult.Version, Operation: runresult.OperationDrift, Image: img,
		Steps: []runresult.Step{{Name: runresult.StepInit}, {Name: runresult.StepRefresh}, {Name: runresult.StepPlan}},
		Drift: &runresult.Drift{}}).Marshal()
	if err != nil {
		return err
	}
	pods := b.e.kube.CoreV1().Pods(j.Namespace)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: j.Namespace, Name: j.Name + "-run",
			Labels:          map[string]string{batchv1.ControllerUidLabel: string(j.UID), batchv1.JobNameLabel: j.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: jobs.ContainerName, Image: img}}},
	}
	created, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = pods.Get(ctx, p.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	now := metav1.Now()
	created.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, StartTime: &now,
		ContainerStatuses: []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: img,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", Message: string(doc), StartedAt: now, FinishedAt: now}}}}}
	_, err = pods.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	return err
}
