package credentials

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// MirrorAction is what a reconcile does about a namespace's mirror.
type MirrorAction int

const (
	// MirrorCurrent: the mirror carries the desired data, labels,
	// annotations and every user's owner reference; no write (SPEC M6).
	MirrorCurrent MirrorAction = iota
	// MirrorCreate: nothing holds the name; create [MirrorPlan.Secret].
	MirrorCreate
	// MirrorUpdate: the mirror differs; update it to [MirrorPlan.Secret].
	MirrorUpdate
	// MirrorForeign: a Secret that is not this identity's mirror holds the
	// name; it is never modified (SPEC M7).
	MirrorForeign
	// MirrorDeleting: the mirror is being deleted; wait for it to go.
	MirrorDeleting
)

// String names the action for logs and test failures.
func (a MirrorAction) String() string {
	switch a {
	case MirrorCurrent:
		return "current"
	case MirrorCreate:
		return "create"
	case MirrorUpdate:
		return "update"
	case MirrorForeign:
		return "foreign"
	case MirrorDeleting:
		return "deleting"
	}
	return "unknown"
}

// MirrorPlan is the decision [PlanMirror] takes.
type MirrorPlan struct {
	Action MirrorAction
	// Secret is the object to create (MirrorCreate), or the mirror as the
	// update leaves it as far as the planned-from copy shows (MirrorUpdate;
	// a cache copy may lack labels and annotations others set, which the
	// update keeps); it shares no memory with the inputs.
	Secret *corev1.Secret
	// Patch is the update (MirrorUpdate): [MirrorPatch], preconditioned on
	// the resourceVersion of the Secret the plan was made from (SPEC P3).
	// It is nil when that Secret has no resourceVersion: read it uncached
	// and plan again.
	Patch []byte
	// Diff says which owned fields differ (MirrorUpdate); owner references
	// are in OwnersAdded and Repaired.
	Diff MirrorDiff
	// OwnersAdded is how many users' references were missing.
	OwnersAdded int
	// Repaired are the users' references that replaced one of the same kind
	// and name with an older UID (SPEC M5: an OwnerReferenceRepaired event
	// on each).
	Repaired []metav1.OwnerReference
	// Foreign says why the Secret is not the mirror (MirrorForeign).
	Foreign string
}

// PlanMirror decides what to do with existing, the Secret that holds the
// mirror's name (nil when none does, or a trimmed cache copy, SPEC B1),
// given desired from [DesiredMirror] and the owner references of every user
// of the mirror in the namespace (SPEC M2-M7). It is pure: the caller reads,
// writes and retries. An update is a patch preconditioned on existing's
// resourceVersion (SPEC P3), so it may be planned from a trimmed cache copy:
// if the Secret changed since that version the API server refuses the
// write with a Conflict, and the caller reads it uncached and plans again
// (B1: nothing is ever overwritten blind).
func PlanMirror(existing, desired *corev1.Secret, users []metav1.OwnerReference) MirrorPlan {
	if existing == nil {
		s := desired.DeepCopy()
		for _, ref := range users {
			s.OwnerReferences, _, _ = EnsureOwnerReference(s.OwnerReferences, ref)
		}
		return MirrorPlan{Action: MirrorCreate, Secret: s, OwnersAdded: len(s.OwnerReferences)}
	}
	if why := ForeignReason(existing, desired.Annotations[v1alpha1.AnnotationIdentity]); why != "" {
		return MirrorPlan{Action: MirrorForeign, Foreign: why}
	}
	if existing.DeletionTimestamp != nil {
		return MirrorPlan{Action: MirrorDeleting}
	}
	plan := MirrorPlan{Diff: CompareMirror(existing, desired)}
	refs := existing.OwnerReferences
	for _, ref := range users {
		var changed, replaced bool
		refs, changed, replaced = EnsureOwnerReference(refs, ref)
		switch {
		case replaced:
			plan.Repaired = append(plan.Repaired, ref)
		case changed:
			plan.OwnersAdded++
		}
	}
	if !plan.Diff.Any() && plan.OwnersAdded == 0 && len(plan.Repaired) == 0 {
		plan.Action = MirrorCurrent
		return plan
	}
	plan.Action = MirrorUpdate
	plan.Secret = ApplyDesired(existing, desired)
	plan.Secret.OwnerReferences = slices.Clone(refs)
	if p, err := MirrorPatch(existing, desired, plan); err == nil {
		plan.Patch = p
	}
	return plan
}
