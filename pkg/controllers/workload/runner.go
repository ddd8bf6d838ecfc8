package workload

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/credentials"
)

// ensureRunner returns the ServiceAccount w's Jobs run as (SPEC T1), or ""
// after setting ApplyJobSucceeded=False/RunnerNotFound when none may be
// used. A ServiceAccount the object names must exist and carry
// captf.io/runner=true; else the manager makes sure captf-runner and its
// RoleBinding to the ClusterRole captf-runner exist in the namespace, with
// w's owner reference (M5 semantics: the garbage collector takes them with
// the last user). It reads uncached, under the uncached reads' size budget
// (B11): Jobs are created rarely, and a tenant names these objects.
func (c *Controller) ensureRunner(ctx context.Context, w *workload) (string, error) {
	ns := w.obj.GetNamespace()
	if name := w.jobs.ServiceAccountName; name != "" {
		sa, err := c.uncached.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", c.runnerNotFound(w, "ServiceAccount %s/%s named in spec.jobs.serviceAccountName does not exist", ns, name)
		case err != nil:
			return "", fmt.Errorf("reading ServiceAccount %s/%s: %w", ns, name, err)
		case sa.Labels[v1alpha1.LabelRunner] != v1alpha1.LabelTrue:
			return "", c.runnerNotFound(w, "ServiceAccount %s/%s named in spec.jobs.serviceAccountName lacks the label %s=true that lets captf Jobs run as it",
				ns, name, v1alpha1.LabelRunner)
		}
		return name, nil
	}
	ref := ownerRef(w.kind.name, w.obj)
	for _, ensure := range []func(context.Context, *workload, metav1.OwnerReference) (bool, error){c.ensureRunnerAccount, c.ensureRunnerBinding} {
		if ok, err := ensure(ctx, w, ref); !ok || err != nil {
			return "", err
		}
	}
	return v1alpha1.RunnerName, nil
}

// runnerNotFound reports that no Job starts for want of a ServiceAccount,
// and looks at w again after waitRequeue: nothing watches ServiceAccounts,
// and one created or labelled later should not wait for the sync period.
// The look is a wake, keeping the key's stamp (P1): the ServiceAccount is
// read uncached on every pass, the source need not be.
func (c *Controller) runnerNotFound(w *workload, format string, args ...any) error {
	setCondition(w, c.clock.Now(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRunnerNotFound,
		format+"; no Job starts until it does (SPEC T1)", args...)
	c.queues[w.kind.name].Wake(w.key(), waitRequeue)
	return nil
}

// managedMeta is the metadata of the runner objects the manager creates.
func managedMeta(ns string, ref metav1.OwnerReference) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: v1alpha1.RunnerName, Namespace: ns,
		Labels:          map[string]string{v1alpha1.LabelManaged: v1alpha1.LabelTrue},
		OwnerReferences: []metav1.OwnerReference{ref},
	}
}

// ensureRunnerAccount makes sure the ServiceAccount captf-runner exists
// with ref among its owners; false (with RunnerNotFound) when an object of
// that name is not the manager's.
func (c *Controller) ensureRunnerAccount(ctx context.Context, w *workload, ref metav1.OwnerReference) (bool, error) {
	ns := w.obj.GetNamespace()
	client := c.kube.CoreV1().ServiceAccounts(ns)
	for attempt := 1; ; attempt++ {
		sa, err := c.uncached.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, v1alpha1.RunnerName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: managedMeta(ns, ref)}, metav1.CreateOptions{FieldManager: fieldManager})
		} else if err == nil {
			if sa.Labels[v1alpha1.LabelManaged] != v1alpha1.LabelTrue {
				return false, c.runnerNotFound(w, "ServiceAccount %s/%s exists and was not created by captf (no label %s=true): rename it, or name a ServiceAccount labelled %s=true in spec.jobs.serviceAccountName",
					ns, v1alpha1.RunnerName, v1alpha1.LabelManaged, v1alpha1.LabelRunner)
			}
			refs, changed, _ := credentials.EnsureOwnerReference(sa.OwnerReferences, ref)
			if !changed {
				return true, nil
			}
			sa.OwnerReferences = refs
			_, err = client.Update(ctx, sa, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if done, err := runnerWriteDone(err, attempt, "ServiceAccount", ns); done {
			return err == nil, err
		}
	}
}

// ensureRunnerBinding makes sure the RoleBinding captf-runner binds the
// ClusterRole captf-runner to the ServiceAccount captf-runner alone, with
// ref among its owners.
func (c *Controller) ensureRunnerBinding(ctx context.Context, w *workload, ref metav1.OwnerReference) (bool, error) {
	ns := w.obj.GetNamespace()
	client := c.kube.RbacV1().RoleBindings(ns)
	roleRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: v1alpha1.RunnerName}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: v1alpha1.RunnerName, Namespace: ns}}
	for attempt := 1; ; attempt++ {
		rb, err := c.uncached.Kube.RbacV1().RoleBindings(ns).Get(ctx, v1alpha1.RunnerName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: managedMeta(ns, ref), RoleRef: roleRef, Subjects: subjects},
				metav1.CreateOptions{FieldManager: fieldManager})
		} else if err == nil {
			if rb.Labels[v1alpha1.LabelManaged] != v1alpha1.LabelTrue || rb.RoleRef != roleRef {
				return false, c.runnerNotFound(w, "RoleBinding %s/%s exists and is not captf's binding of ClusterRole %s: rename or delete it",
					ns, v1alpha1.RunnerName, v1alpha1.RunnerName)
			}
			refs, changed, _ := credentials.EnsureOwnerReference(rb.OwnerReferences, ref)
			if !changed && slices.Equal(rb.Subjects, subjects) {
				return true, nil
			}
			rb.OwnerReferences, rb.Subjects = refs, subjects
			_, err = client.Update(ctx, rb, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if done, err := runnerWriteDone(err, attempt, "RoleBinding", ns); done {
			return err == nil, err
		}
	}
}

// runnerWriteDone decides after a runner object write: done on success or
// on an error a retry cannot help; a conflict or a concurrent create or
// delete is read again, boundedly.
func runnerWriteDone(err error, attempt int, kind, ns string) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)) && attempt < maxWriteAttempts:
		return false, nil
	}
	return true, fmt.Errorf("writing %s %s/%s: %w", kind, ns, v1alpha1.RunnerName, err)
}
