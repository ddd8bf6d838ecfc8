package variables

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/apis/infrastructure/v1alpha1"
	"github.com/captf/captf/pkg/controllers/jobs"
)

func cm(name string, data map[string]string, mods ...func(*Source)) Source {
	s := Source{Kind: "ConfigMap", Name: name, Found: true, Labelled: true, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	for _, m := range mods {
		m(&s)
	}
	return s
}

func asJSON(s *Source)   { s.Format = v1alpha1.VariablesFormatJSON }
func optional(s *Source) { s.Optional = true }
func missing(s *Source)  { s.Found = false }
func unlabelled(s *Source) {
	s.Labelled = false
}

// SPEC O9 (A3-24): sources merge in order, later wins; String values are
// strings, JSON values any JSON; missing or unlabelled sources hold the
// apply back unless optional; bad keys and values are refused by name.
func TestMerge(t *testing.T) {
	for _, tt := range []struct {
		name    string
		sources []Source
		want    map[string]string
		reason  v1alpha1.ConditionReason
		message string
	}{
		{"none", nil, map[string]string{}, "", ""},
		{"strings", []Source{cm("a", map[string]string{"region": "eu-1", "size": "3"})},
			map[string]string{"region": `"eu-1"`, "size": `"3"`}, "", ""},
		{"later wins", []Source{cm("a", map[string]string{"region": "eu-1", "zone": "a"}), cm("b", map[string]string{"region": "us-2"})},
			map[string]string{"region": `"us-2"`, "zone": `"a"`}, "", ""},
		{"JSON values", []Source{cm("a", map[string]string{"count": " 3 ", "tags": `{"a": [1, 2]}`}, asJSON)},
			map[string]string{"count": `3`, "tags": `{"a":[1,2]}`}, "", ""},
		{"optional missing contributes nothing", []Source{cm("a", map[string]string{"x": "1"}, missing, optional), cm("b", map[string]string{"y": "2"})},
			map[string]string{"y": `"2"`}, "", ""},
		{"optional unlabelled contributes nothing", []Source{cm("a", map[string]string{"x": "1"}, unlabelled, optional)},
			map[string]string{}, "", ""},
		{"missing", []Source{cm("a", nil, missing)}, nil, v1alpha1.ReasonVariablesSourceNotFound, "ConfigMap a does not exist"},
		{"unlabelled", []Source{cm("a", map[string]string{"x": "secret"}, unlabelled)}, nil, v1alpha1.ReasonVariablesSourceNotFound,
			"ConfigMap a is not labelled captf.io/variables=true"},
		{"bad key", []Source{cm("a", map[string]string{"9lives": "x"})}, nil, v1alpha1.ReasonVariablesInvalid, `key "9lives" is not a Terraform identifier`},
		{"reserved prefix", []Source{cm("a", map[string]string{"captf_x": "x"})}, nil, v1alpha1.ReasonVariablesInvalid, `key "captf_x" is the reserved prefix`},
		{"contract input", []Source{cm("a", map[string]string{"bootstrap_data": "x"})}, nil, v1alpha1.ReasonVariablesInvalid, `key "bootstrap_data" is reserved for the Cluster API contract inputs`},
		{"bad JSON", []Source{cm("a", map[string]string{"tags": `{"a": hunter2}`}, asJSON)}, nil, v1alpha1.ReasonVariablesInvalid, `ConfigMap a: key "tags": the value is not JSON`},
		{"JSON bomb depth", []Source{cm("a", map[string]string{"deep": strings.Repeat("[", 1000) + strings.Repeat("]", 1000)}, asJSON)}, nil,
			v1alpha1.ReasonVariablesInvalid, "nests deeper than 32 levels"},
		{"not UTF-8", []Source{{Kind: "Secret", Name: "s", Found: true, Labelled: true, Data: map[string][]byte{"k": {0xff, 0xfe}}}}, nil,
			v1alpha1.ReasonVariablesInvalid, `Secret s: key "k": the value is not UTF-8 text`},
		{"too big", []Source{cm("a", map[string]string{"big": strings.Repeat("x", MaxBytes)})}, nil, v1alpha1.ReasonVariablesInvalid, "more than 262144"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, p := Merge(tt.sources, jobs.NameProblem)
			if tt.reason != "" {
				require.NotNil(t, p)
				require.Equal(t, tt.reason, p.Reason)
				require.Contains(t, p.Message, tt.message)
				require.NotContains(t, p.Message, "hunter2", "no value in a message (X1)")
				require.NotContains(t, p.Message, "secret\"", "no value in a message (X1)")
				return
			}
			require.Nil(t, p)
			gotS := map[string]string{}
			for k, v := range got {
				gotS[k] = string(v)
				require.True(t, json.Valid(v))
			}
			require.Equal(t, tt.want, gotS)
		})
	}
}

func TestMergeKeyCount(t *testing.T) {
	data := map[string]string{}
	for i := range MaxVariables + 1 {
		data[fmt.Sprintf("k%d", i)] = "v"
	}
	_, p := Merge([]Source{cm("a", data)}, jobs.NameProblem)
	require.NotNil(t, p)
	require.Contains(t, p.Message, "more than 256 keys")
	delete(data, "k0")
	_, p = Merge([]Source{cm("a", data)}, jobs.NameProblem)
	require.Nil(t, p, "256 keys are allowed")
}

// SPEC O9: the keys whose merged value a Secret gave are sensitive; a
// later ConfigMap's key wins over a Secret's (and the reverse), and a
// missing or unlabelled source gives nothing.
func TestFromSecrets(t *testing.T) {
	secret := func(s *Source) { s.Kind = "Secret" }
	for _, tt := range []struct {
		name    string
		sources []Source
		want    []string
	}{
		{"no Secret", []Source{cm("a", map[string]string{"x": "1"})}, nil},
		{"a Secret's keys", []Source{cm("a", map[string]string{"x": "1"}), cm("s", map[string]string{"pw": "p", "user": "u"}, secret)}, []string{"pw", "user"}},
		{"a later ConfigMap wins", []Source{cm("s", map[string]string{"pw": "p", "user": "u"}, secret), cm("a", map[string]string{"user": "admin"})}, []string{"pw"}},
		{"a later Secret wins", []Source{cm("a", map[string]string{"pw": "default"}), cm("s", map[string]string{"pw": "p"}, secret)}, []string{"pw"}},
		{"a missing Secret gives nothing", []Source{cm("s", map[string]string{"pw": "p"}, secret, missing, optional)}, nil},
		{"an unlabelled Secret gives nothing", []Source{cm("s", map[string]string{"pw": "p"}, secret, unlabelled, optional)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, FromSecrets(tt.sources))
		})
	}
}
