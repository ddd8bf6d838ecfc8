package workload

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
)

// deleteState removes, after a successful destroy, the object's state
// Secrets and its lock Lease (SPEC T2). A state Secret is one named as the
// backend names those of the object's suffix (tfstate-default-<suffix>,
// and -part-<i> for a split state) that carries the labels tfstate=true and
// tfstateSecretSuffix=<suffix>: a Secret that merely carries the labels is
// never deleted (B15). They are found with a paged LIST of metadata only
// (B11), whatever a tenant labels alike, and each is deleted with its UID
// as a precondition.
func (c *Controller) deleteState(ctx context.Context, w *workload) error {
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	selector := labels.SelectorFromSet(labels.Set{tfstate.LabelState: "true", tfstate.LabelSuffix: suffix})
	type secret struct {
		name string
		uid  types.UID
	}
	var state []secret
	err := c.uncached.listMetadata(ctx, secretsResource, ns, selector.String(), func(m *metav1.PartialObjectMetadata) error {
		if tfstate.IsStateName(suffix, m.Name) && selector.Matches(labels.Set(m.Labels)) {
			state = append(state, secret{name: m.Name, uid: m.UID})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the state Secrets of %s: %w", suffix, err)
	}
	logger := klog.FromContext(ctx)
	for _, s := range state {
		err := c.kube.CoreV1().Secrets(ns).Delete(ctx, s.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting state Secret %s/%s: %w", ns, s.name, err)
		}
		logger.Info("Deleted Terraform state after a successful destroy", "secret", klog.KRef(ns, s.name))
	}
	err = c.kube.CoordinationV1().Leases(ns).Delete(ctx, jobs.StateLeaseName(suffix), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting state lock Lease %s/%s: %w", ns, jobs.StateLeaseName(suffix), err)
	}
	return nil
}
