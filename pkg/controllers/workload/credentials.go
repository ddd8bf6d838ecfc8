package workload

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/index"
	"github.com/captf/captf/pkg/credentials"
	"github.com/captf/captf/pkg/metrics"
)

// maxWriteAttempts bounds retries of a mirror write that meets concurrent
// writers; each retry starts from a fresh uncached read.
const maxWriteAttempts = 8

// credentialResult is the outcome of the credential step.
type credentialResult struct {
	// identity is the resolved identity ("" when none).
	identity string
	// ready: IdentityAllowed=True and CredentialsMirrored=True.
	ready bool
	// mirror is the mirror's name, hash the source hash written to it.
	mirror string
	hash   string
}

// credentialStep resolves the identity (I1-I3), releases mirrors of an
// identity the object no longer uses (V4), checks the namespace (N1-N6),
// revokes when it is not allowed (V1), reads the source uncached and makes
// the mirror current (M2-M8). It sets IdentityAllowed and
// CredentialsMirrored. It returns an error only when a retry can help.
func (c *Controller) credentialStep(ctx context.Context, w *workload) (credentialResult, error) {
	ticket := c.source.Begin()
	now := c.clock.Now()
	before := w.status.DeepCopy()
	defer func() {
		if conditionChanged(before.Conditions, w, v1alpha1.ConditionIdentityAllowed) && !isTrue(w, v1alpha1.ConditionIdentityAllowed) {
			if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionIdentityAllowed)); cond != nil && cond.Status == metav1.ConditionFalse {
				c.warn(w, v1alpha1.EventIdentityNotAllowed, "%s", cond.Message)
			}
		}
	}()
	notReady := func(reason v1alpha1.ConditionReason, format string, args ...any) {
		setCondition(w, now, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, reason, format, args...)
		setCondition(w, now, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending, "no mirror while IdentityAllowed is False (%s)", reason)
		metrics.IdentityDenied.WithLabelValues(string(reason)).Inc()
	}

	id, err := c.resolver.IdentityOf(w.obj)
	if err != nil {
		return credentialResult{}, err
	}
	w.status.Identity = id
	res := credentialResult{identity: id}
	if err := c.releaseOtherMirrors(ctx, w, id); err != nil {
		return res, err
	}
	if id == "" {
		notReady(v1alpha1.ReasonIdentityNotFound, "%s resolves to no identity: set spec.identityRef, or its cluster's spec.defaults.identityRef or spec.identityRef", w.kind)
		return res, nil
	}
	identity, err := c.identities.Get(id)
	if apierrors.IsNotFound(err) {
		notReady(v1alpha1.ReasonIdentityNotFound, "TerraformClusterIdentity %s does not exist", id)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	ns := w.obj.GetNamespace()
	allowed := credentials.NamespaceAllowed(identity.Spec.AllowedNamespaces, ns, func() (labels.Set, bool) {
		n, err := c.namespaces.Get(ns)
		if err != nil {
			return nil, false
		}
		return n.Labels, true
	})
	ref := identity.Spec.SecretRef
	if !allowed {
		// V1: revoke at once, whatever owners the mirror still has.
		if err := c.deleteMirror(ctx, w, id, ref); err != nil {
			return res, err
		}
		notReady(v1alpha1.ReasonNamespaceNotAllowed, "TerraformClusterIdentity %s does not allow namespace %s", id, ns)
		return res, nil
	}
	src, err := c.source.Get(ctx, ticket, ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		notReady(v1alpha1.ReasonSecretNotFound, "Secret %s/%s named by TerraformClusterIdentity %s does not exist", ref.Namespace, ref.Name, id)
		return res, nil
	}
	if err != nil {
		setCondition(w, now, v1alpha1.ConditionIdentityAllowed, metav1.ConditionUnknown, v1alpha1.ReasonIdentityCheckFailed,
			"reading Secret %s/%s of TerraformClusterIdentity %s: %v", ref.Namespace, ref.Name, id, err)
		return res, fmt.Errorf("reading source Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	// Section 14: a refused source (C2) or withdrawn consent (C1) revokes
	// like V1; a missing required key (C3) only holds new Jobs back.
	if p := credentials.CheckSource(src, id, identity.Spec.RequiredKeys, c.opts.RequireSourceConsent); p != nil {
		if p.RevokesMirrors() {
			if err := c.deleteMirror(ctx, w, id, ref); err != nil {
				return res, err
			}
		}
		notReady(p.Reason, "%s", p.Message)
		return res, nil
	}
	setCondition(w, now, v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed,
		"TerraformClusterIdentity %s allows namespace %s", id, ns)
	res.mirror = credentials.MirrorName(id)
	res.hash, err = c.ensureMirror(ctx, w, id, src.Data)
	if err != nil {
		return res, err
	}
	res.ready = isTrue(w, v1alpha1.ConditionCredentialsMirrored)
	return res, nil
}

// owner is one workload object that uses a mirror.
type owner struct {
	obj runtime.Object
	ref metav1.OwnerReference
}

// ownerRef is the owner reference of a workload object (M5): non-controller,
// blockOwnerDeletion unset.
func ownerRef(kind string, o metav1.Object) metav1.OwnerReference {
	return credentials.OwnerReference(v1alpha1.SchemeGroupVersion.String(), kind, o.GetName(), o.GetUID())
}

// usersIn returns the objects of namespace that resolve to identity and are
// not being deleted, plus self (which may be deleting: its destroy needs
// the mirror), sorted by kind and name. Writing every user's reference in
// one update makes a fan-out cost one mirror write per namespace, not one
// per object, and spares concurrent writers most conflicts (SPEC 13).
func (c *Controller) usersIn(identity string, self *workload) ([]owner, error) {
	ns := self.obj.GetNamespace()
	clusters, err := c.resolver.Clusters.TerraformClusters(ns).List(labels.Everything())
	if err != nil {
		return nil, err
	}
	seen := map[types.UID]bool{self.obj.GetUID(): true}
	out := []owner{{obj: self.robj, ref: ownerRef(self.kind, self.obj)}}
	for name, k := range c.kinds {
		objs, err := k.informer.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			m := o.(metav1.Object)
			if seen[m.GetUID()] || m.GetDeletionTimestamp() != nil {
				continue
			}
			if index.IdentityIn(m, clusters) != identity {
				continue
			}
			seen[m.GetUID()] = true
			out = append(out, owner{obj: o.(runtime.Object), ref: ownerRef(name, m)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ref.Kind != out[j].ref.Kind {
			return out[i].ref.Kind < out[j].ref.Kind
		}
		return out[i].ref.Name < out[j].ref.Name
	})
	return out, nil
}

// ensureMirror makes the namespace's mirror of identity carry data, the
// labels and annotations of M3, and every user's owner reference (M5). It
// writes only when something differs (M6), never touches a foreign Secret
// (M7), rewrites a mirror only from an uncached read of it (B1), and retries
// conflicts from a fresh read so concurrent writers never lose each other's
// references. It sets CredentialsMirrored: True only when the mirror is
// current, MirrorFailed on every failed write (B8). It returns the source
// hash.
func (c *Controller) ensureMirror(ctx context.Context, w *workload, identity string, data map[string][]byte) (string, error) {
	now := c.clock.Now()
	ns := w.obj.GetNamespace()
	desired := credentials.DesiredMirror(identity, ns, data)
	hash := desired.Annotations[v1alpha1.AnnotationSourceHash]
	name := desired.Name
	before := w.status.DeepCopy()
	defer func() {
		if conditionChanged(before.Conditions, w, v1alpha1.ConditionCredentialsMirrored) {
			if cond := meta.FindStatusCondition(w.status.Conditions, string(v1alpha1.ConditionCredentialsMirrored)); cond != nil && cond.Reason == string(v1alpha1.ReasonMirrorFailed) {
				c.warn(w, v1alpha1.EventMirrorConflict, "%s", cond.Message)
			}
		}
	}()
	failed := func(format string, args ...any) {
		setCondition(w, now, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionFalse, v1alpha1.ReasonMirrorFailed, format, args...)
	}

	users, err := c.usersIn(identity, w)
	if err != nil {
		return hash, err
	}
	refs := make([]metav1.OwnerReference, len(users))
	for i, u := range users {
		refs[i] = u.ref
	}
	existing, err := c.mirrors.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return hash, err
	}

	fresh := false
	for attempt := 1; ; attempt++ {
		plan := credentials.PlanMirror(existing, desired, refs)
		if plan.Action == credentials.MirrorUpdate && !fresh {
			// B1: the cache holds no data; rewrite only what the API server
			// has now.
			if existing, err = c.freshMirror(ctx, ns, name); err != nil {
				failed("reading mirror Secret %s: %v", name, err)
				return hash, fmt.Errorf("reading mirror %s/%s: %w", ns, name, err)
			}
			fresh = true
			continue
		}
		switch plan.Action {
		case credentials.MirrorCurrent:
			c.mirrored(w, now, identity, name)
			return hash, nil
		case credentials.MirrorForeign:
			// M7: never modified; retried at the sync period, not hot.
			metrics.MirrorWrites.WithLabelValues(metrics.WriteRefused).Inc()
			c.conflicts.Set(identity, ns, true)
			failed("Secret %s/%s %s, so captf will not overwrite it: rename or delete it and the mirror is created on the next reconcile", ns, name, plan.Foreign)
			return hash, nil
		case credentials.MirrorDeleting:
			setCondition(w, now, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending, "mirror Secret %s is being deleted; it is created again once it is gone", name)
			return hash, fmt.Errorf("mirror %s/%s is being deleted; retrying", ns, name)
		}
		err := c.writeMirror(ctx, w, identity, plan, users)
		if err == nil {
			c.mirrored(w, now, identity, name)
			return hash, nil
		}
		retry := apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err)
		switch {
		case retry && attempt < maxWriteAttempts:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteConflict).Inc()
			if existing, err = c.freshMirror(ctx, ns, name); err != nil {
				failed("reading mirror Secret %s: %v", name, err)
				return hash, fmt.Errorf("reading mirror %s/%s: %w", ns, name, err)
			}
			fresh = true
		case retry:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			failed("mirror Secret %s kept changing under %d attempts to write it; retrying", name, attempt)
			return hash, fmt.Errorf("writing mirror %s/%s: %w", ns, name, err)
		case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			failed("namespace %s is terminating: no mirror can be created in it", ns)
			return hash, nil
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err):
			// Immutable, refused by admission or RBAC: a hot retry cannot
			// help; the sync period (R2) tries again (B8).
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			failed("%s mirror Secret %s failed: %v", plan.Action, name, err)
			return hash, nil
		default:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			failed("%s mirror Secret %s failed: %v", plan.Action, name, err)
			return hash, fmt.Errorf("writing mirror %s/%s: %w", ns, name, err)
		}
	}
}

