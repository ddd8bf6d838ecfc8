package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
)

// SPEC K11: clusterctl move copies an object, its owned Secrets and the
// Secrets owned by those, without status, then deletes the source copies
// marked clusterctl.cluster.x-k8s.io/delete-for-move. So:
//
//   - the state Secrets are owned by their object (an owner reference the
//     manager adds after each successful apply), so they move with it;
//   - whether the spec was applied lives in the state too: the manager
//     marks the state Secret with the hash of the spec it applied and of
//     the inputs, and an object with no record of any apply whose state
//     carries the marks of its current spec and inputs adopts them as its
//     applied run, instead of applying again (after a move, or a restore
//     from a backup that dropped status);
//   - a source copy deleted for the move (the annotation, paused or not)
//     starts no destroy and keeps its state (deletionForMove).

// adoptedJobName names, in status.lastApply, a run adopted from the state
// rather than recorded from a Job: not a valid object name, so it never
// names a Job.
const adoptedJobName = "(adopted from the state)"

// specHash is the hash of w's spec without the fields the manager writes
// from the outputs (endpoint, provider IDs: T5, K7), so writing them does
// not make the spec look unapplied, and without deletionPolicy and
// adoptRetainedState (O5), which say nothing of what was applied: an
// object that adopts a retained state with the spec that state records
// adopts it as applied.
func specHash(w *workload) string {
	var spec any
	switch o := w.robj.(type) {
	case *v1alpha1.TerraformCluster:
		s := o.Spec.DeepCopy()
		s.ControlPlaneEndpoint = v1alpha1.APIEndpoint{}
		s.StatePolicy = v1alpha1.StatePolicy{}
		spec = s
	case *v1alpha1.TerraformMachine:
		s := o.Spec.DeepCopy()
		s.ProviderID = ""
		s.StatePolicy = v1alpha1.StatePolicy{}
		spec = s
	case *v1alpha1.TerraformMachinePool:
		s := o.Spec.DeepCopy()
		s.ProviderIDList = nil
		s.StatePolicy = v1alpha1.StatePolicy{}
		spec = s
	}
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(append([]byte(w.kind.name+"\x00"), b...))
	return hex.EncodeToString(sum[:])
}

// stateSecrets returns the metadata of w's state Secrets (the backend's
// names for its suffix carrying the backend's labels, B15), paged (B11).
func (c *Controller) stateSecrets(ctx context.Context, w *workload) ([]metav1.PartialObjectMetadata, error) {
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	selector := labels.SelectorFromSet(labels.Set{tfstate.LabelState: "true", tfstate.LabelSuffix: suffix})
	var out []metav1.PartialObjectMetadata
	err := c.uncached.listMetadata(ctx, secretsResource, w.obj.GetNamespace(), selector.String(), func(m *metav1.PartialObjectMetadata) error {
		if tfstate.IsStateName(suffix, m.Name) && selector.Matches(labels.Set(m.Labels)) {
			out = append(out, stateMeta(&m.ObjectMeta))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the state Secrets of %s: %w", suffix, err)
	}
	return out, nil
}

// stateMeta keeps of a state Secret's metadata what marking it needs.
func stateMeta(m *metav1.ObjectMeta) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion,
		OwnerReferences: m.OwnerReferences, Annotations: pick(m.Annotations, v1alpha1.AnnotationAppliedSpec, v1alpha1.AnnotationAppliedInputs),
		Labels: pick(m.Labels, statebackup.LabelRetainedFrom), CreationTimestamp: m.CreationTimestamp,
	}}
}

