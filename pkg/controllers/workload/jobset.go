package workload

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// jobSet is what the Job cache holds for one object.
type jobSet struct {
	all []*batchv1.Job
	// running is a Job that has not finished, if any (at most one runs, J1).
	// A Job whose outcome is decided (FailureTarget, SuccessCriteriaMet) may
	// still have a pod releasing Terraform's state lock; it runs until
	// Complete or Failed.
	running *batchv1.Job
	// latest is the most recently created Job.
	latest *batchv1.Job
	// fresh is true for a set listed from the API server (freshJobs),
	// false for one read from the cache.
	fresh bool
}

func (c *Controller) jobsOf(w *workload) (jobSet, error) {
	all, err := index.JobsOf(c.jobIndexer, w.obj.GetUID())
	if err != nil {
		return jobSet{}, err
	}
	return newJobSet(all), nil
}

func newJobSet(all []*batchv1.Job) jobSet {
	s := jobSet{all: all}
	for _, j := range all {
		if !jobs.Finished(j) {
			s.running = j
		}
		if s.latest == nil || newer(j, s.latest) {
			s.latest = j
		}
	}
	return s
}

// freshJobs lists the object's Jobs from the API server, not the cache. The
// Job cache can lag a Job this manager just created, so every decision that
// would start a Job or drop the finalizer is confirmed from a fresh list
// first (at most one Job runs per object, J1; no finalizer goes before a
// destroy, J8). These decisions are rare, so the list is cheap overall.
func (c *Controller) freshJobs(ctx context.Context, w *workload) (jobSet, error) {
	list, err := c.kube.BatchV1().Jobs(w.obj.GetNamespace()).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.LabelManaged + "=" + v1alpha1.LabelTrue})
	if err != nil {
		return jobSet{}, fmt.Errorf("listing Jobs: %w", err)
	}
	var mine []*batchv1.Job
	for i := range list.Items {
		if ref := metav1.GetControllerOf(&list.Items[i]); ref != nil && ref.UID == w.obj.GetUID() {
			mine = append(mine, &list.Items[i])
		}
	}
	s := newJobSet(mine)
	s.fresh = true
	return s, nil
}

// newer orders Jobs by creation, then by generation, then by name.
func newer(a, b *batchv1.Job) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return b.CreationTimestamp.Before(&a.CreationTimestamp)
	}
	ga, _ := jobs.GenerationOf(a)
	gb, _ := jobs.GenerationOf(b)
	if ga != gb {
		return ga > gb
	}
	return a.Name > b.Name
}

// find returns the Job with action for generation (any generation when < 0).
func (s jobSet) find(action v1alpha1.JobAction, generation int64) *batchv1.Job {
	var found *batchv1.Job
	for _, j := range s.all {
		if jobs.ActionOf(j) != action {
			continue
		}
		if g, _ := jobs.GenerationOf(j); generation >= 0 && g != generation {
			continue
		}
		if found == nil || newer(j, found) {
			found = j
		}
	}
	return found
}
