package workload

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// waitRequeue is how soon a deletion that waits for its identity (V2) is
// looked at again even if no event arrives.
const waitRequeue = time.Minute

// sync reconciles one object of kind k.
func (c *Controller) sync(ctx context.Context, k *kind, key cache.ObjectName) error {
	logger := klog.FromContext(ctx).WithValues("object", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	w, err := k.get(key)
	if apierrors.IsNotFound(err) {
		// Gone: the garbage collector removes its Jobs, and a mirror whose
		// every owner is gone. (Its status record is dropped by the delete
		// handler.)
		return nil
	}
	if err != nil {
		return err
	}
	if w.obj.GetDeletionTimestamp() != nil {
		return c.syncDeleting(ctx, k, w)
	}
	return c.syncNormal(ctx, k, w)
}

// syncNormal is the pass of a non-deleting object: the credential step on
// every pass (M6), then the apply Job (J1).
func (c *Controller) syncNormal(ctx context.Context, k *kind, w *workload) error {
	before := w.status.DeepCopy()
	creds, credErr := c.credentialStep(ctx, w)
	var jobErr error
	if credErr == nil {
		w, jobErr = c.applyStep(ctx, k, w, creds)
	}
	summarize(w, c.clock.Now())
	_, statusErr := c.writeStatus(ctx, k, w, before)
	for _, err := range []error{credErr, jobErr, statusErr} {
		if err != nil {
			return err
		}
	}
	return nil
}

// writeStatus writes w's status when it differs from before (no write on
// an unchanged pass) and returns the object as stored.
func (c *Controller) writeStatus(ctx context.Context, k *kind, w *workload, before *v1alpha1.WorkloadStatus) (*workload, error) {
	if !c.written.NeedsWrite(w.obj.GetUID(), *before, *w.status) {
		return w, nil
	}
	stored, err := k.updateStatus(ctx, w)
	if err != nil {
		return w, fmt.Errorf("updating status: %w", err)
	}
	c.written.Record(w.obj.GetUID(), *stored.status.DeepCopy())
	return stored, nil
}

// hasFinalizer reports whether w carries captf.io/destroy.
func hasFinalizer(w *workload) bool {
	for _, f := range w.obj.GetFinalizers() {
		if f == v1alpha1.FinalizerDestroy {
			return true
		}
	}
	return false
}

// setFinalizer adds or removes captf.io/destroy and returns the stored
// object, carrying over the status computed so far on this pass.
func (c *Controller) setFinalizer(ctx context.Context, k *kind, w *workload, present bool) (*workload, error) {
	if hasFinalizer(w) == present {
		return w, nil
	}
	var fs []string
	for _, f := range w.obj.GetFinalizers() {
		if f != v1alpha1.FinalizerDestroy {
			fs = append(fs, f)
		}
	}
	if present {
		fs = append(fs, v1alpha1.FinalizerDestroy)
	}
	status := w.status.DeepCopy()
	w.obj.SetFinalizers(fs)
	stored, err := k.update(ctx, w)
	if err != nil {
		return w, fmt.Errorf("updating finalizers: %w", err)
	}
	// The stored object carries the status as it was before this pass;
	// keep what this pass computed.
	*stored.status = *status
	return stored, nil
}
