package tfstate

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/captf/captf/pkg/tfstate/tfstatetest"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// sensitiveValue is a sensitive output's value: X1 says it never leaves the
// state Secret, so no result or error of this package may carry it.
const sensitiveValue = "tf-S3NSITIVE-output-4242"

// appliedState is a state file as OpenTofu 1.x writes it after an apply
// (format 4), with outputs of every JSON type and a sensitive one.
const appliedState = `{
  "version": 4,
  "terraform_version": "1.12.6",
  "serial": 3,
  "lineage": "0c6f6a43-31a4-1d8a-63f4-7f6c7d0cbe11",
  "outputs": {
    "control_plane_endpoint": {
      "value": {"host": "10.0.0.1", "port": 6443},
      "type": ["object", {"host": "string", "port": "number"}]
    },
    "provider_id": {"value": "fake://machine-1", "type": "string"},
    "zones": {"value": ["a", "b"], "type": ["list", "string"]},
    "big": {"value": 12345678901234567890, "type": "number"},
    "enabled": {"value": true, "type": "bool"},
    "html": {"value": "<a&b>", "type": "string"},
    "admin_password": {"value": "` + sensitiveValue + `", "type": "string", "sensitive": true},
    "kubeconfig": {"value": {"token": "` + sensitiveValue + `"}, "type": ["object", {"token": "string"}], "sensitive": true}
  },
  "resources": [
    {"mode": "managed", "type": "terraform_data", "name": "net", "provider": "provider[\"terraform.io/builtin/terraform\"]",
     "instances": [{"schema_version": 0, "attributes": {"id": "x", "input": "` + sensitiveValue + `"}, "sensitive_attributes": []}]}
  ],
  "check_results": null
}`

// initState is what `tofu init` writes when there is no state.
const initState = `{"version":4,"terraform_version":"1.12.6","serial":1,"lineage":"0c6f","outputs":{},"resources":[],"check_results":null}`

// stateSecret is a state Secret in team-a exactly as the kubernetes
// backend writes it.
func stateSecret(name, suffix string, data []byte) corev1.Secret {
	return *tfstatetest.Secret("team-a", name, suffix, data)
}

// requireKind checks err is an *Error of kind k whose message does not
// quote the sensitive value.
func requireKind(t *testing.T, err error, k Kind) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, k, KindOf(err), "error: %v", err)
	require.NotContains(t, err.Error(), sensitiveValue)
}

func TestDecodeAppliedState(t *testing.T) {
	out, err := Decode(tfstatetest.Gzip([]byte(appliedState)))
	require.NoError(t, err)
	require.Equal(t, []string{"admin_password", "kubeconfig"}, out.Sensitive)
	want := map[string]string{
		"control_plane_endpoint": `{"host":"10.0.0.1","port":6443}`,
		"provider_id":            `"fake://machine-1"`,
		"zones":                  `["a","b"]`,
		"big":                    `12345678901234567890`, // as written, not rounded through float64
		"enabled":                `true`,
		"html":                   `"<a&b>"`,
	}
	require.Len(t, out.Values, len(want))
	for k, v := range want {
		require.Equal(t, v, string(out.Values[k]), k)
	}
	b, err := out.Encode()
	require.NoError(t, err)
	require.Equal(t, `{"big":12345678901234567890,"control_plane_endpoint":{"host":"10.0.0.1","port":6443},"enabled":true,"html":"<a&b>","provider_id":"fake://machine-1","zones":["a","b"]}`, string(b))
	// X1: nothing of the result carries a sensitive value.
	all, err := json.Marshal(out)
	require.NoError(t, err)
	require.NotContains(t, string(all), sensitiveValue)
}

