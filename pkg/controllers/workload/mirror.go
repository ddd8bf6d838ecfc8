package workload

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/controllers/mirrors"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/metrics"
)

// ensureMirror makes the namespace's mirror of identity carry data, the
// labels and annotations of M3, and every user's owner reference (M5). The
// decision is credentials.PlanMirror's; this loop reads and writes: it writes
// only when the plan says so (M6), never touches a foreign Secret (M7), and
// costs one request per rewrite (P3): the first plan is made from the cache,
// and an update is a patch preconditioned on the planned-from
// resourceVersion, so a Secret changed since (another owner's reference, a
// tenant's annotation, a foreign Secret in its place) is refused with a
// Conflict, never overwritten (B1). A conflict re-plans from an uncached
// read, so concurrent writers never lose each other's references. It sets
// CredentialsMirrored: True only when the mirror is current, MirrorFailed
// on every failed write (B8). It returns the source hash.
func (c *Controller) ensureMirror(ctx context.Context, w *workload, identity string, data map[string][]byte) (string, error) {
	ns := w.obj.GetNamespace()
	desired := credentials.DesiredMirror(identity, ns, data)
	hash, name := desired.Annotations[v1alpha1.AnnotationSourceHash], desired.Name
	users, refs, err := c.usersIn(identity, w)
	if err != nil {
		return hash, err
	}
	existing, err := c.mirrors.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return hash, err
	}
	// The cache may not show this process's own last write yet.
	key := cache.ObjectName{Namespace: ns, Name: name}
	existing = c.echoes.latest(key, existing)
	for attempt := 1; ; attempt++ {
		refused := false // a write planned from existing was refused
		plan := credentials.PlanMirror(existing, desired, refs)
		switch {
		case plan.Action == credentials.MirrorUpdate && plan.Patch == nil:
			// No version to precondition on: never write blind (B1).
			if attempt >= maxWriteAttempts {
				c.mirrorFailed(w, "mirror Secret %s has no resourceVersion to write it against; retrying", name)
				return hash, fmt.Errorf("mirror %s/%s: %w", ns, name, credentials.ErrNoResourceVersion)
			}
		case plan.Action == credentials.MirrorCurrent:
			c.mirrored(w, identity, name)
			return hash, nil
		case plan.Action == credentials.MirrorForeign:
			// M7: never modified; retried at the sync period, not hot.
			metrics.MirrorWrites.WithLabelValues(metrics.WriteRefused).Inc()
			c.conflicts.Set(identity, ns, true)
			c.mirrorFailed(w, "Secret %s/%s %s, so captf will not overwrite it: rename or delete it and the mirror is created on the next reconcile", ns, name, plan.Foreign)
			return hash, nil
		case plan.Action == credentials.MirrorDeleting:
			setCondition(w, c.clock.Now(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending,
				"mirror Secret %s is being deleted; it is created again once it is gone", name)
			return hash, fmt.Errorf("mirror %s/%s is being deleted; retrying", ns, name)
		default:
			err := c.writeMirror(ctx, w, identity, existing, plan, users)
			if err == nil {
				c.mirrored(w, identity, name)
				return hash, nil
			}
			if again, err := c.mirrorWriteFailed(w, plan, err, attempt); !again {
				return hash, err
			}
			refused = apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
		}
		stale := existing
		if existing, err = c.freshMirror(ctx, ns, name); err != nil {
			c.mirrorFailed(w, "reading mirror Secret %s: %v", name, err)
			return hash, fmt.Errorf("reading mirror %s/%s: %w", ns, name, err)
		}
		if refused {
			// The stored version is newer than the one planned from: the
			// mirror's other users need not find that out again.
			c.echoes.readMirror(key, stale, existing)
		}
	}
}

