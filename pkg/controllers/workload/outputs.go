package workload

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
)

// outputsStep publishes the outputs of the state after a successful apply
// (SPEC T4) and marks the object provisioned (T5). It follows the record,
// not the Job cache: the state is read when status.lastApply (T7, recorded
// by recordRuns earlier in this pass) is a succeeded apply that the last
// read did not follow (status.outputsSource.jobName). So a Job whose
// success criteria are met but whose pod has not ended (not recorded yet)
// is not read ahead of its record, a recorded Job that is gone from the
// cache is still read, and each recorded successful apply is read once: a
// steady pass makes no request and a state that failed to read is not read
// in a loop. The read is uncached (GETs by name, one per chunk of a state
// that Terraform split) and bounded while it decodes (B10, B11): a state
// that fails a limit is OutputsReadFailed (OutputsTooLarge when T4's cap
// stops the decoder) once, like any other unreadable state. A failure
// keeps the last good outputs. An API error is returned (retried with
// backoff) and records nothing.
func (c *Controller) outputsStep(ctx context.Context, w *workload) error {
	rec := w.status.LastApply
	if rec == nil || rec.Outcome != v1alpha1.RunSucceeded {
		// Nothing new to read (provisioned is contractOutputsStep's, K7).
		return nil
	}
	if src := w.status.OutputsSource; src != nil && src.JobName == rec.JobName {
		return nil
	}
	if last, ok := c.written.Last(w.key(), w.obj.GetUID()); ok && last.OutputsSource != nil && last.OutputsSource.JobName == rec.JobName {
		// This process read the state after this Job and wrote the result;
		// the cache has not caught up with that write yet. Keep the result
		// rather than read again: once per apply (T4, B10), however soon
		// the next pass comes.
		keepRead(w, &last)
		return nil
	}
	job := rec.JobName
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	secret := ns + "/" + tfstate.SecretName(suffix)
	out, read, err := c.readState(ctx, ns, suffix, tfstate.Keep(contract.StateBounds(w.kind.name)))
	var encoded []byte
	if err == nil {
		encoded, err = out.Encode()
	}
	kind := tfstate.KindOf(err)
	if err != nil && kind == 0 {
		return fmt.Errorf("reading the Terraform state %s for outputs: %w", secret, err)
	}
	// O5: a new serial is backed up before the read is recorded, so that
	// a failed copy is tried again with the read.
	if serial, ok := tfstate.SerialOf(out, err); ok {
		if err := c.backupState(ctx, w, serial, ok, read); err != nil {
			return err
		}
	}
	w.status.OutputsSource = c.outputsSource(w, job)
	now := c.clock.Now()
	logger := klog.FromContext(ctx).WithValues("secret", secret, "job", job)
	again := "the state is read again after the next successful apply"
	switch kind {
	case 0:
		w.status.Outputs = &runtime.RawExtension{Raw: encoded}
		w.status.SensitiveOutputs = out.Sensitive
		w.status.ContractOutputs = nil // K7: mapped from status.outputs
		// What the contract outputs say is OutputsValid's (K7, capi.go).
		setCondition(w, now, v1alpha1.ConditionOutputsAvailable, metav1.ConditionTrue, v1alpha1.ReasonOutputsRead,
			"%d outputs read from the state Secret %s after apply Job %s (%d sensitive, named in status.sensitiveOutputs, values not published)",
			len(out.Values)+len(out.Sensitive), secret, job, len(out.Sensitive))
		logger.Info("Read Terraform outputs", "outputs", len(out.Values), "sensitiveOutputs", len(out.Sensitive))
		return c.markState(ctx, w, rec, read)
	case tfstate.KindNotFound:
		setCondition(w, now, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonStateNotFound,
			"no state after apply Job %s: %v (does the module keep its state in the kubernetes backend captf configures?); %s", job, err, again)
	case tfstate.KindOutputsTooLarge:
		contractNote := ""
		if kept, ok := contractOutputs(out); ok {
			// K7: the contract outputs have their own bounds.
			w.status.ContractOutputs = kept
			contractNote = "; the contract outputs of its role were read on their own (status.contractOutputs)"
		}
		setCondition(w, now, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsTooLarge,
			"state Secret %s after apply Job %s: %v; the last good outputs stay%s; mark large outputs sensitive or make them smaller; %s", secret, job, err, contractNote, again)
	default:
		setCondition(w, now, v1alpha1.ConditionOutputsAvailable, metav1.ConditionFalse, v1alpha1.ReasonOutputsReadFailed,
			"state Secret %s after apply Job %s: %v; the last good outputs stay; %s", secret, job, err, again)
	}
	logger.Info("Could not publish Terraform outputs", "problem", kind.String(), "err", err)
	// K11: an unreadable state still moves with its object.
	return c.markState(ctx, w, rec, read)
}

