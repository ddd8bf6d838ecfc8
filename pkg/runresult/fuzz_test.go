package runresult

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzUnmarshalO1B10: whatever a termination message holds, Unmarshal
// returns a valid Result or an error; an accepted Result marshals again
// within MaxBytes and reads back equal. The seeds are documents the runner
// writes and the refusals of TestUnmarshalRefusesO1B10.
func FuzzUnmarshalO1B10(f *testing.F) {
	good, err := failed().Marshal()
	require.NoError(f, err)
	for _, seed := range []string{
		string(good),
		`{"version":1,"operation":"destroy","steps":[{"name":"init","exitCode":0,"durationMilliseconds":5},{"name":"destroy","exitCode":0,"durationMilliseconds":9}],"changes":{"create":0,"update":0,"replace":0,"delete":2}}`,
		`{"version":1,"operation":"apply","error":{"kind":"image-layout","step":"setup","tail":"no *.tf file in /module"}}`,
		`{"version":1,"operation":"apply","error":{"kind":"interrupted","step":"apply"}}`,
		`{"version":2,"operation":"apply"}`,
		`{"version":1,"operation":"apply","steps":[[[[[]]]]]}`,
		`{"version":1,"operation":"apply","error":{"kind":"step","tail":"\u001b[31m"}}`,
		`{"VERSION":1,"Operation":"apply","version":1}`,
		"│ Error: a log tail\n╵\n",
		`{"version":1e400}`,
		`{"version":1,"operation":"apply","image":"` + strings.Repeat("\\u00e9", 600) + `"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Unmarshal(data)
		if err != nil {
			require.Nil(t, r)
			require.NotContains(t, err.Error(), "\n")
			return
		}
		require.NoError(t, r.Validate())
		b, err := r.Marshal()
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), MaxBytes)
		again, err := Unmarshal(b)
		require.NoError(t, err)
		require.Equal(t, r, again)
	})
}

// FuzzShortenClean: Shorten and Clean keep their promises on any text.
func FuzzShortenClean(f *testing.F) {
	f.Add("Error: x\nline\nlast", 10)
	f.Add("é\xff\u202e\r\n", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 8192
		c := Clean(s)
		require.Equal(t, c, Clean(c))
		got := Shorten(c, n)
		require.LessOrEqual(t, len(got), max(0, n))
		require.Equal(t, got, Clean(got))
	})
}
