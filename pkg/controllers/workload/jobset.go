package workload

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/controllers/trim"
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

// without returns s less Job j (O2: a Job the pass ended).
func (s jobSet) without(j *batchv1.Job) jobSet {
	rest := make([]*batchv1.Job, 0, len(s.all))
	for _, x := range s.all {
		if x != j {
			rest = append(rest, x)
		}
	}
	out := newJobSet(rest)
	out.fresh = s.fresh
	return out
}

// maxFreshJobs bounds the Jobs one object's fresh read keeps: far more
// than pruning leaves (T7), so only Jobs forged past the admission policy
// (B3) can reach it.
const maxFreshJobs = 256

// freshJobs lists the object's Jobs from the API server, not the cache. The
// Job cache can lag a Job this manager just created, so every decision that
// would start a Job or drop the finalizer is confirmed from a fresh list
// first (at most one Job runs per object, J1; no finalizer goes before a
// destroy, J8). These decisions are rare.
//
// The read is bounded (SPEC B11): a paged LIST of the metadata of the
// namespace's Jobs labelled captf.io/managed=true keeps the name and
// resourceVersion of those the object controls, whatever else carries the
// label and however large its pod template; then each is the cached copy
// when the cache holds that very version, else a GET, trimmed as the cache
// trims it (B1). No pod template outlives one GET.
func (c *Controller) freshJobs(ctx context.Context, w *workload) (jobSet, error) {
	ns, uid := w.obj.GetNamespace(), w.obj.GetUID()
	type ref struct{ name, resourceVersion string }
	var refs []ref
	err := c.uncached.listMetadata(ctx, jobsResource, ns, v1alpha1.LabelManaged+"="+v1alpha1.LabelTrue, func(m *metav1.PartialObjectMetadata) error {
		if owner := metav1.GetControllerOfNoCopy(m); owner == nil || owner.UID != uid {
			return nil
		}
		if len(refs) == maxFreshJobs {
			return fmt.Errorf("more than %d Jobs labelled %s=%s are controlled by this object", maxFreshJobs, v1alpha1.LabelManaged, v1alpha1.LabelTrue)
		}
		refs = append(refs, ref{name: m.Name, resourceVersion: m.ResourceVersion})
		return nil
	})
	if err != nil {
		return jobSet{}, fmt.Errorf("listing Jobs: %w", err)
	}
	mine := make([]*batchv1.Job, 0, len(refs))
	for _, r := range refs {
		j, err := c.freshJob(ctx, ns, r.name, r.resourceVersion, uid)
		if err != nil {
			return jobSet{}, err
		}
		if j != nil {
			mine = append(mine, j)
		}
	}
	s := newJobSet(mine)
	s.fresh = true
	return s, nil
}

// freshJob returns Job ns/name at resourceVersion rv or later: the cached
// copy when it is that version, else the API server's, trimmed as the
// cache trims it; nil when it is gone or no longer controlled by uid.
func (c *Controller) freshJob(ctx context.Context, ns, name, rv string, uid types.UID) (*batchv1.Job, error) {
	if obj, ok, err := c.jobIndexer.GetByKey(ns + "/" + name); err == nil && ok {
		if j, ok := obj.(*batchv1.Job); ok && rv != "" && j.ResourceVersion == rv && j.UID != "" {
			if owner := metav1.GetControllerOfNoCopy(j); owner != nil && owner.UID == uid {
				return j, nil
			}
		}
	}
	j, err := c.uncached.Kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Job %s/%s: %w", ns, name, err)
	}
	if owner := metav1.GetControllerOfNoCopy(j); owner == nil || owner.UID != uid {
		return nil, nil
	}
	trim.TrimJob(j) // as the cache holds it (B12)
	return j, nil
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
