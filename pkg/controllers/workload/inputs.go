package workload

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/jobs"
)

// SPEC K5, K6: a run's inputs reach its pod through a Secret of the run
// (captf-run-<Job>), owned by the Job, deleted once the manager sees the
// Job finished, whatever its class (deleteRunSecrets); the Job is created suspended and resumed once that Secret
// exists. The object's inputs Secret (captf-inputs-<suffix>) keeps the
// inputs of its last apply: a destroy runs with them (the bootstrap data
// Secret may be gone by then), and a provisioned machine runs with them
// again (it pins what it was provisioned with).

// maxInputsBytes bounds an inputs Secret's inputs the manager reads back
// (a tenant may edit that Secret; the runner's bound is the same).
const maxInputsBytes = 1 << 20

// runInputs returns the inputs a Job of action runs with: for an apply,
// those rendered this pass, or, for a provisioned machine, its pinned
// ones; for a destroy, the last apply's, else those rendered now (best
// effort: without bootstrap data when it cannot be read).
func (c *Controller) runInputs(ctx context.Context, w *workload, action v1alpha1.JobAction) (contract.Inputs, error) {
	// O8: a plan Job plans what an apply would run now.
	if (action == v1alpha1.JobActionApply || action == v1alpha1.JobActionPlan) && w.contract.inputs != nil {
		return w.contract.inputs, nil
	}
	saved, err := c.savedInputs(ctx, w)
	if err != nil || saved != nil {
		return saved, err
	}
	return contract.RenderInputs(contract.InputSources{
		Kind: w.kind.name, Object: w.obj, Owners: w.contract.owners, Exports: c.exportsOf(w.contract.cluster),
	}), nil
}

// inputsSecretName is the name of w's inputs Secret.
func inputsSecretName(w *workload) string {
	return jobs.InputsSecretName(jobs.StateSuffix(w.kind.name, w.obj.GetName()))
}

// savedInputs reads w's inputs Secret uncached; nil when there is none or
// it cannot be used (it is rewritten by the next apply).
func (c *Controller) savedInputs(ctx context.Context, w *workload) (contract.Inputs, error) {
	s, err := c.uncached.Kube.CoreV1().Secrets(w.obj.GetNamespace()).Get(ctx, inputsSecretName(w), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the inputs Secret %s/%s: %w", w.obj.GetNamespace(), inputsSecretName(w), err)
	}
	b := s.Data[jobs.InputsKey]
	if !ownedBy(s, w.obj.GetUID()) || len(b) > maxInputsBytes {
		return nil, nil
	}
	in, err := contract.DecodeInputs(b)
	if err != nil {
		klog.FromContext(ctx).Info("Ignoring an inputs Secret that does not hold a JSON object", "secret", klog.KObj(s))
		return nil, nil
	}
	return in, nil
}

// ownedBy reports whether obj has an owner reference to uid.
func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// saveInputs makes w's inputs Secret hold in (K5: what the next apply is
// provisioned with), writing only when its recorded hash differs.
func (c *Controller) saveInputs(ctx context.Context, w *workload, in contract.Inputs) error {
	ns, name, hash := w.obj.GetNamespace(), inputsSecretName(w), in.Hash()
	secrets := c.kube.CoreV1().Secrets(ns)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			// No captf.io/managed label: clusterctl move copies this Secret
			// with its object, and B3's policy lets only the manager and
			// system:masters write that label (K11). The owner reference and
			// the name say whose it is.
			Name: name, Namespace: ns,
			Annotations:     map[string]string{v1alpha1.AnnotationInputsHash: hash},
			OwnerReferences: []metav1.OwnerReference{objectOwnerRef(w)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{jobs.InputsKey: in.JSON()},
	}
	cur, err := c.uncached.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, desired, metav1.CreateOptions{FieldManager: fieldManager})
		if err != nil {
			return fmt.Errorf("creating the inputs Secret %s/%s: %w", ns, name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the inputs Secret %s/%s: %w", ns, name, err)
	case cur.Annotations[v1alpha1.AnnotationInputsHash] == hash && ownedBy(cur, w.obj.GetUID()):
		return nil
	}
	desired.ResourceVersion = cur.ResourceVersion
	if _, err := secrets.Update(ctx, desired, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("updating the inputs Secret %s/%s: %w", ns, name, err)
	}
	return nil
}

// objectOwnerRef is the controller owner reference to w.
func objectOwnerRef(w *workload) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: w.kind.name,
		Name: w.obj.GetName(), UID: w.obj.GetUID(), Controller: ptr.To(true),
	}
}

