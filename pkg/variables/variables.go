// Package variables merges the input variables an object takes from
// ConfigMaps and Secrets (SPEC O9, upstream A1-68..A1-71, A3-24..A3-26):
// pure code, given what the controller read.
//
// Sources apply in order, a later one's key wins; the object's inline
// spec.variables win over all (the controller drops those keys, and the
// runner's file of inline variables loads last). A source must be
// labelled captf.io/variables=true: an unlabelled one is as missing, so a
// tenant's object cannot read any Secret of its namespace into a run by
// name alone. Nothing here puts a value in a message.
package variables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"unicode/utf8"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/bounded"
)

// Limits of what sources contribute: far above what modules take, far
// below what would strain a run Secret (1 MiB with the contract inputs).
const (
	// MaxVariables bounds the keys of all sources together.
	MaxVariables = 256
	// MaxBytes bounds the merged variables as compact JSON.
	MaxBytes = 256 << 10
)

// jsonLimits bound the decoding of one JSON-format value (SPEC B10).
var jsonLimits = bounded.Limits{MaxInput: MaxBytes, MaxSize: MaxBytes, MaxDepth: 32, MaxValues: 10000, MaxToken: MaxBytes, MaxKey: 256}

// Source is one spec.variablesFrom entry and what the controller found.
type Source struct {
	// Kind is ConfigMap or Secret; Name its name (for messages).
	Kind, Name string
	// Found: the object exists; Labelled: it carries
	// captf.io/variables=true.
	Found, Labelled bool
	// Optional and Format are the entry's.
	Optional bool
	Format   v1alpha1.VariablesFormat
	// Data are the object's keys and values (a ConfigMap's data and
	// binaryData, a Secret's data).
	Data map[string][]byte
}

func (s Source) String() string { return s.Kind + " " + s.Name }

// Problem is why the sources cannot be used: the reason and message of
// DependenciesReady=False.
type Problem struct {
	Reason  v1alpha1.ConditionReason
	Message string
}

// Merge merges sources in order (a later key wins) and returns the
// variables as JSON values, or the first problem. nameProblem says what is
// wrong with a key as a variable name ("" when nothing). A missing or
// unlabelled source that is optional contributes nothing; one that is not
// holds the apply back (VariablesSourceNotFound). A key that is not a
// valid name, a String value that is not UTF-8, a JSON value that does not
// parse within bounds, or more than MaxVariables keys or MaxBytes in all
// is VariablesInvalid; messages name sources and keys, never values.
func Merge(sources []Source, nameProblem func(string) string) (map[string]json.RawMessage, *Problem) {
	out := map[string]json.RawMessage{}
	for _, s := range sources {
		if !s.Found || !s.Labelled {
			if s.Optional {
				continue
			}
			why := "does not exist"
			if s.Found {
				why = fmt.Sprintf("is not labelled %s=true", v1alpha1.LabelVariables)
			}
			return nil, &Problem{v1alpha1.ReasonVariablesSourceNotFound, fmt.Sprintf(
				"spec.variablesFrom: %s %s; create it (or label it), or mark the entry optional", s, why)}
		}
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if p := nameProblem(k); p != "" {
				return nil, invalid("%s: key %s is %s", s, quote(k), p)
			}
			v, err := value(s.Data[k], s.Format)
			if err != nil {
				return nil, invalid("%s: key %s: %v", s, quote(k), err)
			}
			out[k] = v
			if len(out) > MaxVariables {
				return nil, invalid("the sources have more than %d keys", MaxVariables)
			}
		}
	}
	if b, _ := json.Marshal(out); len(b) > MaxBytes {
		return nil, invalid("the sources' variables are %d bytes as JSON, more than %d", len(b), MaxBytes)
	}
	return out, nil
}

// FromSecrets returns, sorted, the keys of Merge's result whose value a
// Secret gave (a later ConfigMap's key wins over it): their values are
// sensitive (SPEC O9), kept out of Terraform's output by the runner.
func FromSecrets(sources []Source) []string {
	secret := map[string]bool{}
	for _, s := range sources {
		if !s.Found || !s.Labelled {
			continue
		}
		for k := range s.Data {
			secret[k] = s.Kind == "Secret"
		}
	}
	var out []string
	for k, yes := range secret {
		if yes {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// value is one source value as JSON: a string for String, the value
// itself, compacted, for JSON.
func value(v []byte, format v1alpha1.VariablesFormat) (json.RawMessage, error) {
	if format != v1alpha1.VariablesFormatJSON {
		if !utf8.Valid(v) {
			return nil, fmt.Errorf("the value is not UTF-8 text (use format JSON, or a ConfigMap's data)")
		}
		b, _ := json.Marshal(string(v))
		return b, nil
	}
	d := bounded.NewDecoder(bytes.NewReader(v), jsonLimits)
	raw, ok, err := d.Capture(MaxBytes)
	if err == nil {
		err = d.End()
	}
	if err != nil {
		msg := "the value is not JSON (format JSON)"
		if e := bounded.As(err); e != nil {
			msg += ": " + e.Message // offsets and limits, never the text
		}
		return nil, fmt.Errorf("%s", msg)
	}
	if !ok {
		return nil, fmt.Errorf("the value is more than %d bytes", MaxBytes)
	}
	return raw, nil
}

func invalid(format string, args ...any) *Problem {
	return &Problem{v1alpha1.ReasonVariablesInvalid, "spec.variablesFrom: " + fmt.Sprintf(format, args...)}
}

// quote quotes a key, cut to 64 bytes.
func quote(k string) string {
	if len(k) > 64 {
		k = k[:64] + "..."
	}
	return fmt.Sprintf("%q", k)
}
