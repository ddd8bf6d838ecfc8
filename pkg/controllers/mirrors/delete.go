// Package mirrors holds the one way both controllers delete a mirror Secret
// (SPEC V1, V3, V4, V5, C1, C2): with a UID precondition (and a
// resourceVersion one when the caller decided on that exact version), a
// mirror already gone or replaced counted as done, one metric and one log
// line per deletion.
package mirrors

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/metrics"
)

// Precondition says which version of the mirror a deletion may remove.
type Precondition int

const (
	// SameUID deletes the Secret the caller saw, whatever its version: a
	// revocation (V1, V5, C1, C2) removes the mirror whatever owners it has.
	SameUID Precondition = iota
	// SameVersion deletes only the exact version the caller saw: a release
	// (V3, V4) that found no owner left must lose to a concurrent new owner.
	SameVersion
)

// Delete deletes mirror m. It reports deleted=false without error when m
// is already gone, or was replaced or changed since it was read (a
// Conflict: the next pass judges the new Secret). The caller must have
// checked that m is a mirror it may delete (never a foreign Secret, M7;
// never an identity's own source, V6).
func Delete(ctx context.Context, kube kubernetes.Interface, m *corev1.Secret, pre Precondition, why string) (deleted bool, err error) {
	uid := m.UID
	p := &metav1.Preconditions{UID: &uid}
	if pre == SameVersion {
		rv := m.ResourceVersion
		p.ResourceVersion = &rv
	}
	err = kube.CoreV1().Secrets(m.Namespace).Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: p})
	switch {
	case err == nil:
		metrics.MirrorWrites.WithLabelValues(metrics.WriteDeleted).Inc()
		klog.FromContext(ctx).V(2).Info("Deleted mirror", "mirror", klog.KObj(m), "reason", why)
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err) && pre == SameUID:
		return false, nil
	case apierrors.IsConflict(err):
		metrics.MirrorWrites.WithLabelValues(metrics.WriteConflict).Inc()
		return false, err
	default:
		metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
		return false, fmt.Errorf("deleting mirror %s/%s: %w", m.Namespace, m.Name, err)
	}
}