// contractOutputs is status.contractOutputs of what a read kept of the
// contract outputs (K7); false when it kept nothing (another failure).
func contractOutputs(out *tfstate.Outputs) (*v1alpha1.ContractOutputs, bool) {
	if out == nil || out.Kept == nil {
		return nil, false
	}
	b, err := out.EncodeKept()
	if err != nil {
		return nil, false
	}
	return &v1alpha1.ContractOutputs{Values: &runtime.RawExtension{Raw: b}, TooLarge: slices.Clone(out.KeptTooLarge)}, true
}

// keepRead copies into w the result of the read last written: outputs,
// sensitive names, outputsSource and the OutputsAvailable condition.
func keepRead(w *workload, last *v1alpha1.WorkloadStatus) {
	w.status.Outputs = last.Outputs.DeepCopy()
	w.status.SensitiveOutputs = slices.Clone(last.SensitiveOutputs)
	w.status.OutputsSource = last.OutputsSource.DeepCopy()
	w.status.ContractOutputs = last.ContractOutputs.DeepCopy()
	w.status.StateBackups = slices.Clone(last.StateBackups)
	if c := meta.FindStatusCondition(last.Conditions, string(v1alpha1.ConditionOutputsAvailable)); c != nil {
		meta.SetStatusCondition(&w.status.Conditions, *c)
	}
}

// outputsSource is the status.outputsSource of a read that followed the
// recorded apply Job named job. The Job's creation time is informational
// (the read is decided from the name and status.lastApply): it is set from
// the Job cache, which holds the Job in the usual case (recordRuns
// recorded it from there in this pass), and left unset when the Job is
// already gone (pruned, deleted, a TTL).
func (c *Controller) outputsSource(w *workload, job string) *v1alpha1.OutputsSource {
	src := &v1alpha1.OutputsSource{JobName: job}
	set, err := c.jobsOf(w)
	if err != nil {
		return src
	}
	for _, j := range set.all {
		if j.Name == job {
			src.JobCreationTimestamp = j.CreationTimestamp
		}
	}
	return src
}

// readState reads the outputs of the state of suffix in namespace ns,
// uncached: a GET of the state Secret and, while its chunks are full (a
// state HashiCorp Terraform split), a GET of the next part by its name
// (SPEC B11: no LIST; only the backend's names are read). The Secrets are
// fetched as the decoder reads them, one held at a time, each response
// within MaxResponseBytes. An error that is not a *tfstate.Error is the
// API server's.
func (c *Controller) readState(ctx context.Context, ns, suffix string, keep tfstate.Keep) (*tfstate.Outputs, []metav1.PartialObjectMetadata, error) {
	secrets := c.uncached.Kube.CoreV1().Secrets(ns)
	var read []metav1.PartialObjectMetadata
	out, err := tfstate.ReadKeeping(tfstate.Chunks(suffix, func(name string) (*corev1.Secret, error) {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if s != nil {
			// What marking the state needs of it (K11), so no second read.
			read = append(read, stateMeta(&s.ObjectMeta))
		}
		return s, err
	}), keep)
	return out, read, err
}
