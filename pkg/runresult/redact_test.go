package runresult

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactX1(t *testing.T) {
	r := NewRedactor()
	r.Add("AKIA-credential-value")
	r.Add("credential") // contained in the one above: the longer goes first
	r.Add("1")          // short: only where it stands alone
	r.Add("eu")
	r.Add("line one of a key\n  line two of a key  \n}\n")
	r.Add("with \"quotes\"\nand newline")
	r.Add("   ")
	require.NoError(t, r.AddJSON([]byte(`{"instance_type":"t3.micro","count":3,"tags":{"team":"blue-team"},"enabled":true,"nothing":null}`)))
	for in, want := range map[string]string{
		"key AKIA-credential-value here":               "key (sensitive) here",
		"a credential alone":                           "a (sensitive) alone",
		"exit status 1":                                "exit status (sensitive)",
		"line 10 of main.tf, 1.5":                      "line 10 of main.tf, (sensitive).5",
		"region eu, not europe":                        "region (sensitive), not europe",
		"quoted: line two of a key; line one of a key": "quoted: (sensitive); (sensitive)",
		`literal "with \"quotes\"\nand newline"`:       `literal "(sensitive)"`,
		"type t3.micro":                                "type (sensitive)",
		"count = 3":                                    "count = (sensitive)",
		"blue-team and true and null":                  "(sensitive) and true and null",
		`tags = {"team":"blue-team"}`:                  `tags = (sensitive)`,
		"}":                                            "}",
	} {
		require.Equal(t, want, r.Redact(in), "%q", in)
	}
	require.Error(t, r.AddJSON([]byte(`{"not json`)))
}

func TestReplaceAlone(t *testing.T) {
	for _, tt := range []struct{ s, v, want string }{
		{"11", "1", "11"},
		{"1 1", "1", "(sensitive) (sensitive)"},
		{"a1b 1", "1", "a1b (sensitive)"},
		{"x=1,y=1", "1", "x=(sensitive),y=(sensitive)"},
		{"é1", "1", "é1"},
		{"", "1", ""},
	} {
		require.Equal(t, tt.want, replaceAlone(tt.s, tt.v), "%q in %q", tt.v, tt.s)
	}
}
