package bounded

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func gz(t testing.TB, data []byte) []byte {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	_, err = w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

// gzRepeat is a gzip of head, n copies of unit, and tail, written
// without holding the whole.
func gzRepeat(t testing.TB, head, unit, tail string, n int) []byte {
	var b bytes.Buffer
	// BestSpeed keeps the tests quick under -race; 16 MiB of a repeated
	// unit still compress to less than 1 MiB.
	w, err := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	require.NoError(t, err)
	_, err = io.WriteString(w, head)
	require.NoError(t, err)
	chunk := strings.Repeat(unit, max(1, (64<<10)/len(unit)))
	per := len(chunk) / len(unit)
	for i := 0; i < n; i += per {
		_, err = io.WriteString(w, chunk[:min(per, n-i)*len(unit)])
		require.NoError(t, err)
	}
	_, err = io.WriteString(w, tail)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

func gunzipAll(data []byte, l Limits) ([]byte, error) {
	r, err := Gunzip(bytes.NewReader(data), l)
	if err != nil {
		return nil, err
	}
	return ReadAll(r, 1<<30)
}

func TestGunzip(t *testing.T) {
	doc := []byte(`{"a":"` + secret + `"}`)
	valid := gz(t, doc)
	got, err := gunzipAll(valid, Limits{})
	require.NoError(t, err)
	require.Equal(t, doc, got)

	// Concatenated streams read as one, as gzip readers do.
	got, err = gunzipAll(append(gz(t, []byte("ab")), gz(t, []byte("cd"))...), Limits{})
	require.NoError(t, err)
	require.Equal(t, "abcd", string(got))

	for _, tc := range []struct {
		name string
		data []byte
		l    Limits
		kind Kind
	}{
		{"empty", nil, Limits{}, KindCorrupt},
		{"plain JSON", doc, Limits{}, KindCorrupt},
		{"truncated", valid[:len(valid)/2], Limits{}, KindCorrupt},
		{"checksum", append(append([]byte{}, valid[:len(valid)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), Limits{}, KindCorrupt},
		{"trailing garbage", append(append([]byte{}, valid...), []byte(secret)...), Limits{}, KindCorrupt},
		{"corrupt data", append(append(append([]byte{}, valid[:12]...), []byte(secret)...), valid[12:]...), Limits{}, KindCorrupt},
		{"compressed input over", valid, Limits{MaxInput: int64(len(valid) - 1)}, KindInput},
		{"decompressed over", valid, Limits{MaxSize: int64(len(doc) - 1)}, KindSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gunzipAll(tc.data, tc.l)
			requireKind(t, err, tc.kind)
		})
	}
	// Exactly at both limits.
	got, err = gunzipAll(valid, Limits{MaxInput: int64(len(valid)), MaxSize: int64(len(doc))})
	require.NoError(t, err)
	require.Equal(t, doc, got)
}

func TestGunzipPassesSourceErrors(t *testing.T) {
	valid := gz(t, bytes.Repeat([]byte(`"abcdefgh",`), 10000))
	r, err := Gunzip(io.MultiReader(bytes.NewReader(valid[:len(valid)/2]), errReader{}), Limits{})
	require.NoError(t, err)
	_, err = ReadAll(r, 1<<30)
	require.ErrorIs(t, err, errSource{})

	_, err = Gunzip(errReader{}, Limits{})
	require.ErrorIs(t, err, errSource{})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errSource{} }

func TestReadAllNeverExceedsTheCap(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 100000} {
		b, err := ReadAll(bytes.NewReader(make([]byte, n)), 100)
		if n > 100 {
			requireKind(t, err, KindSize)
			continue
		}
		require.NoError(t, err)
		require.Len(t, b, n)
		require.LessOrEqual(t, cap(b), 101)
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// bombLimits are a quarter of the state's (package tfstate, whose tests
// use its own): 4 MiB of input and of JSON text, deep nesting allowed, 1M
// values. A bomb costs the same whatever the limits; smaller ones keep
// the tests quick under -race.
var bombLimits = Limits{MaxInput: 4 << 20, MaxSize: 4 << 20, MaxDepth: 512, MaxValues: 1 << 20, MaxToken: 4 << 20}

// walk reads a gzipped JSON document with l, keeping nothing.
func walk(data []byte, l Limits) error {
	r, err := Gunzip(bytes.NewReader(data), l)
	if err != nil {
		return err
	}
	d := NewDecoder(r, l)
	if err := d.Skip(); err != nil {
		return err
	}
	return d.End()
}

// TestBombsCostAFewMiB: small gzips that expand to 16 MiB of JSON, or past
// any limit, are read with a bounded allocation whatever they expand to
// (SPEC B10: "a small gzip of [0,0,0,...] or a deeply nested document
// costs at most a few MiB").
func TestBombsCostAFewMiB(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name string
		data []byte
		l    Limits
		kind Kind
	}{
		// 16 MiB of [0,0,0,...] (one byte short): 8M values, over the limit.
		{"[0,0,...] 16 MiB", gzRepeat(t, "[", "0,", "0]", 8<<20-2), bombLimits, KindValues},
		// Within every limit: read to its end.
		{"[0,0,...] 1 MiB, read to its end", gzRepeat(t, "[", "0,", "0]", 1<<19-2), bombLimits, 0},
		{"nested [[[...]]] 16 MiB", gzRepeat(t, "", "[", "", 16<<20), bombLimits, KindDepth},
		{"nested {\"a\":{...}} within depth", gzRepeat(t, "", `{"a":`, "1"+strings.Repeat("}", 500), 500), bombLimits, 0},
		{"one string of 64 MiB", gzRepeat(t, `"`, strings.Repeat("x", 1024), `"`, 64<<10), bombLimits, KindSize},
		{"64 MiB of spaces", gzRepeat(t, "", " ", "", 64<<20), bombLimits, KindSize},
		{"1024 streams of 1 MiB", bytes.Repeat(gzRepeat(t, "", " ", "", 1<<20), 1024), bombLimits, KindSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Less(t, len(tc.data), 2*mib, "the bomb must be small")
			var err error
			n := allocated(func() { err = walk(tc.data, tc.l) })
			if tc.kind == 0 {
				require.NoError(t, err)
			} else {
				requireKind(t, err, tc.kind)
			}
			t.Logf("%d compressed bytes: allocated %d bytes", len(tc.data), n)
			require.Less(t, n, uint64(2*mib), "allocated %d bytes", n)
		})
	}
}

// BenchmarkWalkZeros walks 16 MiB of [0,0,0,...] (8M values): the worst
// case per byte.
func BenchmarkWalkZeros(b *testing.B) {
	data := gzRepeat(b, "[", "0,", "0]", 8<<20-2)
	l := bombLimits
	l.MaxValues = 1 << 30
	b.SetBytes(16 << 20)
	for b.Loop() {
		if err := walk(data, l); err != nil {
			b.Fatal(err)
		}
	}
}