// mirrorWriteFailed decides what a failed mirror write leads to: again
// after a fresh read (a conflict or a concurrent create or delete, within
// maxWriteAttempts), else MirrorFailed (B8) with an error when a retry with
// backoff can help, and without one when only the sync period can (an
// invalid mirror, a terminating namespace).
func (c *Controller) mirrorWriteFailed(w *workload, plan credentials.MirrorPlan, err error, attempt int) (again bool, _ error) {
	name := plan.Secret.Name
	retry := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
	if retry && attempt < maxWriteAttempts {
		metrics.MirrorWrites.WithLabelValues(metrics.WriteConflict).Inc()
		return true, nil
	}
	metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
	wrapped := fmt.Errorf("writing mirror %s/%s: %w", plan.Secret.Namespace, name, err)
	switch {
	case retry:
		c.mirrorFailed(w, "mirror Secret %s kept changing under %d attempts to write it; retrying", name, attempt)
		return false, wrapped
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		c.mirrorFailed(w, "namespace %s is terminating: no mirror can be created in it", plan.Secret.Namespace)
		return false, nil
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		c.mirrorFailed(w, "%s mirror Secret %s failed: %v", plan.Action, name, err)
		return false, nil
	}
	// Anything else is retried with backoff, Forbidden included: an API
	// server that has just started answers 403 until its authorizer's
	// caches are synced, and a refusal by an admission policy is lifted by
	// a change of the policy, which no event of ours reports.
	c.mirrorFailed(w, "%s mirror Secret %s failed: %v", plan.Action, name, err)
	return false, wrapped
}

