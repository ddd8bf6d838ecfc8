package statebackup

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

const (
	// Prefix starts the name of every backup Secret.
	Prefix = "captf-state-backup-"
	// LabelBackup is "true" on every backup Secret.
	LabelBackup = "captf.io/state-backup"
	// LabelSuffix carries the state's secret_suffix.
	LabelSuffix = "captf.io/state-backup-suffix"
	// LabelSerial carries the state's serial, in decimal.
	LabelSerial = "captf.io/state-backup-serial"
	// LabelPart carries the index of the part, 0 for the first.
	LabelPart = "captf.io/state-backup-part"
	// LabelRetainedFrom marks the state and backup Secrets an object
	// deleted with spec.deletionPolicy Retain left behind: the UID of that
	// object (upstream A3-45). A new object of the same kind, namespace and
	// name adopts them only with spec.adoptRetainedState.
	LabelRetainedFrom = "captf.io/retained-from-uid"
	// AnnotationBytes carries, on each part of a backup, the length of the
	// state data it holds (as stored: the backend's gzip), in decimal, so
	// that status.stateBackups[].bytes (upstream A1-88) comes from a
	// metadata LIST without reading any state.
	AnnotationBytes = "captf.io/state-backup-bytes"

	// DefaultKeep is the default of --state-backups.
	DefaultKeep = 5
	// MaxKeep bounds --state-backups, and so status.stateBackups.
	MaxKeep = 32
)

// Name is the name of the backup of serial of the state of suffix (its
// first part).
func Name(suffix string, serial int64) string {
	return Prefix + suffix + "-" + strconv.FormatInt(serial, 10)
}

// PartName is the name of part i of that backup: Name for 0, else Name
// followed by -part-<i>, as the backend names the parts of a state.
func PartName(suffix string, serial int64, i int) string {
	if i == 0 {
		return Name(suffix, serial)
	}
	return Name(suffix, serial) + "-part-" + strconv.Itoa(i)
}

// Labels are the labels of part i of the backup of serial of suffix.
func Labels(suffix string, serial int64, i int) map[string]string {
	return map[string]string{LabelBackup: "true", LabelSuffix: suffix,
		LabelSerial: strconv.FormatInt(serial, 10), LabelPart: strconv.Itoa(i)}
}

// maxPartBytes bounds a part's recorded size: a Secret holds at most
// 1 MiB. The annotation is on a Secret a tenant may edit, so a larger
// value is not believed (and the sum over parts cannot overflow).
const maxPartBytes = 1 << 20

// BytesOf reads AnnotationBytes from a backup Secret's annotations:
// BytesUnknown when it is missing (a backup written before captf recorded
// sizes), not a canonical non-negative decimal, or more than a Secret can
// hold.
func BytesOf(annotations map[string]string) int64 {
	v, ok := annotations[AnnotationBytes]
	if !ok {
		return BytesUnknown
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > maxPartBytes || strconv.FormatInt(n, 10) != v {
		return BytesUnknown
	}
	return n
}

// BytesUnknown is the size of a backup (or part) whose size was not
// recorded.
const BytesUnknown int64 = -1

// Selector selects the backup Secrets of suffix.
func Selector(suffix string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelBackup: "true", LabelSuffix: suffix})
}

// Parse reports the serial and part index of a backup Secret of suffix
// from its name and labels: ok only when the labels are those Labels gives
// and the name is the PartName they imply. Anything else, whatever it is
// labelled, is not a backup, and the retention never deletes it.
func Parse(suffix, name string, lbls map[string]string) (serial int64, part int, ok bool) {
	if lbls[LabelBackup] != "true" || lbls[LabelSuffix] != suffix {
		return 0, 0, false
	}
	serial, err := strconv.ParseInt(lbls[LabelSerial], 10, 64)
	if err != nil || serial < 0 || strconv.FormatInt(serial, 10) != lbls[LabelSerial] {
		return 0, 0, false
	}
	part, err = strconv.Atoi(lbls[LabelPart])
	if err != nil || part < 0 || part > 1<<20 || strconv.Itoa(part) != lbls[LabelPart] {
		return 0, 0, false
	}
	if name != PartName(suffix, serial, part) {
		return 0, 0, false
	}
	return serial, part, true
}

// Secret is what the retention needs of one backup Secret listed.
type Secret struct {
	Name    string
	Serial  int64
	Part    int
	Created time.Time
	// Bytes is the length of the part's state data (BytesOf), or
	// BytesUnknown.
	Bytes int64
}

// Backup is the backup of one serial: its Secrets, the first part first.
type Backup struct {
	Serial int64
	// Secrets are the names of its Secrets, by part index.
	Secrets []string
	// Created is the creation time of its first part (of the Secret of
	// the lowest part listed when the first is missing).
	Created time.Time
	// Bytes is the size of the state the backup holds, as stored: the sum
	// of its parts' Bytes, or BytesUnknown when any part's is unknown.
	Bytes int64
}

// Name is the name of the backup's first Secret.
func (b Backup) Name() string {
	if len(b.Secrets) == 0 {
		return ""
	}
	return b.Secrets[0]
}

// Group groups backup Secrets by serial, newest serial first.
func Group(secrets []Secret) []Backup {
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b Secret) int {
		if c := cmp.Compare(b.Serial, a.Serial); c != 0 {
			return c
		}
		return cmp.Compare(a.Part, b.Part)
	})
	var out []Backup
	for _, s := range sorted {
		if len(out) == 0 || out[len(out)-1].Serial != s.Serial {
			out = append(out, Backup{Serial: s.Serial, Created: s.Created})
		}
		b := &out[len(out)-1]
		b.Secrets = append(b.Secrets, s.Name)
		if b.Bytes == BytesUnknown || s.Bytes < 0 {
			b.Bytes = BytesUnknown
		} else {
			b.Bytes += s.Bytes
		}
		if s.Part == 0 {
			b.Created = s.Created
		}
	}
	return out
}

// Retain splits backups (newest serial first, as Group returns them) into
// the newest keep, which stay, and the rest, which are pruned. keep below
// 1 keeps none.
func Retain(backups []Backup, keep int) (kept, pruned []Backup) {
	keep = max(0, min(keep, len(backups)))
	return backups[:keep], backups[keep:]
}

// Due reports whether serial, the serial of the state just read, is to be
// backed up: keep is at least 1 and serial is not the newest serial
// backed up (last, ok false when there is none). A serial other than the
// last one is due even when it is lower: a state pushed back to an earlier
// serial (a restore) is a state worth keeping too.
func Due(keep int, serial int64, last int64, ok bool) bool {
	return keep > 0 && (!ok || serial != last)
}
