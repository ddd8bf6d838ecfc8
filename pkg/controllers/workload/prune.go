package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
)

// prune deletes finished Jobs of the object beyond the newest keepFinished
// succeeded and keepFinished failed per action (T7), with background
// propagation so their pods go too. It decides from set, the Job cache,
// so a pass with nothing to prune makes no request. The newest finished
// Job of an action is always kept, and decisions come from the status
// records anyway: a pruned Job never runs again.
func (c *Controller) prune(ctx context.Context, w *workload, set jobSet) error {
	type group struct {
		action    v1alpha1.JobAction
		succeeded bool
	}
	groups := map[group][]*batchv1.Job{}
	for _, j := range set.all {
		if !jobs.Finished(j) || j.DeletionTimestamp != nil {
			continue
		}
		out, _ := jobs.Status(j)
		g := group{jobs.ActionOf(j), out == jobs.Succeeded}
		groups[g] = append(groups[g], j)
	}
	var errs []error
	for _, js := range groups {
		if len(js) <= keepFinished {
			continue
		}
		slices.SortFunc(js, func(a, b *batchv1.Job) int {
			if newer(a, b) {
				return -1
			}
			return 1
		})
		for _, j := range js[keepFinished:] {
			if err := c.deleteJob(ctx, j); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// deleteJob deletes one finished Job (prune), with a UID precondition so
// a Job re-created under the name is left alone.
func (c *Controller) deleteJob(ctx context.Context, j *batchv1.Job) error {
	uid := j.UID
	err := c.kube.BatchV1().Jobs(j.Namespace).Delete(ctx, j.Name, metav1.DeleteOptions{
		PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
		Preconditions:     &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil:
		metrics.JobsPruned.WithLabelValues(actionLabel(jobs.ActionOf(j))).Inc()
		klog.FromContext(ctx).V(2).Info("Pruned finished Job", "job", klog.KObj(j))
		return nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return nil
	}
	return fmt.Errorf("pruning Job %s: %w", j.Name, err)
}
