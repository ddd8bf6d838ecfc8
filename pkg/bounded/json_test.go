package bounded

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

// secret stands for a Secret's value inside tenant data: no error message
// may quote it (SPEC X1).
const secret = "S3CRET-4242"

// wide are limits no test document reaches.
var wide = Limits{MaxInput: 1 << 30, MaxSize: 1 << 30, MaxDepth: 10000, MaxValues: 1 << 30, MaxToken: 1 << 30}

func requireKind(t testing.TB, err error, k Kind) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, k, KindOf(err), "error: %v", err)
	require.NotContains(t, err.Error(), secret)
	require.NotContains(t, err.Error(), "4242")
}

func decoder(s string, l Limits) *Decoder { return NewDecoder(strings.NewReader(s), l) }

var validDocs = []string{
	`{}`, `[]`, `0`, `-0`, `-0.5e+10`, `1E-2`, `12345678901234567890`, `"x"`, `""`, `true`, `false`, `null`,
	` { "a" : [ 1 , 2.5 , "b\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00" , { } , [ ] , null ] , "" : { "x" : true } } `,
	"\n[\t{\"k\":\"v\"}\r]\n",
	`{"version":4,"outputs":{"a":{"value":"` + secret + `","sensitive":true}}}`,
	"\"\xff invalid utf-8 is accepted as encoding/json does\"",
	`[[[[[[[[[[]]]]]]]]]]`,
}

var invalidDocs = []string{
	``, ` `, `{`, `}`, `[`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{1:2}`, `{"a" 1}`, `[1 2]`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x10`, `tru`, `nul`, `True`, `NaN`, `"abc`, `"a\x"`, `"\u12"`, `"\u12G4"`,
	"\"tab\there\"", `"` + secret, `{"a":"` + secret + `"} x`, `{"a":1}{"b":2}`, `[1] [2]`, `'single'`,
	`{"` + secret + `":}`, `[` + secret + `]`,
}

func TestDecoderAgreesWithEncodingJSON(t *testing.T) {
	for _, doc := range validDocs {
		require.True(t, json.Valid([]byte(doc)), doc)
		d := decoder(doc, wide)
		raw, ok, err := d.Capture(1 << 20)
		require.NoError(t, err, doc)
		require.True(t, ok)
		require.NoError(t, d.End(), doc)
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(doc)))
		require.Equal(t, want.String(), string(raw), doc)
	}
	for _, doc := range invalidDocs {
		require.False(t, json.Valid([]byte(doc)), doc)
		d := decoder(doc, wide)
		err := d.Skip()
		if err == nil {
			err = d.End()
		}
		requireKind(t, err, KindSyntax)
		// Sticky: every later call fails the same way.
		require.Equal(t, err, d.Skip())
		require.Equal(t, err, d.End())
	}
}

func TestDecoderOneByteReads(t *testing.T) {
	// Every boundary between two reads falls inside a token somewhere.
	for _, doc := range validDocs {
		d := NewDecoder(iotest.OneByteReader(strings.NewReader(doc)), wide)
		raw, ok, err := d.Capture(1 << 20)
		require.NoError(t, err, doc)
		require.True(t, ok)
		require.NoError(t, d.End())
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, []byte(doc)))
		require.Equal(t, want.String(), string(raw))
	}
}

func TestDecoderLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		l    Limits
		kind Kind // 0: within the limit
	}{
		{"depth at the limit", `[[[1]]]`, Limits{MaxDepth: 3}, 0},
		{"depth over", `[[[[1]]]]`, Limits{MaxDepth: 3}, KindDepth},
		{"object depth over", `{"a":{"b":{"c":{}}}}`, Limits{MaxDepth: 3}, KindDepth},
		{"values at the limit", `[1,2,3]`, Limits{MaxValues: 4}, 0},
		{"values over", `[1,2,3,4]`, Limits{MaxValues: 4}, KindValues},
		{"keys are not values", `{"a":1,"b":2}`, Limits{MaxValues: 3}, 0},
		{"string at the limit", `"12345"`, Limits{MaxToken: 5}, 0},
		{"string over", `"123456"`, Limits{MaxToken: 5}, KindToken},
		{"escapes count as written", `"\u0041\n"`, Limits{MaxToken: 8}, 0},
		{"escapes over", `"\u0041\n1"`, Limits{MaxToken: 8}, KindToken},
		{"key over", `{"123456":1}`, Limits{MaxToken: 5}, KindToken},
		{"number at the limit", `-1.5e3`, Limits{MaxToken: 6}, 0},
		{"number over", `-1.5e30`, Limits{MaxToken: 6}, KindToken},
		{"size at the limit", `[1, 2]`, Limits{MaxSize: 6}, 0},
		{"size over", `[1, 2] `, Limits{MaxSize: 6}, KindSize},
		{"size over inside a value", `["` + secret + `"]`, Limits{MaxSize: 6}, KindSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decoder(tc.doc, tc.l)
			err := d.Skip()
			if err == nil {
				err = d.End()
			}
			if tc.kind == 0 {
				require.NoError(t, err)
				return
			}
			requireKind(t, err, tc.kind)
			require.True(t, tc.kind.Limit())
		})
	}
}