// markState makes w's state Secrets, as the outputs read found them,
// owned by w (so they move with it, K11) and marks the main one with the
// hashes of the spec and inputs rec, the recorded successful apply, ran
// with. Called once per successful apply, after its outputs were read
// (no second read); nothing is written when all is in place.
// Marks are written only while the spec is the applied one (rec covers
// the generation): a later spec is marked by its own apply.
func (c *Controller) markState(ctx context.Context, w *workload, rec *v1alpha1.RunRecord, secrets []metav1.PartialObjectMetadata) error {
	main := tfstate.SecretName(jobs.StateSuffix(w.kind.name, w.obj.GetName()))
	covered := coversGeneration(w, rec)
	for _, s := range secrets {
		patch := map[string]any{}
		meta := map[string]any{"resourceVersion": s.ResourceVersion}
		if !ownedBy(&s, w.obj.GetUID()) {
			refs := append(s.OwnerReferences, stateOwnerRef(w))
			meta["ownerReferences"] = refs
		}
		if s.Name == main && covered {
			want := map[string]string{v1alpha1.AnnotationAppliedSpec: specHash(w), v1alpha1.AnnotationAppliedInputs: rec.InputsHash}
			if s.Annotations[v1alpha1.AnnotationAppliedSpec] != want[v1alpha1.AnnotationAppliedSpec] ||
				s.Annotations[v1alpha1.AnnotationAppliedInputs] != want[v1alpha1.AnnotationAppliedInputs] {
				meta["annotations"] = want
			}
		}
		if len(meta) == 1 {
			continue
		}
		patch["metadata"] = meta
		b, _ := json.Marshal(patch)
		_, err := c.kube.CoreV1().Secrets(w.obj.GetNamespace()).Patch(ctx, s.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking the state Secret %s/%s: %w", w.obj.GetNamespace(), s.Name, err)
		}
	}
	return nil
}

// stateOwnerRef is w's owner reference on its state Secrets: not a
// controller, no blockOwnerDeletion (J3's reasoning).
func stateOwnerRef(w *workload) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: w.kind.name, Name: w.obj.GetName(), UID: w.obj.GetUID()}
}