// writeMirror creates or updates the mirror as plan says, and on success
// records the echo, the metric, the log line and the events of the write.
func (c *Controller) writeMirror(ctx context.Context, w *workload, identity string, plan credentials.MirrorPlan, users []owner) error {
	secrets := c.kube.CoreV1().Secrets(plan.Secret.Namespace)
	var stored *corev1.Secret
	var err error
	result := metrics.WriteCreated
	if plan.Action == credentials.MirrorCreate {
		stored, err = secrets.Create(ctx, plan.Secret, metav1.CreateOptions{FieldManager: fieldManager})
	} else {
		result = metrics.WriteUpdated
		stored, err = secrets.Update(ctx, plan.Secret, metav1.UpdateOptions{FieldManager: fieldManager})
	}
	if err != nil {
		return err
	}
	key := cache.ObjectName{Namespace: stored.Namespace, Name: stored.Name}
	c.echoes.wrote(key, stored.ResourceVersion)
	metrics.MirrorWrites.WithLabelValues(result).Inc()
	klog.FromContext(ctx).V(2).Info("Wrote mirror", "mirror", klog.KObj(stored), "action", plan.Action, "identity", identity,
		"changed", plan.Diff.String(), "owners", len(stored.OwnerReferences))
	if plan.Action == credentials.MirrorCreate {
		c.normal(w, v1alpha1.EventMirrorCreated, "Created mirror Secret %s of TerraformClusterIdentity %s", stored.Name, identity)
	}
	for _, ref := range plan.Repaired {
		for _, u := range users {
			if u.ref.UID == ref.UID {
				c.recorder.Eventf(u.obj, corev1.EventTypeNormal, v1alpha1.EventOwnerReferenceRepaired,
					"Replaced an owner reference with an older UID on mirror Secret %s", stored.Name)
			}
		}
	}
	return nil
}