// writeMirror creates or updates the mirror as plan, made from existing,
// says and, on success, records the write (its echo, the newest version
// known), the metric, the log line and the events.
func (c *Controller) writeMirror(ctx context.Context, w *workload, identity string, existing *corev1.Secret, plan credentials.MirrorPlan, users []owner) error {
	secrets := c.kube.CoreV1().Secrets(plan.Secret.Namespace)
	var stored *corev1.Secret
	var err error
	result := metrics.WriteCreated
	if plan.Action == credentials.MirrorCreate {
		stored, err = secrets.Create(ctx, plan.Secret, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		// P3: one request, refused with a Conflict if the mirror changed
		// since the version plan.Patch names.
		result = metrics.WriteUpdated
		stored, err = secrets.Patch(ctx, plan.Secret.Name, types.StrategicMergePatchType, plan.Patch, metav1.PatchOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return err
	}
	c.echoes.wroteMirror(existing, stored)
	metrics.MirrorWrites.WithLabelValues(result).Inc()
	klog.FromContext(ctx).V(2).Info("Wrote mirror", "mirror", klog.KObj(stored), "action", plan.Action, "identity", identity,
		"changed", plan.Diff.String(), "owners", len(stored.OwnerReferences))
	if plan.Action == credentials.MirrorCreate {
		w.normal(v1alpha1.EventMirrorCreated, "Created mirror Secret %s of TerraformClusterIdentity %s", stored.Name, identity)
	}
	for _, ref := range plan.Repaired {
		for _, u := range users {
			if u.ref.UID == ref.UID {
				w.eventOn(u.obj, corev1.EventTypeNormal, v1alpha1.EventOwnerReferenceRepaired,
					"Replaced an owner reference with an older UID on mirror Secret %s", stored.Name)
			}
		}
	}
	return nil
}

// mirrored records a current mirror.
func (c *Controller) mirrored(w *workload, identity, name string) {
	c.conflicts.Set(identity, w.obj.GetNamespace(), false)
	setCondition(w, c.clock.Now(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored,
		"mirror Secret %s is current", name)
}

// mirrorFailed records a mirror that is not current (B8).
func (c *Controller) mirrorFailed(w *workload, format string, args ...any) {
	setCondition(w, c.clock.Now(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed, format, args...)
}

// freshMirror reads a mirror uncached, under the uncached reads' size
// budget (B11); nil when it does not exist.
func (c *Controller) freshMirror(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s, err := c.uncached.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if s != nil {
		// Only the cache's trimmed copies may carry it (B1).
		delete(s.Annotations, credentials.CachedDataHashAnnotation)
	}
	return s, err
}

// revokeMirror deletes the namespace's mirror of identity whatever owners
// remain (V1; C1, C2), unless the Secret of that name is not a mirror (M7)
// or is the identity's own source (V6: an identity pointed at its mirror).
func (c *Controller) revokeMirror(ctx context.Context, w *workload, identity string, source v1alpha1.SecretReference) error {
	ns, name := w.obj.GetNamespace(), credentials.MirrorName(identity)
	if source.Namespace == ns && source.Name == name {
		return nil
	}
	c.conflicts.Set(identity, ns, false)
	// The identity controller revokes too (V5): when it was first, the
	// object that held the mirror still reports the removal, once (its
	// CredentialsMirrored goes from Mirrored this pass).
	removedElsewhere := func() {
		if isTrue(w, v1alpha1.ConditionCredentialsMirrored) {
			w.normal(v1alpha1.EventMirrorRemoved, "Mirror Secret %s was removed: TerraformClusterIdentity %s may no longer be used in namespace %s", name, identity, ns)
		}
	}
	m, err := c.mirrors.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		removedElsewhere()
		return nil
	}
	if err != nil {
		return err
	}
	if credentials.ForeignReason(m, identity) != "" {
		return nil
	}
	if m.DeletionTimestamp != nil {
		removedElsewhere()
		return nil
	}
	deleted, err := mirrors.Delete(ctx, c.kube, m, mirrors.SameUID, "the identity may not be used here")
	if deleted {
		w.normal(v1alpha1.EventMirrorRemoved, "Deleted mirror Secret %s: TerraformClusterIdentity %s may no longer be used in namespace %s", name, identity, ns)
	}
	return err
}

// releaseOtherMirrors removes w's owner reference from mirrors in its
// namespace of identities other than current (V4), deleting a mirror left
// without owners.
func (c *Controller) releaseOtherMirrors(ctx context.Context, w *workload, current string) error {
	return c.releaseMirrors(ctx, w, func(identity string) bool { return identity != current })
}

// releaseMirrors removes w's owner reference from the mirrors in its
// namespace whose identity matches, deleting a mirror when w was its last
// owner, with UID and resourceVersion preconditions so a concurrent new
// owner wins (V3, V4).
func (c *Controller) releaseMirrors(ctx context.Context, w *workload, match func(identity string) bool) error {
	uid := w.obj.GetUID()
	objs, err := c.mirrorIndexer.ByIndex(index.Owner, string(uid))
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		m := o.(*corev1.Secret)
		if m.Namespace != w.obj.GetNamespace() || !match(m.Annotations[v1alpha1.AnnotationIdentity]) {
			continue
		}
		if err := c.removeOwner(ctx, w, m, uid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeOwner removes uid from mirror m's owner references; when none
// remain it deletes m with UID and resourceVersion preconditions. Both
// writes are preconditioned on the version the references were read from
// (P3), first the cache's copy m: a Conflict (a new owner, any other
// change) re-reads uncached and decides again (B1).
func (c *Controller) removeOwner(ctx context.Context, w *workload, m *corev1.Secret, uid types.UID) error {
	identity := m.Annotations[v1alpha1.AnnotationIdentity]
	m = c.echoes.latest(cache.ObjectName{Namespace: m.Namespace, Name: m.Name}, m)
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			var err error
			if m, err = c.freshMirror(ctx, m.Namespace, m.Name); err != nil || m == nil {
				return err
			}
			if credentials.IsForeign(m, identity) {
				// No longer a mirror since the cache's copy: never modified (M7).
				return nil
			}
		}
		refs, changed := credentials.RemoveOwnerReference(m.OwnerReferences, uid)
		if !changed {
			return nil
		}
		var err error
		if len(refs) == 0 {
			var deleted bool
			if deleted, err = mirrors.Delete(ctx, c.kube, m, mirrors.SameVersion, "its last user released it"); deleted {
				w.normal(v1alpha1.EventMirrorRemoved, "Deleted mirror Secret %s of TerraformClusterIdentity %s: %s %s was its last user",
					m.Name, m.Annotations[v1alpha1.AnnotationIdentity], w.kind.name, w.obj.GetName())
			}
		} else {
			err = c.patchOwners(ctx, m, refs)
		}
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt >= maxWriteAttempts:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			return fmt.Errorf("releasing mirror %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
}

// patchOwners sets m's owner references to refs, preconditioned on m's
// resourceVersion (P3).
func (c *Controller) patchOwners(ctx context.Context, m *corev1.Secret, refs []metav1.OwnerReference) error {
	patch, err := credentials.OwnersPatch(m.ResourceVersion, refs)
	if err != nil {
		// No version to precondition on: read and decide again.
		return apierrors.NewConflict(corev1.Resource("secrets"), m.Name, err)
	}
	stored, err := c.kube.CoreV1().Secrets(m.Namespace).Patch(ctx, m.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		c.echoes.wroteMirror(m, stored)
		metrics.MirrorWrites.WithLabelValues(metrics.WriteUpdated).Inc()
	case apierrors.IsConflict(err):
		metrics.MirrorWrites.WithLabelValues(metrics.WriteConflict).Inc()
	}
	return err
}