// disownState removes w's owner references from its state Secrets and
// state backups, so they outlive w: the state stays when the infrastructure is abandoned
// (V2) or kept (K11, O5). Their other owners stay.
func (c *Controller) disownState(ctx context.Context, w *workload) error {
	secrets, err := c.retainable(ctx, w) // the state and its backups (O5)
	if err != nil {
		return err
	}
	for _, s := range secrets {
		if !ownedBy(&s, w.obj.GetUID()) {
			continue
		}
		var keep []metav1.OwnerReference
		for _, r := range s.OwnerReferences {
			if r.UID != w.obj.GetUID() {
				keep = append(keep, r)
			}
		}
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": s.ResourceVersion, "ownerReferences": keep}})
		_, err := c.kube.CoreV1().Secrets(w.obj.GetNamespace()).Patch(ctx, s.Name, types.MergePatchType, b, metav1.PatchOptions{FieldManager: fieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("keeping the state Secret %s/%s: %w", w.obj.GetNamespace(), s.Name, err)
		}
	}
	return nil
}

// adoptApplied looks, before w's first apply Job, for a state that
// records w's current spec and inputs as applied (K11: a copy clusterctl
// moved, or a restore, without status). When it finds one it records the
// run in status.lastApply as adopted and returns it; no Job runs, and the
// outputs are read from that state as after an apply (T4). inputsHash is
// the hash of the inputs the apply would run with ("" when unknown);
// secrets are w's state Secrets (stateSecrets).
func (c *Controller) adoptApplied(ctx context.Context, w *workload, secrets []metav1.PartialObjectMetadata, inputsHash string, now time.Time) (*v1alpha1.RunRecord, error) {
	main := tfstate.SecretName(jobs.StateSuffix(w.kind.name, w.obj.GetName()))
	for _, s := range secrets {
		if s.Name != main {
			continue
		}
		spec, inputs := s.Annotations[v1alpha1.AnnotationAppliedSpec], s.Annotations[v1alpha1.AnnotationAppliedInputs]
		if spec != specHash(w) || (inputsHash != "" && inputs != "" && inputs != inputsHash) {
			return nil, nil
		}
		rec := &v1alpha1.RunRecord{
			Generation: w.obj.GetGeneration(), JobName: adoptedJobName, Outcome: v1alpha1.RunSucceeded,
			FinishTime: metav1.NewTime(now.UTC().Truncate(time.Second)), Attempt: 1, InputsHash: inputs,
		}
		w.status.LastApply = rec
		w.normal(v1alpha1.EventStateAdopted, "The state Secret %s records this spec as applied (a moved or restored object): no apply Job runs for it", s.Name)
		klog.FromContext(ctx).Info("Adopted an applied state", "secret", klog.KRef(w.obj.GetNamespace(), s.Name))
		return rec, nil
	}
	return nil, nil
}

// deletionForMove reports whether w's deletion is clusterctl move's
// deletion of the source copy: it carries
// clusterctl.cluster.x-k8s.io/delete-for-move. SPEC K11 names only the
// annotation, so it is honoured whether or not the object is paused
// (clusterctl pauses the Cluster too; upstream A4-23 also required the
// pause). Like captf.io/abandon-infrastructure, whoever may annotate the
// object may skip its destroy this way.
func deletionForMove(w *workload) bool {
	_, ok := w.obj.GetAnnotations()[v1alpha1.AnnotationDeleteForMove]
	return ok
}

// blockMoveValue is the manager's value of clusterctl's block-move
// annotation; one with another value is someone else's and stays.
const blockMoveValue = "captf: a Job is starting or running"

// blockingMove reports whether w carries the manager's block-move mark.
func blockingMove(w *workload) bool {
	return w.obj.GetAnnotations()[v1alpha1.AnnotationBlockMove] == blockMoveValue
}

// setBlockMoveOn sets or removes the manager's block-move mark on w's
// object (no write); a value someone else set is left alone.
func setBlockMoveOn(w *workload, present bool) {
	a := maps.Clone(w.obj.GetAnnotations())
	switch {
	case present:
		if _, set := a[v1alpha1.AnnotationBlockMove]; set {
			return
		}
		if a == nil {
			a = map[string]string{}
		}
		a[v1alpha1.AnnotationBlockMove] = blockMoveValue
	case blockingMove(w):
		delete(a, v1alpha1.AnnotationBlockMove)
	default:
		return
	}
	w.obj.SetAnnotations(a)
}

// prepareStart is the write before a Job of w is created: the finalizer
// (an object whose apply Job exists is never deleted without a destroy,
// J8) and clusterctl's block-move mark (K11: a move waits for the Job
// instead of cutting its run in half), in one update.
//
// A standalone object (captf.io/standalone) is in no Cluster's move graph:
// it gets no mark, so its runs cost no extra writes.
func (c *Controller) prepareStart(ctx context.Context, w *workload) (*workload, error) {
	_, marked := w.obj.GetAnnotations()[v1alpha1.AnnotationBlockMove]
	if w.contract.standalone {
		return c.setFinalizer(ctx, w, true)
	}
	if hasFinalizer(w) && marked {
		return w, nil
	}
	return c.updateMeta(ctx, w, "the finalizer and block-move mark", func() {
		setFinalizerOn(w, true)
		setBlockMoveOn(w, true)
	})
}

// jobActive reports whether a Job of w may be starting or running: one
// the cache shows unfinished, or the one status.lastJob names when the
// cache does not show it yet and no run record names it (K11).
func jobActive(w *workload, set jobSet) bool {
	if set.running != nil {
		return true
	}
	last := w.status.LastJob
	if last == nil {
		return false
	}
	for _, j := range set.all {
		if j.Name == last.Name {
			return false // cached, and finished
		}
	}
	for _, rec := range []*v1alpha1.RunRecord{w.status.LastApply, w.status.LastDestroy, w.status.LastDriftCheck} {
		if rec != nil && rec.JobName == last.Name {
			return false
		}
	}
	return true
}

// releaseMove removes the manager's block-move mark once no Job of w is
// starting or running (K11).
func (c *Controller) releaseMove(ctx context.Context, w *workload) (*workload, error) {
	if !blockingMove(w) {
		return w, nil
	}
	set, err := c.jobsOf(w)
	if err != nil || jobActive(w, set) {
		return w, err
	}
	return c.updateMeta(ctx, w, "the block-move mark", func() { setBlockMoveOn(w, false) })
}