func TestDecoderWalk(t *testing.T) {
	doc := `{"keep":{"a": [1, 2], "b": "x"}, "skip": [` + strings.Repeat(`"`+secret+`",`, 100) + `0], "big": "` + strings.Repeat("b", 100) + `",
	  "list": [true, null, "s"], "esc\u0061ped": 1}`
	d := decoder(doc, wide)
	got := map[string]string{}
	var types []Type
	err := d.Object(func(key string) error {
		switch key {
		case "keep", "big":
			raw, ok, err := d.Capture(50)
			if ok {
				got[key] = string(raw)
			} else if err == nil {
				got[key] = "too large"
			}
			return err
		case "list":
			return d.Array(func() error {
				tp, err := d.Peek()
				types = append(types, tp)
				if err != nil {
					return err
				}
				return d.Skip()
			})
		case "escaped":
			got[key] = "found"
			return d.Skip()
		}
		return d.Skip()
	})
	require.NoError(t, err)
	require.NoError(t, d.End())
	require.Equal(t, map[string]string{"keep": `{"a":[1,2],"b":"x"}`, "big": "too large", "escaped": "found"}, got)
	require.Equal(t, []Type{Bool, Null, String}, types)

	// Object and Array refuse another type without reading it.
	d = decoder(`[1]`, wide)
	requireKind(t, d.Object(func(string) error { return nil }), KindType)
	require.NoError(t, d.Skip())
	require.NoError(t, d.End())
	d = decoder(`{}`, wide)
	requireKind(t, d.Array(func() error { return nil }), KindType)
	require.NoError(t, d.Skip())

	// A callback that reads nothing leaves the walk misaligned: an error,
	// not a silent success.
	d = decoder(`{"a":1}`, wide)
	requireKind(t, d.Object(func(string) error { return nil }), KindSyntax)
}

// errSource is an error of the source reader (an API error while a
// split state's next part is fetched).
type errSource struct{}

func (errSource) Error() string { return "the source failed" }

func TestDecoderPassesSourceErrors(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`{"a":[1,2,`), iotest.ErrReader(errSource{}))
	d := NewDecoder(r, wide)
	err := d.Skip()
	require.ErrorIs(t, err, errSource{})
	require.Zero(t, KindOf(err))
}

func TestUnmarshal(t *testing.T) {
	type result struct {
		Version int               `json:"version"`
		Outputs map[string]string `json:"outputs"`
	}
	var r result
	require.NoError(t, Unmarshal([]byte(`{"version":1,"outputs":{"a":"b"}}`), &r, Limits{}))
	require.Equal(t, result{Version: 1, Outputs: map[string]string{"a": "b"}}, r)

	for _, tc := range []struct {
		name string
		doc  string
		l    Limits
		kind Kind
	}{
		{"fits", `{"version":4242}`, Limits{}, 0},
		{"number for a string", `{"outputs":{"` + secret + `":4242}}`, Limits{}, KindType},
		{"string for a number", `{"version":"` + secret + `"}`, Limits{}, KindType},
		{"syntax", `{"version":` + secret + `}`, Limits{}, KindSyntax},
		{"too large", `{"version":1}`, Limits{MaxSize: 12}, KindSize},
		{"too deep", `{"outputs":{"a":{"b":1}}}`, Limits{MaxDepth: 2}, KindDepth},
		{"too many values", `{"outputs":{"a":"1","b":"2"}}`, Limits{MaxValues: 3}, KindValues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r result
			err := Unmarshal([]byte(tc.doc), &r, tc.l)
			if tc.kind == 0 {
				require.NoError(t, err)
				return
			}
			requireKind(t, err, tc.kind)
		})
	}
}

func TestDecoderKeyLimit(t *testing.T) {
	long := strings.Repeat("k", 300)
	// A skipped key is never held: only MaxToken applies.
	d := decoder(`{"`+long+`":1}`, Limits{})
	require.NoError(t, d.Skip())
	// A key handed to a callback is held: MaxKey applies.
	d = decoder(`{"`+long+`":1}`, Limits{})
	requireKind(t, d.Object(func(string) error { return d.Skip() }), KindToken)
	d = decoder(`{"`+long+`":1}`, Limits{MaxKey: 300})
	require.NoError(t, d.Object(func(k string) error { require.Equal(t, long, k); return d.Skip() }))
}
