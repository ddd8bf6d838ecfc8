package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statebackup"
)

// SPEC O5, A3-45: spec.deletionPolicy Retain deletes an object without a
// destroy Job and leaves its state Secrets and state backups, no longer
// owned by it (so the garbage collector keeps them) and labelled
// captf.io/retained-from-uid=<its UID>. The state suffix is
// <name>-<kind> (T2), without the UID, so a new object of the same kind,
// namespace and name finds the same state: with spec.adoptRetainedState it
// takes the Secrets over (its owner reference, the label removed) and its
// first apply runs against that state; without it, the retained state
// stops the first apply, so reusing a name never silently takes over
// infrastructure.

// retainDeletion ends w's deletion under deletionPolicy Retain: once no
// Job of w starts or runs (a run is not cut in half), its state and
// backups are disowned and marked, and release is reported.
func (c *Controller) retainDeletion(ctx context.Context, w *workload) (release bool, _ error) {
	set, err := c.jobsOf(w)
	if err != nil {
		return false, err
	}
	if jobActive(w, set) {
		name := ""
		if set.running != nil {
			name = set.running.Name
		} else if w.status.LastJob != nil {
			name = w.status.LastJob.Name
		}
		setCondition(w, c.clock.Now(), v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionUnknown, v1alpha1.ReasonJobRunning,
			"deletionPolicy is Retain: waiting for Job %s to end before the object goes (no destroy Job runs)", name)
		return false, nil
	}
	n, err := c.retainState(ctx, w)
	if err != nil {
		return false, err
	}
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	w.normal(v1alpha1.EventInfrastructureRetained, "deletionPolicy is Retain: no destroy Job; the infrastructure stays, and so do the Terraform state %s/%s and its backups (%d Secret(s), labelled %s=%s) for an object of the same name with spec.adoptRetainedState",
		w.obj.GetNamespace(), jobs.StateSecretName(suffix), n, statebackup.LabelRetainedFrom, w.obj.GetUID())
	klog.FromContext(ctx).Info("Retained the infrastructure and its state", "secrets", n)
	return true, nil
}

// retainState removes w's owner reference from its state Secrets and
// state backups and labels them captf.io/retained-from-uid=<w's UID>. It
// returns how many Secrets it kept.
func (c *Controller) retainState(ctx context.Context, w *workload) (int, error) {
	secrets, err := c.retainable(ctx, w)
	if err != nil {
		return 0, err
	}
	uid := w.obj.GetUID()
	for _, s := range secrets {
		if !ownedBy(&s, uid) && s.Labels[statebackup.LabelRetainedFrom] == string(uid) {
			continue
		}
		keep := []metav1.OwnerReference{}
		for _, r := range s.OwnerReferences {
			if r.UID != uid {
				keep = append(keep, r)
			}
		}
		if err := c.patchSecretMeta(ctx, w.obj.GetNamespace(), &s, keep, string(uid)); err != nil {
			return 0, err
		}
	}
	return len(secrets), nil
}

// retainable are w's state Secrets and its state backups.
func (c *Controller) retainable(ctx context.Context, w *workload) ([]metav1.PartialObjectMetadata, error) {
	state, err := c.stateSecrets(ctx, w)
	if err != nil {
		return nil, err
	}
	backups, err := c.backupSecrets(ctx, w.obj.GetNamespace(), jobs.StateSuffix(w.kind.name, w.obj.GetName()))
	if err != nil {
		return nil, err
	}
	return append(state, backups...), nil
}

// patchSecretMeta sets the owner references of s and its label
// captf.io/retained-from-uid (removed when retainedFrom is ""), with s's
// resourceVersion as a precondition.
func (c *Controller) patchSecretMeta(ctx context.Context, ns string, s *metav1.PartialObjectMetadata, refs []metav1.OwnerReference, retainedFrom string) error {
	var label any = retainedFrom
	if retainedFrom == "" {
		label = nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": s.ResourceVersion, "ownerReferences": refs,
		"labels": map[string]any{statebackup.LabelRetainedFrom: label},
	}})
	_, err := c.kube.CoreV1().Secrets(ns).Patch(ctx, s.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("updating Secret %s/%s for deletionPolicy Retain: %w", ns, s.Name, err)
	}
	return nil
}

// firstApplyState looks, before w's first apply Job, at the state its
// suffix already has: a state retained by an earlier object is adopted
// (spec.adoptRetainedState) or blocks the apply (blocked, with
// ApplyJobSucceeded=False/RetainedStateExists); then a state that records
// w's spec as applied is adopted as its applied run (K11, adoptApplied).
// One paged LIST of the state Secrets' metadata serves both.
func (c *Controller) firstApplyState(ctx context.Context, w *workload, inputsHash string, now time.Time) (rec *v1alpha1.RunRecord, blocked bool, _ error) {
	secrets, err := c.stateSecrets(ctx, w)
	if err != nil {
		return nil, false, err
	}
	var from string
	for _, s := range secrets {
		if u := s.Labels[statebackup.LabelRetainedFrom]; u != "" && u != string(w.obj.GetUID()) {
			from = u
		}
	}
	if from != "" {
		suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
		if !v1alpha1.StatePolicyOf(w.robj).AdoptRetainedState {
			setCondition(w, now, v1alpha1.ConditionApplyJobSucceeded, metav1.ConditionFalse, v1alpha1.ReasonRetainedStateExists,
				"the Terraform state %s/%s was retained by an earlier object of this name (UID %s, deletionPolicy Retain) and its infrastructure may exist: "+
					"set spec.adoptRetainedState: true to take it over, or delete the Secrets labelled %s=%s to start from an empty state; no apply Job runs until then",
				w.obj.GetNamespace(), jobs.StateSecretName(suffix), from, statebackup.LabelRetainedFrom, from)
			return nil, true, nil
		}
		if err := c.adoptRetained(ctx, w, secrets, from); err != nil {
			return nil, false, err
		}
	}
	rec, err = c.adoptApplied(ctx, w, secrets, inputsHash, now)
	return rec, false, err
}

// adoptRetained makes the retained state Secrets (secrets) and state
// backups w's: its owner reference, the label removed; status.stateBackups
// lists the backups adopted.
func (c *Controller) adoptRetained(ctx context.Context, w *workload, secrets []metav1.PartialObjectMetadata, from string) error {
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	backups, err := c.backupSecrets(ctx, ns, suffix)
	if err != nil {
		return err
	}
	var groups []statebackup.Secret
	for _, s := range append(secrets, backups...) {
		if serial, part, ok := statebackup.Parse(suffix, s.Name, s.Labels); ok {
			groups = append(groups, backupSecret(s, serial, part))
		}
		if _, marked := s.Labels[statebackup.LabelRetainedFrom]; ownedBy(&s, w.obj.GetUID()) && !marked {
			continue
		}
		refs := s.OwnerReferences
		if !ownedBy(&s, w.obj.GetUID()) {
			refs = append(refs, stateOwnerRef(w))
		}
		if err := c.patchSecretMeta(ctx, ns, &s, refs, ""); err != nil {
			return err
		}
	}
	kept, _ := statebackup.Retain(statebackup.Group(groups), c.opts.StateBackups)
	w.status.StateBackups = backupStatus(kept)
	w.normal(v1alpha1.EventRetainedStateAdopted, "spec.adoptRetainedState: took over the Terraform state %s/%s retained by the object with UID %s, and %d backup Secret(s); the apply runs against that state",
		ns, jobs.StateSecretName(suffix), from, len(backups))
	klog.FromContext(ctx).Info("Adopted a retained Terraform state", "retainedFrom", from, "backupSecrets", len(backups))
	return nil
}
