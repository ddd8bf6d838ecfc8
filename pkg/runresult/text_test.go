package runresult

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\nlines":    "plain\ttext\nlines",
		"crlf\r\nline":          "crlf\nline",
		"\x1b[31mred\x1b[0m":    "[31mred[0m",
		"bell\a and nul\x00":    "bell and nul",
		"bidi \u202Eevil\u202C": "bidi evil",
		"invalid \xff byte":     "invalid \uFFFD byte",
		"c1 \u0085 control":     "c1  control",
		"box │ drawing ╷ stays": "box │ drawing ╷ stays",
	} {
		got := Clean(in)
		require.Equal(t, want, got, "%q", in)
		require.Equal(t, got, Clean(got), "idempotent on %q", in)
	}
	require.Equal(t, "a b c", cleanLine("a\nb\tc"))
}

// TestShorten: at most max bytes, valid UTF-8, the headline kept, the
// last line kept when it fits.
func TestShorten(t *testing.T) {
	long := "Error: headline\n" + strings.Repeat("middle line ✓\n", 300) + "last line"
	for _, max := range []int{0, 1, 4, 7, 10, 50, 200, 1024, 4096, len(long)} {
		got := Shorten(long, max)
		require.LessOrEqual(t, len(got), max, "max %d", max)
		require.True(t, utf8.ValidString(got), "max %d: %q", max, got)
		if max >= 200 {
			require.True(t, strings.HasPrefix(got, "Error: headline\n"), "max %d: %q", max, got)
			require.True(t, strings.HasSuffix(got, "\nlast line"), "max %d: %q", max, got)
		}
	}
	require.Equal(t, long, Shorten(long, len(long)))
	one := strings.Repeat("é", 100)
	got := Shorten(one, 51)
	require.LessOrEqual(t, len(got), 51)
	require.True(t, utf8.ValidString(got))
	require.Contains(t, got, "...")
}