// mirrored records a current mirror.
func (c *Controller) mirrored(w *workload, now time.Time, identity, name string) {
	c.conflicts.Set(identity, w.obj.GetNamespace(), false)
	setCondition(w, now, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionTrue, v1alpha1.ReasonMirrored,
		"mirror Secret %s is current", name)
}

// freshMirror reads a mirror uncached; nil when it does not exist.
func (c *Controller) freshMirror(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	s, err := c.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if s != nil {
		// Only the cache's trimmed copies may carry it (B1).
		delete(s.Annotations, credentials.CachedDataHashAnnotation)
	}
	return s, err
}

// deleteMirror deletes the namespace's mirror of identity whatever owners
// remain (V1; C1, C2), unless the Secret of that name is not a mirror (M7)
// or is the identity's own source (V6: an identity pointed at its mirror).
func (c *Controller) deleteMirror(ctx context.Context, w *workload, identity string, source v1alpha1.SecretReference) error {
	ns, name := w.obj.GetNamespace(), credentials.MirrorName(identity)
	if source.Namespace == ns && source.Name == name {
		return nil
	}
	c.conflicts.Set(identity, ns, false)
	m, err := c.mirrors.Secrets(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if credentials.ForeignReason(m, identity) != "" || m.DeletionTimestamp != nil {
		return nil
	}
	uid := m.UID
	err = c.kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone already, or replaced by a new Secret the next pass will judge.
		return nil
	}
	if err != nil {
		metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
		return fmt.Errorf("deleting mirror %s/%s: %w", ns, name, err)
	}
	metrics.MirrorWrites.WithLabelValues(metrics.WriteDeleted).Inc()
	klog.FromContext(ctx).V(2).Info("Deleted mirror: the identity may not be used here", "mirror", klog.KRef(ns, name), "identity", identity)
	c.normal(w, v1alpha1.EventMirrorRemoved, "Deleted mirror Secret %s: TerraformClusterIdentity %s may no longer be used in namespace %s", name, identity, ns)
	return nil
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
		if err := c.removeOwner(ctx, w, m.DeepCopy(), uid); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeOwner removes uid from mirror m's owner references; when none
// remain it deletes m with preconditions. Conflicts retry from a fresh read.
func (c *Controller) removeOwner(ctx context.Context, w *workload, m *corev1.Secret, uid types.UID) error {
	secrets := c.kube.CoreV1().Secrets(m.Namespace)
	for attempt := 1; ; attempt++ {
		refs, changed := credentials.RemoveOwnerReference(m.OwnerReferences, uid)
		if !changed {
			return nil
		}
		var err error
		if len(refs) == 0 {
			mUID, rv := m.UID, m.ResourceVersion
			err = secrets.Delete(ctx, m.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &mUID, ResourceVersion: &rv}})
			if err == nil {
				metrics.MirrorWrites.WithLabelValues(metrics.WriteDeleted).Inc()
				klog.FromContext(ctx).V(2).Info("Deleted mirror with its last owner", "mirror", klog.KObj(m))
				c.normal(w, v1alpha1.EventMirrorRemoved, "Deleted mirror Secret %s of TerraformClusterIdentity %s: %s %s was its last user",
					m.Name, m.Annotations[v1alpha1.AnnotationIdentity], w.kind, w.obj.GetName())
				return nil
			}
		} else {
			m.OwnerReferences = refs
			if _, err = secrets.Update(ctx, m, metav1.UpdateOptions{FieldManager: fieldManager}); err == nil {
				metrics.MirrorWrites.WithLabelValues(metrics.WriteUpdated).Inc()
				return nil
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < maxWriteAttempts:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteConflict).Inc()
			fresh, ferr := c.freshMirror(ctx, m.Namespace, m.Name)
			if ferr != nil {
				return ferr
			}
			if fresh == nil {
				return nil
			}
			m = fresh
		default:
			metrics.MirrorWrites.WithLabelValues(metrics.WriteError).Inc()
			return fmt.Errorf("releasing mirror %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
}