// startRun creates the run Secret of job, owned by it, holding in, and
// resumes the Job (K5). A run Secret that exists is kept: a pass that
// created it and failed to resume left it.
func (c *Controller) startRun(ctx context.Context, job *batchv1.Job, in contract.Inputs) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: jobs.RunSecretName(job.Name), Namespace: job.Namespace,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID, Controller: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{jobs.InputsKey: in.JSON()},
	}
	_, err := c.kube.CoreV1().Secrets(job.Namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the run Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return c.resume(ctx, job)
}

// resume clears spec.suspend of job.
func (c *Controller) resume(ctx context.Context, job *batchv1.Job) error {
	patch := []byte(`{"spec":{"suspend":false}}`)
	out, err := c.kube.BatchV1().Jobs(job.Namespace).Patch(ctx, job.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	switch {
	case err == nil:
		// The manager's own write: its event is not a change to react to.
		c.echoes.wrote(cache.ObjectName{Namespace: out.Namespace, Name: out.Name}, out.ResourceVersion)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("resuming Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// suspendedRun reports whether j is a Job of the manager's still waiting
// for its run Secret: created suspended (K5) and not resumed.
func suspendedRun(j *batchv1.Job) bool {
	return j != nil && ptr.Deref(j.Spec.Suspend, false) && j.Annotations[v1alpha1.AnnotationInputsHash] != "" && !jobs.Finished(j)
}

// resumeRun finishes the start of a suspended Job whose pass ended
// between its creation and its resumption (a restart, an error): its run
// Secret gets the object's saved inputs (the apply saved them before it
// created the Job), or, without them, those of this pass.
func (c *Controller) resumeRun(ctx context.Context, w *workload, j *batchv1.Job) error {
	in, err := c.runInputs(ctx, w, jobs.ActionOf(j))
	if err != nil {
		return err
	}
	klog.FromContext(ctx).Info("Resuming a Job whose start was interrupted", "job", klog.KObj(j))
	return c.startRun(ctx, j, in)
}

// deleteRunSecrets deletes the run Secret of every finished Job of w in
// the Job cache whose deletion is not known to be done (K5: deleted when
// the run finishes), whatever the Job's class: apply, destroy, drift,
// plan, restore. Known done: a Job its class's record in before names, or
// one older than that record (the pass that recorded it deleted its
// Secret, so a restart costs no request), or one this process deleted for
// and that no record covers yet (runSecretsGone). Missing Secrets are
// fine; one that cannot be deleted goes with its Job (owner reference).
func (c *Controller) deleteRunSecrets(ctx context.Context, w *workload, before *v1alpha1.WorkloadStatus) {
	set, err := c.jobsOf(w)
	if err != nil {
		return
	}
	key := cache.ObjectName{Namespace: w.obj.GetNamespace(), Name: w.obj.GetName()}
	gone := c.runSecretsGone.get(w.kind.name, key)
	var keep []string
	for _, j := range set.all {
		if !jobs.Finished(j) || j.DeletionTimestamp != nil || recordCovers(before, j, c.clock.Now()) {
			continue
		}
		if !slices.Contains(gone, j.Name) {
			name := jobs.RunSecretName(j.Name)
			err := c.kube.CoreV1().Secrets(j.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				klog.FromContext(ctx).Info("Could not delete a finished run's Secret; it goes with its Job", "secret", klog.KRef(j.Namespace, name), "err", err)
				continue
			}
		}
		if !recordCovers(w.status, j, c.clock.Now()) {
			keep = append(keep, j.Name)
		}
	}
	c.runSecretsGone.set(w.kind.name, key, keep)
}

// recordCovers reports whether st's record of j's action names j or a
// newer run.
func recordCovers(st *v1alpha1.WorkloadStatus, j *batchv1.Job, now time.Time) bool {
	slot := *statusRecord(st, jobs.ActionOf(j))
	if slot == nil {
		return false
	}
	r := recordOf(j, now)
	return slot.JobName == j.Name || (r != nil && !newerRecord(r, slot))
}

// runSecretsGone holds, per object, the finished Jobs whose run Secret
// this process deleted and that no record covered yet: a Job finished but
// not recorded (a step that records its class did not run), so that the
// next pass does not delete again. Entries go when a record covers them,
// the Job leaves the cache, or the object is gone (forget). One
// controller serves the three kinds, so an entry is the kind's and the
// object's: a cluster and a machine may share a name in a namespace.
type runSecretsGone struct {
	mu sync.Mutex
	m  map[kindKey][]string
}

// kindKey names an object of one of the workload kinds.
type kindKey struct {
	kind string
	key  cache.ObjectName
}

func (g *runSecretsGone) get(kind string, key cache.ObjectName) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[kindKey{kind, key}]
}

func (g *runSecretsGone) set(kind string, key cache.ObjectName, names []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(names) == 0 {
		delete(g.m, kindKey{kind, key})
		return
	}
	if g.m == nil {
		g.m = map[kindKey][]string{}
	}
	g.m[kindKey{kind, key}] = names
}
