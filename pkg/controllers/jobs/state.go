package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
)

// maxStateSuffix bounds secret_suffix: the state Secret is named
// tfstate-default-<suffix> and labelled tfstateSecretSuffix=<suffix>, and
// a label value is at most 63 characters.
const maxStateSuffix = 63

// StateSuffix returns the kubernetes backend's secret_suffix for an object
// (SPEC T2): "<name>-<kind>" with kind cluster, machine or machinepool (the
// kind last: Terraform refuses a suffix whose last '-' segment is all
// digits), or, when that exceeds 63 characters, "<p>-<h>-<kind>" with h the
// first 10 lowercase hex characters of the SHA-256 of "<name>-<kind>" and
// p the longest prefix of the name that keeps the whole within 63, with
// trailing '.' and '-' removed. Apply and destroy of one object share it.
func StateSuffix(kind, name string) string {
	short := stateKind(kind)
	full := name + "-" + short
	if len(full) <= maxStateSuffix {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	tail := "-" + hex.EncodeToString(sum[:])[:10] + "-" + short
	prefix := strings.TrimRight(name[:maxStateSuffix-len(tail)], ".-")
	return prefix + tail
}

// stateKind is the kind's word in a state suffix.
func stateKind(kind string) string {
	switch kind {
	case v1alpha1.KindTerraformCluster:
		return "cluster"
	case v1alpha1.KindTerraformMachine:
		return "machine"
	case v1alpha1.KindTerraformMachinePool:
		return "machinepool"
	}
	return strings.ToLower(kind)
}

// StateSecretName is the name of the state Secret of suffix (workspace
// default), and StateLeaseName that of its lock Lease (T2).
func StateSecretName(suffix string) string { return "tfstate-default-" + suffix }

// StateLeaseName is the name of the lock Lease of suffix (T2).
func StateLeaseName(suffix string) string { return "lock-tfstate-default-" + suffix }
