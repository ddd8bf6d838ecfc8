package workload

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
	"github.com/captf/captf/pkg/metrics"
	"github.com/captf/captf/pkg/statebackup"
	"github.com/captf/captf/pkg/tfstate"
)

// annotationBackupSource names, on a backup Secret, the state Secret it
// is a copy of.
const annotationBackupSource = "captf.io/state-backup-source"

// backupState copies the state just read after a finished Job to backup
// Secrets when its serial is new (SPEC O5), prunes the backups of the
// object's state to the newest --state-backups, and lists the kept ones
// in status.stateBackups. It runs inside outputsStep's read, once per
// recorded successful apply, and backupStep's, once per recorded failed
// apply, failed destroy or drift check, so a steady pass reads and writes
// nothing;
// and when the serial is the newest one backed up (an apply that changed
// nothing) it makes no request either.
//
// read is what the outputs read found of the state Secrets (their
// resourceVersions): the copy GETs each part again by the backend's name
// (B11: uncached, by name, within the response budget; one part held at a
// time), and gives up when a part changed since the read, because the
// serial it decoded would then not be the serial it copies; the next
// apply's read backs up the state as it is then. An API error is returned
// (outputsStep then records nothing, and the read and copy are done again
// on the next pass).
func (c *Controller) backupState(ctx context.Context, w *workload, serial int64, hasSerial bool, read []metav1.PartialObjectMetadata) error {
	keep := c.opts.StateBackups
	var last int64
	lastOK := len(w.status.StateBackups) > 0
	if lastOK {
		last = w.status.StateBackups[0].Serial
	}
	if !hasSerial || !statebackup.Due(keep, serial, last, lastOK) {
		return nil
	}
	ns := w.obj.GetNamespace()
	suffix := jobs.StateSuffix(w.kind.name, w.obj.GetName())
	logger := klog.FromContext(ctx).WithValues("serial", serial)
	parts, err := c.copyState(ctx, w, suffix, serial, read)
	if err != nil {
		return err
	}
	if parts == 0 {
		metrics.StateBackups.WithLabelValues(metrics.BackupSkipped).Inc()
		logger.Info("Did not back up the Terraform state: it changed since it was read, or a Secret that is not a backup has the backup's name; the next apply's read backs it up",
			"secret", klog.KRef(ns, statebackup.Name(suffix, serial)))
		return nil
	}
	backups, uids, err := c.listBackups(ctx, ns, suffix)
	if err != nil {
		return err
	}
	metrics.StateBackups.WithLabelValues(metrics.BackupCreated).Inc()
	kept, pruned := statebackup.Retain(backups, keep)
	for _, b := range pruned {
		for _, name := range b.Secrets {
			uid := uids[name]
			err := c.kube.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("pruning state backup Secret %s/%s: %w", ns, name, err)
			}
		}
		metrics.StateBackups.WithLabelValues(metrics.BackupPruned).Inc()
	}
	w.status.StateBackups = backupStatus(kept)
	w.normal(v1alpha1.EventStateBackedUp, "Terraform state serial %d copied to Secret %s (%d part(s)); %d backup(s) kept, %d pruned (--state-backups=%d)",
		serial, statebackup.Name(suffix, serial), parts, len(kept), len(pruned), keep)
	logger.Info("Backed up the Terraform state", "secret", klog.KRef(ns, statebackup.Name(suffix, serial)), "parts", parts, "kept", len(kept), "pruned", len(pruned))
	return nil
}

// copyState copies the state Secrets of suffix, part by part as the
// backend chains them (tfstate.Chunks' rule: a part follows a full chunk),
// to the backup of serial. It returns the number of parts copied, 0 when
// the state changed since read (or is gone) or a backup's name is taken by
// a Secret that is not a backup: then nothing is backed up.
func (c *Controller) copyState(ctx context.Context, w *workload, suffix string, serial int64, read []metav1.PartialObjectMetadata) (int, error) {
	ns := w.obj.GetNamespace()
	seen := make(map[string]string, len(read))
	for _, m := range read {
		seen[m.Name] = m.ResourceVersion
	}
	secrets := c.uncached.Kube.CoreV1().Secrets(ns)
	selector := tfstate.Selector(suffix)
	n := 0
	for i := 0; i < tfstate.MaxParts; i++ {
		name := tfstate.PartName(suffix, i)
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			if i == 0 {
				return 0, nil
			}
			break
		}
		if err != nil {
			return 0, fmt.Errorf("reading state Secret %s/%s for its backup: %w", ns, name, err)
		}
		if i > 0 && !selector.Matches(labels.Set(s.Labels)) {
			break
		}
		if rv, ok := seen[name]; !ok || rv != s.ResourceVersion {
			return 0, nil
		}
		chunk := s.Data[tfstate.DataKey]
		ok, err := c.writeBackup(ctx, w, suffix, serial, i, chunk)
		if err != nil || !ok {
			return 0, err
		}
		n++
		if len(chunk) != tfstate.ChunkSize {
			break
		}
	}
	return n, nil
}

