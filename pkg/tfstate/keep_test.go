package tfstate

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/captf/captf/pkg/tfstate/tfstatetest"
)

// SPEC K7 with T4 and B10: ReadKeeping reads the outputs its Keep names on
// their own, each within its bound, whatever the size of the others; the
// rest of the read (status.outputs' budget, sensitivity, the serial) is
// Read's.
func TestReadKeepingK7(t *testing.T) {
	str := func(n int) string { return `"` + strings.Repeat("x", n) + `"` }
	keep := Keep{"id": 64, "list": 200 << 10}
	for _, tc := range []struct {
		name  string
		state string
		// kind is the error's (0: none); kept and tooLarge what is kept.
		kind     Kind
		kept     map[string]string
		tooLarge []string
		// values is whether the other outputs are read too.
		values bool
	}{
		{name: "small outputs: both",
			state: `{"version":4,"serial":7,"outputs":{"id":{"value":"i-1"},"other":{"value":1}}}`,
			kept:  map[string]string{"id": `"i-1"`}, values: true},
		{name: "others over the decoder's budget: the kept ones all the same",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"big":{"value":%s},"id":{"value":"i-1"},"more":{"value":%s}}}`, str(maxCaptured), str(10)),
			kind:  KindOutputsTooLarge, kept: map[string]string{"id": `"i-1"`}},
		{name: "kept output larger than the budget, within its bound",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"list":{"value":[%s]}}}`, str(100<<10)),
			kind:  KindOutputsTooLarge, kept: map[string]string{"list": "[" + str(100<<10) + "]"}},
		{name: "kept output over its bound",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"id":{"value":%s}}}`, str(63)),
			kept:  map[string]string{}, tooLarge: []string{"id"}, values: true},
		{name: "kept output exactly at its bound",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"id":{"value":%s}}}`, str(62)),
			kept:  map[string]string{"id": str(62)}, values: true},
		{name: "sensitive: neither kept nor too large",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"id":{"value":%s,"sensitive":true}}}`, str(1000)),
			kept:  map[string]string{}, values: true},
		{name: "null output and canonical values",
			state: `{"version":4,"serial":7,"outputs":{"id":null,"list":{"value":{"b":1, "a":[1.50, "<&>"]}}}}`,
			kept:  map[string]string{"id": `null`, "list": `{"a":[1.50,"<&>"],"b":1}`}, values: true},
		{name: "the last of a name wins",
			state: fmt.Sprintf(`{"version":4,"serial":7,"outputs":{"id":{"value":%s},"id":{"value":"i-2"}}}`, str(100)),
			kept:  map[string]string{"id": `"i-2"`}, values: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ReadKeeping(strings.NewReader(string(tfstatetest.Gzip([]byte(tc.state)))), keep)
			require.Equal(t, tc.kind, KindOf(err), "%v", err)
			require.NotNil(t, out)
			require.Equal(t, int64(7), out.Serial)
			got := map[string]string{}
			for k, v := range out.Kept {
				got[k] = string(v)
			}
			require.Equal(t, tc.kept, got)
			require.Equal(t, tc.tooLarge, out.KeptTooLarge)
			require.Equal(t, tc.values, out.Values != nil)
			b, err := out.EncodeKept()
			require.NoError(t, err)
			require.True(t, json.Valid(b))
		})
	}
}

// B10: Read keeps nothing on its own, and fails as before; a Keep cannot
// hold more than maxKept.
func TestReadKeepsNothingWithoutKeep(t *testing.T) {
	state := fmt.Sprintf(`{"version":4,"outputs":{"big":{"value":"%s"}}}`, strings.Repeat("x", maxCaptured))
	out, err := Read(strings.NewReader(string(tfstatetest.Gzip([]byte(state)))))
	requireKind(t, err, KindOutputsTooLarge)
	require.Nil(t, out)
	small, err := Decode(tfstatetest.Gzip([]byte(`{"version":4,"outputs":{"id":{"value":"i-1"}}}`)))
	require.NoError(t, err)
	require.Nil(t, small.Kept)
	_, err = ReadKeeping(strings.NewReader(""), Keep{"a": maxKept, "b": 1})
	require.Error(t, err)
}
