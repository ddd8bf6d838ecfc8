package workload

import (
	"context"
	"fmt"
	"slices"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/tfstate"
)

// backupStep backs up the state after a finished Job that can write it
// other than a successful apply (SPEC O5): a failed apply (Terraform
// writes the state of what it applied before it failed), a failed destroy,
// and a drift check (apply -refresh-only writes a new serial). A
// successful apply's state is read, and backed up, by outputsStep. Like
// outputsStep it follows the record (newestRun, T7), not the Job cache,
// and reads once per recorded Job: status.stateBackupJob names the Job
// after which it last read, so a steady pass makes no request. The read
// is outputsStep's (readState: uncached GETs by the backend's names,
// bounded while it decodes, B10, B11); a state that cannot be read or
// decoded is not backed up, and not read again for that Job. An API error
// is returned and records nothing, so the read is done again.
func (c *Controller) backupStep(ctx context.Context, w *workload) error {
	action, rec := newestRun(w.status)
	if c.opts.StateBackups <= 0 || rec == nil || rec.JobName == adoptedJobName || !backupAfter(action, rec) {
		return nil
	}
	if w.status.StateBackupJob == rec.JobName {
		return nil
	}
	if last, ok := c.written.Last(w.key(), w.obj.GetUID()); ok && last.StateBackupJob == rec.JobName {
		// Read and written by this process; the cache has not caught up
		// with that write yet: keep it rather than read again.
		w.status.StateBackupJob = last.StateBackupJob
		w.status.StateBackups = slices.Clone(last.StateBackups)
		return nil
	}
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	out, read, err := c.readState(ctx, ns, suffix, nil) // the serial only
	if err != nil && tfstate.KindOf(err) == 0 {
		return fmt.Errorf("reading the Terraform state %s/%s for its backup after %s Job %s: %w", ns, tfstate.SecretName(suffix), action, rec.JobName, err)
	}
	if serial, ok := tfstate.SerialOf(out, err); ok {
		if err := c.backupState(ctx, w, serial, ok, read); err != nil {
			return err
		}
	}
	w.status.StateBackupJob = rec.JobName
	return nil
}

// backupAfter reports whether the recorded run rec of action may have
// written a state serial backupStep copies: an apply that did not succeed
// (outputsStep reads after a success), a destroy that did not succeed (a
// successful one ends the object's state), a drift check whatever its
// outcome. Plans write no state; a restore's serial is backed up by the
// next apply (design.md: a restored serial can equal a newer backup's).
func backupAfter(action v1alpha1.JobAction, rec *v1alpha1.RunRecord) bool {
	switch action {
	case v1alpha1.JobActionApply, v1alpha1.JobActionDestroy:
		return rec.Outcome != v1alpha1.RunSucceeded
	case v1alpha1.JobActionDrift:
		return true
	}
	return false
}
