package workload

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/controllers/jobs"
)

// Labels the kubernetes state backend puts on its Secrets (T2).
const (
	labelTFState       = "tfstate"
	labelTFStateSuffix = "tfstateSecretSuffix"
)

// deleteState removes, after a successful destroy, every state Secret of
// the object's suffix (those labelled tfstate=true with its
// tfstateSecretSuffix: a large state is split into parts) and the lock
// Lease (SPEC T2). It lists uncached, and never deletes a Secret without
// those labels.
func (c *Controller) deleteState(ctx context.Context, w *workload) error {
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	selector := labels.SelectorFromSet(labels.Set{labelTFState: "true", labelTFStateSuffix: suffix})
	list, err := c.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return fmt.Errorf("listing the state Secrets of %s: %w", suffix, err)
	}
	logger := klog.FromContext(ctx)
	for i := range list.Items {
		s := &list.Items[i]
		if !selector.Matches(labels.Set(s.Labels)) {
			continue
		}
		uid := s.UID
		err := c.kube.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting state Secret %s/%s: %w", ns, s.Name, err)
		}
		logger.Info("Deleted Terraform state after a successful destroy", "secret", klog.KObj(s))
	}
	err = c.kube.CoordinationV1().Leases(ns).Delete(ctx, jobs.StateLeaseName(suffix), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting state lock Lease %s/%s: %w", ns, jobs.StateLeaseName(suffix), err)
	}
	return nil
}