func TestDecodeEmptyOutputs(t *testing.T) {
	for name, state := range map[string]string{
		"init":       initState,
		"no outputs": `{"version":4,"serial":2}`,
		"destroyed":  `{"version":4,"serial":9,"outputs":{},"resources":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Decode(tfstatetest.Gzip([]byte(state)))
			require.NoError(t, err)
			require.Empty(t, out.Values)
			require.Empty(t, out.Sensitive)
			b, err := out.Encode()
			require.NoError(t, err)
			require.Equal(t, "{}", string(b))
		})
	}
}

func TestDecodeFailures(t *testing.T) {
	valid := tfstatetest.Gzip([]byte(appliedState))
	for _, tc := range []struct {
		name string
		data []byte
		kind Kind
	}{
		{"empty", nil, KindNotGzip},
		{"random bytes", []byte("\x00\x01not gzip at all " + sensitiveValue), KindNotGzip},
		{"plain JSON", []byte(appliedState), KindNotGzip},
		{"base64 of gzip", []byte(base64.StdEncoding.EncodeToString(valid)), KindNotGzip},
		{"truncated gzip", valid[:len(valid)/2], KindNotGzip},
		{"corrupt checksum", append(append([]byte{}, valid[:len(valid)-8]...), 0, 0, 0, 0, 0, 0, 0, 0), KindNotGzip},
		{"trailing garbage", append(append([]byte{}, valid...), []byte("garbage")...), KindNotGzip},
		{"not JSON", tfstatetest.Gzip([]byte("outputs = " + sensitiveValue)), KindNotJSON},
		{"JSON syntax error next to a sensitive value", tfstatetest.Gzip([]byte(`{"version":4,"outputs":{"pw":{"value":"` + sensitiveValue + `","sensitive":true}} x}`)), KindNotJSON},
		{"JSON type error on a number", tfstatetest.Gzip([]byte(`{"version":4,"outputs":{"pw":{"value":1,"sensitive":4242}}}`)), KindNotJSON},
		{"top-level array", tfstatetest.Gzip([]byte(`[1,2]`)), KindNotJSON},
		{"top-level string", tfstatetest.Gzip([]byte(`"` + sensitiveValue + `"`)), KindNotJSON},
		{"no version", tfstatetest.Gzip([]byte(`{"outputs":{}}`)), KindNotJSON},
		{"version 3", tfstatetest.Gzip([]byte(`{"version":3,"modules":[]}`)), KindUnsupported},
		{"encrypted (OpenTofu)", tfstatetest.Gzip([]byte(`{"meta":{"key_provider.pbkdf2.main":"eyJzYWx0Ijoi"},"encrypted_data":"` + base64.StdEncoding.EncodeToString([]byte(sensitiveValue)) + `","encryption_version":"v0"}`)), KindEncrypted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Decode(tc.data)
			require.Nil(t, out)
			requireKind(t, err, tc.kind)
			require.NotContains(t, err.Error(), "4242")
		})
	}
}

// gzRepeat is a gzip of head, n copies of unit, and tail, written without
// holding the whole: a bomb of a few KiB (BestSpeed, which keeps the
// tests quick under -race, still compresses 16 MiB of it to less than 1
// MiB).
func gzRepeat(t testing.TB, head, unit, tail string, n int) []byte {
	var b bytes.Buffer
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

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestDecodeBombs decodes small gzips that expand to 16 MiB or more (a
// string or multi-stream bomb past the size limit: TestDecodeAtTheCap and
// package bounded): each
// ends as its kind says, and the bytes allocated stay within a few MiB
// (SPEC B10), not the 16 MiB of JSON, let alone what it expands to. Before
// B10, the [0,0,0,...] value of a non-sensitive output cost hundreds of MiB.
func TestDecodeBombs(t *testing.T) {
	const mib = 1 << 20
	zeros := func(head, tail string, bytes int) []byte {
		n := (bytes - len(head) - len(tail)) / 2
		return gzRepeat(t, head, "0,", "0"+tail, n)
	}
	for _, tc := range []struct {
		name string
		data []byte
		kind Kind // 0: decodes
	}{
		{"[0,0,0,...] 16 MiB", zeros("[", "]", MaxStateBytes), KindNotJSON},
		{"a non-sensitive output of [0,0,0,...] 16 MiB", zeros(`{"version":4,"outputs":{"x":{"value":[`, `]}}}`, MaxStateBytes), KindTooLarge},
		{"a non-sensitive output of [0,0,0,...] 2 MiB", zeros(`{"version":4,"outputs":{"x":{"value":[`, `]}}}`, 2*mib), KindOutputsTooLarge},
		{"a sensitive output of [0,0,0,...] 2 MiB", zeros(`{"version":4,"outputs":{"x":{"value":[`, `],"sensitive":true}}}`, 2*mib), 0},
		{"resources of [0,0,0,...] 16 MiB", zeros(`{"version":4,"outputs":{},"resources":[`, `]}`, MaxStateBytes), KindTooLarge},
		{"an output nested 16M deep", gzRepeat(t, `{"version":4,"outputs":{"x":{"value":`, "[", "", MaxStateBytes-64), KindTooLarge},
		{"resources nested 16M deep", gzRepeat(t, `{"version":4,"resources":`, `{"a":`, "", MaxStateBytes/5), KindTooLarge},
		{"an output name of 1 MiB", gzRepeat(t, `{"version":4,"outputs":{"`, "n", `":{"value":1}}}`, mib), KindTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Less(t, len(tc.data), 2*mib, "the bomb must be small")
			var out *Outputs
			var err error
			n := allocated(func() { out, err = Decode(tc.data) })
			t.Logf("%d compressed bytes: allocated %d bytes", len(tc.data), n)
			if tc.kind == 0 {
				require.NoError(t, err)
				require.Equal(t, []string{"x"}, out.Sensitive)
			} else {
				require.Nil(t, out)
				requireKind(t, err, tc.kind)
			}
			require.Less(t, n, uint64(2*mib), "allocated %d bytes", n)
		})
	}
}

// TestDecodeAtTheCap: exactly MaxStateBytes decompress; one more does not.
func TestDecodeAtTheCap(t *testing.T) {
	pad := func(n int) []byte {
		head := `{"version":4,"outputs":{"a":{"value":"x","type":"string"}},"pad":"`
		tail := `"}`
		return []byte(head + strings.Repeat("p", n-len(head)-len(tail)) + tail)
	}
	out, err := Decode(tfstatetest.Gzip(pad(MaxStateBytes)))
	require.NoError(t, err)
	require.Equal(t, `"x"`, string(out.Values["a"]))
	_, err = Decode(tfstatetest.Gzip(pad(MaxStateBytes + 1)))
	requireKind(t, err, KindTooLarge)
}

// TestDecodeLimits: the decoder's other limits, at and past each.
func TestDecodeLimits(t *testing.T) {
	nested := func(depth int) string {
		// The state object and "resources" array are two levels.
		return `{"version":4,"resources":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	out, err := Decode(tfstatetest.Gzip([]byte(nested(MaxDepth))))
	require.NoError(t, err)
	require.Empty(t, out.Values)
	_, err = Decode(tfstatetest.Gzip([]byte(nested(MaxDepth + 1))))
	requireKind(t, err, KindTooLarge)

	// The state object, the version and the array are three values
	// (package bounded tests the limit's edge with small limits).
	_, err = Decode(gzRepeat(t, `{"version":4,"resources":[`, "0,", "0]}", MaxValues-3))
	requireKind(t, err, KindTooLarge)

	key := func(n int) string { return `{"version":4,"outputs":{"` + strings.Repeat("k", n) + `":{"value":1}}}` }
	out, err = Decode(tfstatetest.Gzip([]byte(key(MaxKey))))
	require.NoError(t, err)
	require.Len(t, out.Values, 1)
	_, err = Decode(tfstatetest.Gzip([]byte(key(MaxKey + 1))))
	requireKind(t, err, KindTooLarge)
}

// TestDecodeKeepsWhatEncodingJSONKept: the walk reads what
// json.Unmarshal into the old stateFile read: keys match case-insensitively
// and the last wins, "sensitive" before or after "value", null where a
// value may be.
func TestDecodeKeepsWhatEncodingJSONKept(t *testing.T) {
	for _, tc := range []struct {
		name, state string
		values      map[string]string
		sensitive   []string
	}{
		{"sensitive first", `{"version":4,"outputs":{"pw":{"sensitive":true,"value":"` + sensitiveValue + `"},"a":{"sensitive":false,"value":1}}}`,
			map[string]string{"a": "1"}, []string{"pw"}},
		{"case-insensitive keys", `{"VERSION":4,"Outputs":{"a":{"Value":[1, 2],"SENSITIVE":false},"pw":{"value":"` + sensitiveValue + `","Sensitive":true}}}`,
			map[string]string{"a": "[1,2]"}, []string{"pw"}},
		{"the last key wins", `{"version":3,"version":4,"outputs":{"a":{"value":1,"value":2},"a":{"value":3}}}`,
			map[string]string{"a": "3"}, nil},
		{"null sensitive keeps the flag", `{"version":4,"outputs":{"pw":{"sensitive":true,"value":"` + sensitiveValue + `","sensitive":null}}}`,
			nil, []string{"pw"}},
		{"null output and no value", `{"version":4,"outputs":{"a":null,"b":{}}}`,
			map[string]string{"a": "null", "b": "null"}, nil},
		{"null outputs", `{"version":4,"outputs":null}`, nil, nil},
		{"a second outputs object merges", `{"version":4,"outputs":{"a":{"value":1}},"outputs":{"b":{"value":2}}}`,
			map[string]string{"a": "1", "b": "2"}, nil},
		{"escaped keys", `{"version":4,"outputs":{"\u0061":{"value":"\u0041"}}}`,
			map[string]string{"a": `"A"`}, nil},
		{"sensitive value larger than the outputs' cap", `{"version":4,"outputs":{"a":{"value":1},"pw":{"value":"` + strings.Repeat("s", 3*MaxOutputsBytes) + `","sensitive":true}}}`,
			map[string]string{"a": "1"}, []string{"pw"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Decode(tfstatetest.Gzip([]byte(tc.state)))
			require.NoError(t, err)
			got := map[string]string{}
			for k, v := range out.Values {
				got[k] = string(v)
			}
			if tc.values == nil {
				tc.values = map[string]string{}
			}
			require.Equal(t, tc.values, got)
			if tc.sensitive == nil {
				tc.sensitive = []string{}
			}
			require.Equal(t, tc.sensitive, out.Sensitive)
			ref, err := referenceDecode([]byte(tc.state))
			require.NoError(t, err)
			require.Equal(t, ref, out, "the encoding/json reading of the state")
		})
	}
}

func TestEncodeLimit(t *testing.T) {
	// {"a":"<n x>"} is 8+n bytes.
	at := &Outputs{Values: map[string]json.RawMessage{"a": json.RawMessage(`"` + strings.Repeat("x", MaxOutputsBytes-8) + `"`)}}
	b, err := at.Encode()
	require.NoError(t, err)
	require.Len(t, b, MaxOutputsBytes)
	over := &Outputs{Values: map[string]json.RawMessage{"a": json.RawMessage(`"` + strings.Repeat("x", MaxOutputsBytes-7) + `"`)}}
	_, err = over.Encode()
	requireKind(t, err, KindOutputsTooLarge)

	// The same limit for the names of the sensitive outputs.
	var names []string
	for i := 0; i < 2000; i++ {
		names = append(names, fmt.Sprintf("sensitive_output_name_%d", i))
	}
	_, err = (&Outputs{Sensitive: names}).Encode()
	requireKind(t, err, KindOutputsTooLarge)
}

// TestDecodeOverLimitFromState: a state with 40 KiB of non-sensitive
// outputs decodes, and Encode refuses it for status.
func TestDecodeOverLimitFromState(t *testing.T) {
	state := fmt.Sprintf(`{"version":4,"outputs":{"blob":{"value":%q,"type":"string"},"pw":{"value":%q,"type":"string","sensitive":true}}}`, strings.Repeat("b", 40<<10), sensitiveValue)
	out, err := Decode(tfstatetest.Gzip([]byte(state)))
	require.NoError(t, err)
	require.Equal(t, []string{"pw"}, out.Sensitive)
	_, err = out.Encode()
	requireKind(t, err, KindOutputsTooLarge)
}

func TestNames(t *testing.T) {
	require.Equal(t, "tfstate-default-net-cluster", SecretName("net-cluster"))
	require.Equal(t, "tfstate-default-net-cluster", PartName("net-cluster", 0))
	require.Equal(t, "tfstate-default-net-cluster-part-2", PartName("net-cluster", 2))
	sel := Selector("net-cluster")
	require.True(t, sel.Matches(labels.Set(stateSecret("x", "net-cluster", nil).Labels)))
	require.False(t, sel.Matches(labels.Set(stateSecret("x", "net-machine", nil).Labels)))
}

func TestIsStateNameB15(t *testing.T) {
	const suffix = "net-cluster"
	for i := range 40 {
		require.True(t, IsStateName(suffix, PartName(suffix, i)), i)
	}
	for _, name := range []string{
		"tfstate-default-net-cluster-copy", "tfstate-default-net-cluster-part-", "tfstate-default-net-cluster-part-0",
		"tfstate-default-net-cluster-part-01", "tfstate-default-net-cluster-part--1", "tfstate-default-net-cluster-part-1x",
		"tfstate-default-net-cluster-part-1234567890", "tfstate-default-net-cluster-part-+1", "tfstate-default-net-cluster-part-1-part-2",
		"tfstate-default-net", "tfstate-default-net-clusters", "tfstate-other-net-cluster", "lock-tfstate-default-net-cluster",
		"tfstate-default-net-cluster ", "TFSTATE-default-net-cluster", "",
	} {
		require.False(t, IsStateName(suffix, name), name)
	}
}

// split chunks a compressed state as Terraform's Put does: ChunkSize
// bytes per Secret, part names from PartName.
func split(suffix string, compressed []byte) []corev1.Secret {
	var out []corev1.Secret
	for i := 0; len(compressed) > 0; i++ {
		n := min(ChunkSize, len(compressed))
		out = append(out, stateSecret(PartName(suffix, i), suffix, compressed[:n]))
		compressed = compressed[n:]
	}
	return out
}

// bigState is a state whose gzip needs three chunks: incompressible
// non-sensitive data, plus a small sensitive output.
func bigState(t *testing.T) ([]byte, string) {
	noise := make([]byte, 2<<20)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	blob := base64.StdEncoding.EncodeToString(noise)
	state := fmt.Sprintf(`{"version":4,"outputs":{"id":{"value":"net-1","type":"string"},"pw":{"value":%q,"type":"string","sensitive":true}},"resources":[{"blob":%q}]}`, sensitiveValue, blob)
	return tfstatetest.Gzip([]byte(state)), blob
}

// store is an API server of Secrets by name: get returns nil for a
// missing one and records every name asked for.
type store struct {
	secrets map[string]*corev1.Secret
	gets    []string
}

func newStore(secrets ...corev1.Secret) *store {
	s := &store{secrets: map[string]*corev1.Secret{}}
	for i := range secrets {
		s.secrets[secrets[i].Name] = &secrets[i]
	}
	return s
}

func (s *store) get(name string) (*corev1.Secret, error) {
	s.gets = append(s.gets, name)
	return s.secrets[name], nil
}

// read reads the state of suffix from s.
func (s *store) read(suffix string) ([]byte, error) {
	return io.ReadAll(Chunks(suffix, s.get))
}

func TestChunksSplitState(t *testing.T) {
	const suffix = "net-cluster"
	compressed, _ := bigState(t)
	parts := split(suffix, compressed)
	require.Len(t, parts, 3)

	// A decoy carrying the labels under another name, a stale part beyond
	// the last chunk (a state that shrank): neither is read.
	s := newStore(append(parts, stateSecret("tfstate-default-net-cluster-copy", suffix, []byte("decoy")),
		stateSecret(PartName(suffix, 3), suffix, []byte("stale")))...)
	got, err := s.read(suffix)
	require.NoError(t, err)
	require.Equal(t, compressed, got)
	require.Equal(t, []string{PartName(suffix, 0), PartName(suffix, 1), PartName(suffix, 2)}, s.gets, "one GET per chunk, by name")

	s.gets = nil
	out, err := Read(Chunks(suffix, s.get))
	require.NoError(t, err)
	require.Equal(t, `"net-1"`, string(out.Values["id"]))
	require.Equal(t, []string{"pw"}, out.Sensitive)

	// A state that fits one Secret is one GET.
	one := newStore(stateSecret(SecretName(suffix), suffix, tfstatetest.Gzip([]byte(appliedState))))
	_, err = Read(Chunks(suffix, one.get))
	require.NoError(t, err)
	require.Equal(t, []string{SecretName(suffix)}, one.gets)
}

// TestChunksExactMultiple: a state of exactly two chunks ends where the
// third part is missing, and so does the one after it.
func TestChunksExactMultiple(t *testing.T) {
	const suffix = "net-cluster"
	compressed := make([]byte, 2*ChunkSize)
	s := newStore(split(suffix, compressed)...)
	got, err := s.read(suffix)
	require.NoError(t, err)
	require.Len(t, got, 2*ChunkSize)
	require.Equal(t, []string{PartName(suffix, 0), PartName(suffix, 1), PartName(suffix, 2), PartName(suffix, 3)}, s.gets)
}

func TestChunksFailures(t *testing.T) {
	const suffix = "net-cluster"
	compressed, _ := bigState(t)
	parts := split(suffix, compressed)
	noKey := stateSecret(SecretName(suffix), suffix, nil)
	noKey.Data = nil
	partNoKey := parts[1]
	partNoKey.Data = map[string][]byte{}
	foreign := parts[1]
	foreign.Labels = map[string]string{"tfstate": "true", "tfstateSecretSuffix": "other-cluster", "tfstateWorkspace": "default"}

	_, err := newStore().read(suffix)
	requireKind(t, err, KindNotFound)
	_, err = newStore(stateSecret("tfstate-default-other-cluster", "other-cluster", []byte("x"))).read(suffix)
	requireKind(t, err, KindNotFound)
	_, err = newStore(noKey).read(suffix)
	requireKind(t, err, KindNotFound)
	_, err = newStore(parts[0], partNoKey, parts[2]).read(suffix)
	requireKind(t, err, KindIncomplete)
	_, err = newStore(parts[0], parts[2]).read(suffix)
	requireKind(t, err, KindIncomplete)
	// A part without the suffix's labels is not one.
	_, err = newStore(parts[0], foreign, parts[2]).read(suffix)
	requireKind(t, err, KindIncomplete)

	// A missing last part leaves a truncated gzip stream.
	_, err = Read(Chunks(suffix, newStore(parts[:2]...).get))
	requireKind(t, err, KindNotGzip)

	// More chunks than MaxStateBytes allows: read one at a time, and
	// refused at the first one past the limit.
	full := make([]byte, ChunkSize)
	var many []corev1.Secret
	for i := 0; i <= MaxParts; i++ {
		many = append(many, stateSecret(PartName(suffix, i), suffix, full))
	}
	_, err = newStore(many...).read(suffix)
	requireKind(t, err, KindTooLarge)

	// An error of the API server passes through, not as a state problem.
	boom := errors.New("the server is unavailable")
	_, err = Read(Chunks(suffix, func(string) (*corev1.Secret, error) { return nil, boom }))
	require.ErrorIs(t, err, boom)
	require.Zero(t, KindOf(err))
	calls := 0
	_, err = Read(Chunks(suffix, func(name string) (*corev1.Secret, error) {
		if calls++; calls > 1 {
			return nil, boom
		}
		return &parts[0], nil
	}))
	require.ErrorIs(t, err, boom)
	require.Zero(t, KindOf(err))
}

// FuzzDecode: any input gives either an *Error or outputs whose values are
// valid JSON and whose sensitive names hold no value. The seeds in
// testdata/fuzz/FuzzDecode are gzip bombs: [0,0,0,...] and nesting of 16
// MiB, at the top, in resources and in an output.
func FuzzDecode(f *testing.F) {
	f.Add(tfstatetest.Gzip([]byte(appliedState)))
	f.Add(tfstatetest.Gzip([]byte(initState)))
	f.Add(tfstatetest.Gzip([]byte(`{"meta":{},"encrypted_data":"eA==","encryption_version":"v0"}`)))
	f.Add([]byte(appliedState))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Decode(data)
		checkResult(t, out, err)
	})
}

// FuzzDecodeJSON fuzzes the state's JSON behind the gzip layer, and holds
// the walk to what json.Unmarshal into the state's structure reads
// (referenceDecode): the same outputs, or a failure of the same kind,
// unless one of the walk's limits stopped it.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(appliedState))
	f.Add([]byte(initState))
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":null},"b":{"sensitive":true},"c":{}}}`))
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":1e400}}}`))
	f.Add([]byte(`{"version":"4"}`))
	f.Add([]byte(`{"Version":4,"OUTPUTS":{"a":{"Value":1,"Sensitive":null}},"version":4.0}`))
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":[1,{"b":"\u00e9"}],"sensitive":false},"a":{"sensitive":true}}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := readJSON(bytes.NewReader(raw), nil)
		checkResult(t, out, err)
		if KindOf(err) == KindTooLarge {
			return // a limit of the walk; encoding/json has none
		}
		ref, refErr := referenceDecode(raw)
		if refErr != nil || err != nil {
			require.Equal(t, KindOf(refErr), KindOf(err), "walk: %v; encoding/json: %v", err, refErr)
			return
		}
		require.Equal(t, ref, out)
	})
}

func checkResult(t *testing.T, out *Outputs, err error) {
	if err != nil {
		require.Nil(t, out)
		require.NotZero(t, KindOf(err), "error %v is not an *Error", err)
		return
	}
	for name, v := range out.Values {
		require.True(t, json.Valid(v), "output %q: %q", name, v)
	}
	for _, name := range out.Sensitive {
		_, ok := out.Values[name]
		require.False(t, ok, "sensitive output %q has a value", name)
	}
	if b, err := out.Encode(); err == nil {
		require.True(t, json.Valid(b))
		require.LessOrEqual(t, len(b), MaxOutputsBytes)
	} else {
		require.Equal(t, KindOutputsTooLarge, KindOf(err))
	}
}

// referenceDecode is how the state was read before B10: json.Unmarshal of
// the whole decompressed state into a structure. The walk must read the
// same outputs; only its limits differ.
func referenceDecode(raw []byte) (*Outputs, error) {
	var st struct {
		Version *int            `json:"version"`
		Serial  json.RawMessage `json:"serial"`
		Outputs map[string]struct {
			Value     json.RawMessage `json:"value"`
			Sensitive bool            `json:"sensitive"`
		} `json:"outputs"`
		EncryptedData     json.RawMessage `json:"encrypted_data"`
		EncryptionVersion json.RawMessage `json:"encryption_version"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fail(KindNotJSON, "not JSON")
	}
	if st.EncryptedData != nil || st.EncryptionVersion != nil {
		return nil, fail(KindEncrypted, "encrypted")
	}
	if st.Version == nil {
		return nil, fail(KindNotJSON, "no version")
	}
	if *st.Version != 4 {
		return nil, fail(KindUnsupported, "version")
	}
	out := &Outputs{Values: map[string]json.RawMessage{}, Sensitive: []string{}}
	if v, err := strconv.ParseInt(string(st.Serial), 10, 64); err == nil && v >= 0 {
		out.Serial, out.HasSerial = v, true
	}
	for name, o := range st.Outputs {
		if o.Sensitive {
			out.Sensitive = append(out.Sensitive, name)
			continue
		}
		v, err := canonical(o.Value)
		if err != nil {
			return nil, fail(KindNotJSON, "value")
		}
		out.Values[name] = v
	}
	sort.Strings(out.Sensitive)
	return out, nil
}

// TestDecodeSerial: the serial is kept for the backups (O5), also when the
// outputs are too large to hold; a serial that is not a non-negative
// integer is no serial, and no error.
func TestDecodeSerial(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  string
		serial int64
		has    bool
	}{
		{"applied", string(tfstatetest.StateSerial(42, sensitiveValue, nil)), 42, true},
		{"init", initState, 1, true},
		{"no serial", `{"version":4,"outputs":{}}`, 0, false},
		{"a string", `{"version":4,"serial":"7"}`, 0, false},
		{"negative", `{"version":4,"serial":-7}`, 0, false},
		{"fraction", `{"version":4,"serial":7.5}`, 0, false},
		{"beyond int64", `{"version":4,"serial":99999999999999999999}`, 0, false},
		{"last one wins", `{"version":4,"serial":7,"Serial":8}`, 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Decode(tfstatetest.Gzip([]byte(tc.state)))
			require.NoError(t, err)
			require.Equal(t, tc.serial, out.Serial)
			require.Equal(t, tc.has, out.HasSerial)
			serial, ok := SerialOf(out, err)
			require.Equal(t, tc.serial, serial)
			require.Equal(t, tc.has, ok)
		})
	}
	big := fmt.Sprintf(`{"version":4,"serial":9,"outputs":{"blob":{"value":%q}}}`, strings.Repeat("b", 2*MaxOutputsBytes))
	out, err := Decode(tfstatetest.Gzip([]byte(big)))
	requireKind(t, err, KindOutputsTooLarge)
	serial, ok := SerialOf(out, err)
	require.Equal(t, int64(9), serial)
	require.True(t, ok)
	out, err = Decode(tfstatetest.Gzip([]byte(`{"version":5,"serial":9}`)))
	requireKind(t, err, KindUnsupported)
	_, ok = SerialOf(out, err)
	require.False(t, ok, "no backup of a state that cannot be read")
}
