package bounded

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzLimits are small, so that the fuzzer reaches every limit.
var fuzzLimits = Limits{MaxInput: 64 << 10, MaxSize: 64 << 10, MaxDepth: 16, MaxValues: 256, MaxToken: 64}

// FuzzDecoder: the decoder agrees with encoding/json on what is valid
// JSON, unless a limit stopped it; what it captures is the compact form;
// every failure is an *Error. The seeds (testdata/fuzz/FuzzDecoder) hold
// deep nesting, long tokens and many values.
func FuzzDecoder(f *testing.F) {
	for _, doc := range append(append([]string{}, validDocs...), invalidDocs...) {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(bytes.NewReader(data), fuzzLimits)
		raw, ok, err := d.Capture(len(data))
		if err == nil {
			err = d.End()
		}
		if err != nil {
			k := KindOf(err)
			require.NotZero(t, k, "error %v is not an *Error", err)
			if !k.Limit() {
				require.Equal(t, KindSyntax, k)
				require.False(t, json.Valid(data), "valid JSON refused: %v", err)
			}
			return
		}
		require.True(t, json.Valid(data), "invalid JSON accepted")
		require.True(t, ok, "a capture of len(data) bytes cannot overflow")
		var want bytes.Buffer
		require.NoError(t, json.Compact(&want, data))
		require.Equal(t, want.Bytes(), raw)
	})
}

// FuzzGunzip walks gzip input (bombs among the seeds in
// testdata/fuzz/FuzzGunzip): any input ends in success or an *Error, and
// never allocates past a bound.
func FuzzGunzip(f *testing.F) {
	f.Add(gz(f, []byte(`{"a":[1,2,3]}`)))
	f.Add(gz(f, []byte(`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`)))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		err := walk(data, fuzzLimits)
		if err != nil {
			require.NotZero(t, KindOf(err), "error %v is not an *Error", err)
		}
	})
}
