package jobs

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

const (
	// MaxNameLength is the longest Job name [Name] returns (SPEC J1). The Job
	// controller copies the Job's name into the job-name and
	// batch.kubernetes.io/job-name labels of its pods, and a label value is
	// at most 63 characters, so a longer Job name could not run.
	MaxNameLength = 63

	// nameHashHexChars is how many hex characters of the name hash end a Job
	// name: 32 bits, enough to tell apart the Jobs of objects whose names
	// share a long prefix, short enough to leave room for a readable name.
	nameHashHexChars = 8

	// maxActionChars bounds the action's part of the name. The known actions
	// are short; the bound only matters for a value that is neither apply nor
	// destroy, so that it cannot push the owner's name out entirely.
	maxActionChars = 16
)

// Name returns the deterministic name of the Job that runs action for
// generation of an owner (SPEC J1):
//
//	<name-prefix>-<action>-<generation>-<8 hex>
//
// It is a valid DNS label (lowercase alphanumerics and '-', starting and
// ending with an alphanumeric) of at most [MaxNameLength] characters, because
// the Job controller uses the Job's name as a label value and as the prefix
// of its pods' names.
//
// The name prefix is the owner's name with every character other than a
// lowercase letter or digit (in a valid name: '.') replaced by '-', upper
// case folded, cut to what fits, and stripped of leading and trailing '-'.
// The hex suffix is a hash of the owner's kind, name and UID, the action and
// the generation, so that:
//
//   - two objects whose names share a long prefix (or differ only by '.'
//     versus '-') get different Jobs;
//   - a cluster and a machine with the same name in one namespace get
//     different Jobs (the kind is hashed);
//   - an object deleted and re-created under the same name (a new UID)
//     never finds, and mistakes for its own, a Job of its predecessor.
//
// Name is a total function: any input, even an invalid owner name or an
// unknown action, gives a valid DNS label.
func Name(ownerKind, ownerName string, ownerUID types.UID, action v1alpha1.JobAction, generation int64) string {
	return name(ownerKind, ownerName, ownerUID, action, generation, 0)
}

// ReapplyName returns the name of the n-th (n >= 1) re-apply Job of a
// generation, started because the credentials rotated (SPEC C6):
//
//	<name-prefix>-apply-<generation>-r<n>-<8 hex>
//
// n is hashed too, so every re-apply of a generation has its own Job.
func ReapplyName(ownerKind, ownerName string, ownerUID types.UID, generation int64, n int) string {
	return name(ownerKind, ownerName, ownerUID, v1alpha1.JobActionApply, generation, n)
}

// AttemptName returns the name of attempt n of the Job that runs action
// for generation (SPEC T7): attempt 1 (or less) is [Name], so the first
// Job's name is the same as before retries existed; a later attempt, a
// retry after a failure or on captf.io/retry, is
//
//	<name-prefix>-<action>-<generation>-a<n>-<8 hex>
//
// with n hashed too, so every attempt has its own Job.
func AttemptName(ownerKind, ownerName string, ownerUID types.UID, action v1alpha1.JobAction, generation int64, n int) string {
	if n <= 1 {
		return Name(ownerKind, ownerName, ownerUID, action, generation)
	}
	return nameWithPart(ownerKind, ownerName, ownerUID, action, generation, "a"+strconv.Itoa(n))
}

func name(ownerKind, ownerName string, ownerUID types.UID, action v1alpha1.JobAction, generation int64, rerun int) string {
	rerunPart := ""
	if rerun > 0 {
		rerunPart = "r" + strconv.Itoa(rerun)
	}
	return nameWithPart(ownerKind, ownerName, ownerUID, action, generation, rerunPart)
}

// nameWithPart builds a Job name with an optional extra part (a re-apply's
// r<n>, an attempt's a<n>) after the generation; the part is hashed too.
func nameWithPart(ownerKind, ownerName string, ownerUID types.UID, action v1alpha1.JobAction, generation int64, rerunPart string) string {
	hash := nameHash(ownerKind, ownerName, ownerUID, action, generation)
	if rerunPart != "" {
		hash = nameHash(ownerKind, ownerName, ownerUID, action, generation, rerunPart)
	}
	suffix := joinNonEmpty(
		trimDashes(truncate(sanitize(string(action)), maxActionChars)),
		strconv.FormatInt(generation, 10),
		rerunPart,
		hash,
	)
	// The suffix is at most 16+1+20+1+11+1+8 = 58 characters, so the prefix
	// always has room for at least 4.
	prefix := trimDashes(truncate(sanitize(ownerName), MaxNameLength-len(suffix)-1))
	if prefix == "" {
		// A negative generation (never set by the API server) would leave a
		// leading '-' when there is neither a name nor an action before it.
		return strings.TrimLeft(suffix, "-")
	}
	return prefix + "-" + suffix
}

