package jobs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/captf/captf/pkg/contract"
)

// Limits of spec.variables (SPEC T3). The CRD enforces MaxVariables
// (maxProperties) and that the value is an object; the key syntax, the
// reserved prefix and MaxVariablesBytes are beyond it (CEL sees no key of
// an object without a schema), so [ValidateVariables] checks them all.
const (
	MaxVariables           = 256
	MaxVariablesBytes      = 64 << 10
	ReservedVariablePrefix = "captf_"
)

// variableName is a Terraform identifier as T3 restricts it.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// ValidateVariables checks spec.variables, as JSON, against SPEC T3: a JSON
// object of at most MaxVariables keys and MaxVariablesBytes (compacted),
// keys Terraform identifiers not starting with ReservedVariablePrefix.
// Empty or null is valid (no variables). The error names keys, never
// values, and is meant for a condition message.
func ValidateVariables(raw []byte) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return fmt.Errorf("spec.variables is not valid JSON")
	}
	if compact.Len() > MaxVariablesBytes {
		return fmt.Errorf("spec.variables is %d bytes as compact JSON, more than %d", compact.Len(), MaxVariablesBytes)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fmt.Errorf("spec.variables must be a JSON object")
	}
	if len(m) > MaxVariables {
		return fmt.Errorf("spec.variables has %d keys, more than %d", len(m), MaxVariables)
	}
	var bad, reserved, contractInputs []string
	for k := range m {
		switch faultOf(k) {
		case notIdentifier:
			bad = append(bad, strconvQuote(k))
		case reservedPrefix:
			reserved = append(reserved, strconvQuote(k))
		case contractInput:
			contractInputs = append(contractInputs, strconvQuote(k))
		}
	}
	var msgs []string
	if len(bad) > 0 {
		msgs = append(msgs, "keys that are not Terraform identifiers (a letter or _, then letters, digits, _ or -): "+joinSorted(bad))
	}
	if len(reserved) > 0 {
		msgs = append(msgs, "keys with the reserved prefix "+ReservedVariablePrefix+": "+joinSorted(reserved))
	}
	if len(contractInputs) > 0 {
		msgs = append(msgs, "keys reserved for the Cluster API contract inputs (SPEC K6): "+joinSorted(contractInputs))
	}
	if len(msgs) > 0 {
		return fmt.Errorf("spec.variables has %s", strings.Join(msgs, "; "))
	}
	return nil
}

// maxNamedKeys bounds how many keys an error names, so a condition message
// stays short.
const maxNamedKeys = 5

// joinSorted joins the first maxNamedKeys of keys in order and says how
// many more there are.
func joinSorted(keys []string) string {
	slices.Sort(keys)
	if len(keys) <= maxNamedKeys {
		return strings.Join(keys, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keys[:maxNamedKeys], ", "), len(keys)-maxNamedKeys)
}

// strconvQuote quotes a key (it may hold spaces or be empty), cut to 64
// bytes first.
func strconvQuote(k string) string {
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return fmt.Sprintf("%q", k)
}

// nameFault is what is wrong with a variable's name (T3, K6).
type nameFault int

const (
	nameOK nameFault = iota
	notIdentifier
	reservedPrefix
	contractInput
)

func faultOf(k string) nameFault {
	switch {
	case !variableName.MatchString(k):
		return notIdentifier
	case strings.HasPrefix(k, ReservedVariablePrefix):
		return reservedPrefix
	case slices.Contains(contract.ReservedInputs, k):
		return contractInput
	}
	return nameOK
}

// NameProblem says what is wrong with k as the name of an input variable
// (T3's rules, K6's reserved names): "" when nothing is. For variables
// from objects (SPEC O9), whose keys no CRD checks.
func NameProblem(k string) string {
	switch faultOf(k) {
	case notIdentifier:
		return "not a Terraform identifier (a letter or _, then letters, digits, _ or -)"
	case reservedPrefix:
		return "the reserved prefix " + ReservedVariablePrefix
	case contractInput:
		return "reserved for the Cluster API contract inputs (SPEC K6)"
	}
	return ""
}
