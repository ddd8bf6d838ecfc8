package workload

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
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
// revokes when it is not allowed (V1: before and whatever the source read,
// B8), reads the source uncached, applies section 14 (C1-C3) and makes the
// mirror current (M2-M8). It sets IdentityAllowed and CredentialsMirrored,
// and returns an error only when a retry can help.
func (c *Controller) credentialStep(ctx context.Context, w *workload) (credentialResult, error) {
	// An index lookup of the member's cluster, never a list of the
	// namespace's clusters (B13).
	id, err := c.resolver.IdentityOf(w.obj)
	if err != nil {
		return credentialResult{}, err
	}
	w.status.Identity = id
	res := credentialResult{identity: id}
	if err := c.releaseOtherMirrors(ctx, w, id); err != nil {
		return res, err
	}
	identity, reason, msg, err := c.usableIdentity(ctx, w, id)
	if err != nil || reason != "" {
		c.notReady(w, reason, "%s", msg)
		return res, err
	}
	ref := identity.Spec.SecretRef
	src, err := c.source.Get(ctx, w.since, ref.Namespace, ref.Name)
	if apierrors.IsNotFound(err) {
		c.notReady(w, v1alpha1.ReasonSecretNotFound, "Secret %s/%s named by TerraformClusterIdentity %s does not exist", ref.Namespace, ref.Name, id)
		return res, nil
	}
	if err != nil {
		setCondition(w, c.clock.Now(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionUnknown, v1alpha1.ReasonIdentityCheckFailed,
			"reading Secret %s/%s of TerraformClusterIdentity %s: %v", ref.Namespace, ref.Name, id, err)
		// B8: a mirror nobody could compare with its source is not
		// reported current.
		if isTrue(w, v1alpha1.ConditionCredentialsMirrored) {
			setCondition(w, c.clock.Now(), v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending,
				"Secret %s/%s could not be read: whether mirror Secret %s is current is not known", ref.Namespace, ref.Name, credentials.MirrorName(id))
		}
		return res, fmt.Errorf("reading source Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	// Section 14: a refused source (C2) or withdrawn consent (C1) revokes
	// like V1; a missing required key (C3) only holds new Jobs back.
	if p := credentials.CheckSource(src, id, identity.Spec.RequiredKeys, c.opts.RequireSourceConsent); p != nil {
		if p.RevokesMirrors() {
			if err := c.revokeMirror(ctx, w, id, ref); err != nil {
				return res, err
			}
		}
		c.notReady(w, p.Reason, "%s", p.Message)
		return res, nil
	}
	setCondition(w, c.clock.Now(), v1alpha1.ConditionIdentityAllowed, metav1.ConditionTrue, v1alpha1.ReasonIdentityAllowed,
		"TerraformClusterIdentity %s allows namespace %s", id, w.obj.GetNamespace())
	res.mirror = credentials.MirrorName(id)
	if res.hash, err = c.ensureMirror(ctx, w, id, src.Data); err != nil {
		return res, err
	}
	res.ready = isTrue(w, v1alpha1.ConditionCredentialsMirrored)
	return res, nil
}

// usableIdentity returns the identity id when w may use it; otherwise the
// reason and message of IdentityAllowed=False: no identity, a missing one,
// or one that does not allow w's namespace, whose mirror there it then
// revokes (V1) whatever owners remain.
func (c *Controller) usableIdentity(ctx context.Context, w *workload, id string) (*v1alpha1.TerraformClusterIdentity, v1alpha1.ConditionReason, string, error) {
	if id == "" {
		return nil, v1alpha1.ReasonIdentityNotFound, fmt.Sprintf(
			"%s resolves to no identity: set spec.identityRef, or its cluster's spec.defaults.identityRef or spec.identityRef", w.kind.name), nil
	}
	identity, err := c.identities.Get(id)
	if apierrors.IsNotFound(err) {
		return nil, v1alpha1.ReasonIdentityNotFound, fmt.Sprintf("TerraformClusterIdentity %s does not exist", id), nil
	}
	if err != nil {
		return nil, "", "", err
	}
	ns := w.obj.GetNamespace()
	allowed := credentials.NamespaceAllowed(identity.Spec.AllowedNamespaces, ns, func() (labels.Set, bool) {
		n, err := c.namespaces.Get(ns)
		if err != nil {
			return nil, false
		}
		return n.Labels, true
	})
	if !allowed {
		msg := fmt.Sprintf("TerraformClusterIdentity %s does not allow namespace %s", id, ns)
		return nil, v1alpha1.ReasonNamespaceNotAllowed, msg, c.revokeMirror(ctx, w, id, identity.Spec.SecretRef)
	}
	return identity, "", "", nil
}

// notReady sets IdentityAllowed=False with reason (and CredentialsMirrored
// pending: no mirror while it is False), counting the denial.
func (c *Controller) notReady(w *workload, reason v1alpha1.ConditionReason, format string, args ...any) {
	if reason == "" {
		return
	}
	now := c.clock.Now()
	setCondition(w, now, v1alpha1.ConditionIdentityAllowed, metav1.ConditionFalse, reason, format, args...)
	setCondition(w, now, v1alpha1.ConditionCredentialsMirrored, metav1.ConditionUnknown, v1alpha1.ReasonMirrorPending,
		"no mirror while IdentityAllowed is False (%s)", reason)
	metrics.IdentityDenied.WithLabelValues(string(reason)).Inc()
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
// per object, and spares concurrent writers most conflicts (SPEC 13). refs
// are their owner references, in the same order. The users come from the
// indexes, at the cost of this namespace's users of identity (B13).
func (c *Controller) usersIn(identity string, self *workload) ([]owner, []metav1.OwnerReference, error) {
	users, err := c.resolver.UsersIn(self.obj.GetNamespace(), identity)
	if err != nil {
		return nil, nil, err
	}
	out := []owner{{obj: self.robj, ref: ownerRef(self.kind.name, self.obj)}}
	for _, u := range users {
		m := u.Object
		if m.GetUID() == self.obj.GetUID() || m.GetDeletionTimestamp() != nil {
			continue
		}
		robj, ok := m.(runtime.Object)
		if !ok {
			continue
		}
		out = append(out, owner{obj: robj, ref: ownerRef(u.Kind, m)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ref.Kind != out[j].ref.Kind {
			return out[i].ref.Kind < out[j].ref.Kind
		}
		return out[i].ref.Name < out[j].ref.Name
	})
	refs := make([]metav1.OwnerReference, len(out))
	for i, u := range out {
		refs[i] = u.ref
	}
	return out, refs, nil
}