// writeBackup creates part i of the backup of serial with data, or
// replaces the data of the backup Secret of that name (a copy an earlier
// pass wrote, or a serial pushed again). It reports false, writing
// nothing, when a Secret that is not that backup holds the name. The
// backup is owned by the object like its state (K11: it moves and goes
// with it; disowned under deletionPolicy Retain).
func (c *Controller) writeBackup(ctx context.Context, w *workload, suffix string, serial int64, i int, data []byte) (bool, error) {
	ns := w.obj.GetNamespace()
	name := statebackup.PartName(suffix, serial, i)
	b := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns,
			Labels: statebackup.Labels(suffix, serial, i),
			Annotations: map[string]string{annotationBackupSource: tfstate.PartName(suffix, i),
				statebackup.AnnotationBytes: strconv.Itoa(len(data))},
			OwnerReferences: []metav1.OwnerReference{stateOwnerRef(w)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{tfstate.DataKey: data},
	}
	_, err := c.kube.CoreV1().Secrets(ns).Create(ctx, b, metav1.CreateOptions{FieldManager: fieldManager})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating state backup Secret %s/%s: %w", ns, name, err)
	}
	old, err := c.uncached.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading state backup Secret %s/%s: %w", ns, name, err)
	}
	if s, p, ok := statebackup.Parse(suffix, old.Name, old.Labels); !ok || s != serial || p != i {
		return false, nil
	}
	b.ResourceVersion = old.ResourceVersion
	b.OwnerReferences = old.OwnerReferences
	if !ownedBy(old, w.obj.GetUID()) {
		b.OwnerReferences = append(b.OwnerReferences, stateOwnerRef(w))
	}
	if _, err := c.kube.CoreV1().Secrets(ns).Update(ctx, b, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return false, fmt.Errorf("replacing state backup Secret %s/%s: %w", ns, name, err)
	}
	return true, nil
}

// listBackups lists the backups of suffix in ns (backupSecrets), newest
// serial first, with the UID of each Secret.
func (c *Controller) listBackups(ctx context.Context, ns, suffix string) ([]statebackup.Backup, map[string]types.UID, error) {
	metas, err := c.backupSecrets(ctx, ns, suffix)
	if err != nil {
		return nil, nil, err
	}
	secrets := make([]statebackup.Secret, 0, len(metas))
	uids := make(map[string]types.UID, len(metas))
	for _, m := range metas {
		serial, part, _ := statebackup.Parse(suffix, m.Name, m.Labels)
		secrets = append(secrets, backupSecret(m, serial, part))
		uids[m.Name] = m.UID
	}
	return statebackup.Group(secrets), uids, nil
}

// backupSecrets returns the metadata of the backup Secrets of suffix in
// ns: a paged LIST of metadata by label (B11, B13) keeping only Secrets
// whose names and labels agree (statebackup.Parse), and of each what the
// retention, Retain and adoption need.
func (c *Controller) backupSecrets(ctx context.Context, ns, suffix string) ([]metav1.PartialObjectMetadata, error) {
	var out []metav1.PartialObjectMetadata
	err := c.uncached.listMetadata(ctx, secretsResource, ns, statebackup.Selector(suffix).String(), func(m *metav1.PartialObjectMetadata) error {
		if _, _, ok := statebackup.Parse(suffix, m.Name, m.Labels); !ok {
			return nil
		}
		out = append(out, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: m.Name, UID: m.UID, ResourceVersion: m.ResourceVersion, OwnerReferences: m.OwnerReferences,
			CreationTimestamp: m.CreationTimestamp,
			Labels:            pick(m.Labels, statebackup.LabelBackup, statebackup.LabelSuffix, statebackup.LabelSerial, statebackup.LabelPart, statebackup.LabelRetainedFrom),
			Annotations:       pick(m.Annotations, statebackup.AnnotationBytes),
		}})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing the state backups of %s: %w", suffix, err)
	}
	return out, nil
}

// backupSecret is what the retention and status.stateBackups need of the
// backup Secret m, part part of serial.
func backupSecret(m metav1.PartialObjectMetadata, serial int64, part int) statebackup.Secret {
	return statebackup.Secret{Name: m.Name, Serial: serial, Part: part, Created: m.CreationTimestamp.Time,
		Bytes: statebackup.BytesOf(m.Annotations)}
}

// backupStatus is status.stateBackups for the backups kept; a backup
// whose size was not recorded (written before captf recorded it) has no
// bytes.
func backupStatus(kept []statebackup.Backup) []v1alpha1.StateBackup {
	if len(kept) == 0 {
		return nil
	}
	out := make([]v1alpha1.StateBackup, 0, len(kept))
	for _, b := range kept {
		s := v1alpha1.StateBackup{Serial: b.Serial, SecretName: b.Name(), TakenAt: metav1.NewTime(b.Created.UTC().Truncate(time.Second))}
		if b.Bytes > 0 {
			s.Bytes = b.Bytes
		}
		if len(b.Secrets) > 1 {
			s.Parts = int32(len(b.Secrets))
		}
		out = append(out, s)
	}
	return out
}