// nameHash returns the first nameHashHexChars lowercase hex characters of a
// SHA-256 over the inputs. Each string is preceded by its 8-byte big-endian
// length, so no two different inputs share an encoding (("ab", "c") and
// ("a", "bc") hash differently).
func nameHash(ownerKind, ownerName string, ownerUID types.UID, action v1alpha1.JobAction, generation int64, extra ...string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range []string{ownerKind, ownerName, string(ownerUID), string(action)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	binary.BigEndian.PutUint64(n[:], uint64(generation))
	h.Write(n[:])
	// Extra parts (a re-apply's number) come after, so names without them
	// are unchanged.
	for _, s := range extra {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return hex.EncodeToString(h.Sum(nil))[:nameHashHexChars]
}

// sanitize folds ASCII upper case to lower case and replaces every other
// byte that may not appear in a DNS label with '-'. A multi-byte character
// becomes several '-'; the hash still tells such names apart.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		default:
			b[i] = '-'
		}
	}
	return string(b)
}

// truncate returns the first n bytes of s (s is ASCII after sanitize).
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:max(n, 0)]
	}
	return s
}

func trimDashes(s string) string { return strings.Trim(s, "-") }

// joinNonEmpty joins the non-empty parts with '-'.
func joinNonEmpty(parts ...string) string {
	kept := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "-")
}

// podPrefixLength is how much of "<Job name>-" begins the names of the
// Job's pods: the Job controller creates them with that generateName, and
// the API server cuts a generateName to 58 characters before adding five
// random ones.
const podPrefixLength = 58

// PodOfJob reports whether pod is the name of a pod of Job job: the Job's
// name and "-", cut to 58 characters, then five characters.
func PodOfJob(pod, job string) bool {
	prefix := job + "-"
	if len(prefix) > podPrefixLength {
		prefix = prefix[:podPrefixLength]
	}
	return len(pod) == len(prefix)+5 && strings.HasPrefix(pod, prefix) && randomSuffix(pod[len(prefix):])
}

// randomSuffix reports whether s could be the five characters the API
// server adds to a generateName: lower-case letters and digits. A pod
// name read from a lock's holder (O3), which anyone who may write the
// Lease writes, is checked against it before it is used.
func randomSuffix(s string) bool {
	if len(s) != 5 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

// JobOfPod returns the name of the Job of the owner whose pod is named
// pod, when pod provably is one (SPEC O3): the name of a Job [Name],
// [AttemptName] or [ReapplyName] would give the owner, whose hash covers
// the owner's kind, name and UID, so a Job of another object, or of an
// object deleted and re-created under the same name, is not one. It
// needs no Job: the Job may be gone (deleted while it ran). The pod's name
// keeps at most 58 characters of the Job's, so of a long name the end of
// the hash is not compared; what is left (at least 3 of its 8 characters,
// and all that precedes it) must still match.
func JobOfPod(ownerKind, ownerName string, ownerUID types.UID, pod string) (string, bool) {
	if len(pod) <= 5 || !randomSuffix(pod[len(pod)-5:]) {
		return "", false
	}
	// The tokens of the Job's name, from its end: the hash (maybe cut),
	// an optional a<n> or r<n>, the generation, the action.
	tokens := strings.Split(strings.TrimSuffix(pod[:len(pod)-5], "-"), "-")
	if len(tokens) < 3 {
		return "", false
	}
	tokens = tokens[:len(tokens)-1]
	part := tokens[len(tokens)-1]
	n := 0
	if len(part) > 1 && (part[0] == 'a' || part[0] == 'r') {
		var err error
		if n, err = strconv.Atoi(part[1:]); err != nil {
			return "", false
		}
		tokens = tokens[:len(tokens)-1]
	} else {
		part = ""
	}
	if len(tokens) < 2 {
		return "", false
	}
	generation, err := strconv.ParseInt(tokens[len(tokens)-1], 10, 64)
	if err != nil {
		return "", false
	}
	action := v1alpha1.JobAction(tokens[len(tokens)-2])
	var job string
	switch {
	case part == "":
		job = Name(ownerKind, ownerName, ownerUID, action, generation)
	case part[0] == 'a':
		job = AttemptName(ownerKind, ownerName, ownerUID, action, generation, n)
	default:
		job = ReapplyName(ownerKind, ownerName, ownerUID, generation, n)
	}
	if !PodOfJob(pod, job) {
		return "", false
	}
	return job, true
}
