package tfstate

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
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

// bombSingle is one gzip stream of n zero bytes: about n/1000 bytes.
func bombSingle(t testing.TB, n int) []byte {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	require.NoError(t, err)
	zeros := make([]byte, 1<<20)
	for i := 0; i < n; i += len(zeros) {
		_, err := w.Write(zeros[:min(len(zeros), n-i)])
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// TestDecodeBomb decodes small inputs that expand far past MaxStateBytes:
// each fails with KindTooLarge, and the bytes allocated stay bounded by a
// small multiple of the cap, not by what the input expands to.
func TestDecodeBomb(t *testing.T) {
	single := bombSingle(t, 64<<20)
	member := bombSingle(t, 1<<20)
	// gzip readers read concatenated streams as one: 1024 members of 1 MiB
	// each expand to 1 GiB.
	multi := bytes.Repeat(member, 1024)
	for name, bomb := range map[string][]byte{"single stream 64 MiB": single, "1024 streams, 1 GiB": multi} {
		t.Run(name, func(t *testing.T) {
			require.Less(t, len(bomb), 2<<20, "the bomb must be small")
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			out, err := Decode(bomb)
			runtime.ReadMemStats(&after)
			require.Nil(t, out)
			requireKind(t, err, KindTooLarge)
			allocated := after.TotalAlloc - before.TotalAlloc
			// The growing buffer allocates about 2x the cap in total
			// (doubling up to MaxStateBytes+1), never the expansion.
			require.Less(t, allocated, uint64(5*MaxStateBytes/2), "allocated %d bytes", allocated)
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

func TestReadCappedNeverExceedsTheCap(t *testing.T) {
	for _, n := range []int{0, 1, 99, 100, 101, 100000} {
		b, err := readCapped(bytes.NewReader(make([]byte, n)), 100)
		if n > 100 {
			requireKind(t, err, KindTooLarge)
			continue
		}
		require.NoError(t, err)
		require.Len(t, b, n)
		require.LessOrEqual(t, cap(b), 101)
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

func TestAssembleSplitState(t *testing.T) {
	const suffix = "net-cluster"
	compressed, _ := bigState(t)
	parts := split(suffix, compressed)
	require.Len(t, parts, 3)
	require.True(t, MaybeSplit(&parts[0]))
	require.False(t, MaybeSplit(&parts[2]))

	// Any order, with a decoy carrying the labels under another name, and a
	// stale part beyond the last chunk (a state that shrank).
	given := []corev1.Secret{parts[2], stateSecret("tfstate-default-net-cluster-copy", suffix, []byte("decoy")), parts[0], parts[1],
		stateSecret(PartName(suffix, 3), suffix, []byte("stale"))}
	got, err := Assemble(suffix, given)
	require.NoError(t, err)
	require.Equal(t, compressed, got)
	out, err := Decode(got)
	require.NoError(t, err)
	require.Equal(t, `"net-1"`, string(out.Values["id"]))
	require.Equal(t, []string{"pw"}, out.Sensitive)
}

func TestAssembleFailures(t *testing.T) {
	const suffix = "net-cluster"
	compressed, _ := bigState(t)
	parts := split(suffix, compressed)
	noKey := stateSecret(SecretName(suffix), suffix, nil)
	noKey.Data = nil
	partNoKey := parts[1]
	partNoKey.Data = map[string][]byte{}

	_, err := Assemble(suffix, nil)
	requireKind(t, err, KindNotFound)
	_, err = Assemble(suffix, []corev1.Secret{stateSecret("tfstate-default-other-cluster", "other-cluster", []byte("x"))})
	requireKind(t, err, KindNotFound)
	_, err = Assemble(suffix, []corev1.Secret{noKey})
	requireKind(t, err, KindNotFound)
	_, err = Assemble(suffix, []corev1.Secret{parts[0], partNoKey, parts[2]})
	requireKind(t, err, KindIncomplete)

	_, err = Assemble(suffix, []corev1.Secret{parts[0], parts[2]})
	requireKind(t, err, KindIncomplete)

	// A missing last part leaves a truncated gzip stream.
	got, err := Assemble(suffix, parts[:2])
	require.NoError(t, err)
	_, err = Decode(got)
	requireKind(t, err, KindNotGzip)

	// More chunks than MaxStateBytes allows.
	full := make([]byte, ChunkSize)
	var many []corev1.Secret
	for i := 0; i <= MaxParts; i++ {
		many = append(many, stateSecret(PartName(suffix, i), suffix, full))
	}
	_, err = Assemble(suffix, many)
	requireKind(t, err, KindTooLarge)
}

// FuzzDecode: any input gives either an *Error or outputs whose values are
// valid JSON and whose sensitive names hold no value.
func FuzzDecode(f *testing.F) {
	f.Add(tfstatetest.Gzip([]byte(appliedState)))
	f.Add(tfstatetest.Gzip([]byte(initState)))
	f.Add(tfstatetest.Gzip([]byte(`{"meta":{},"encrypted_data":"eA==","encryption_version":"v0"}`)))
	f.Add([]byte(appliedState))
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00})
	f.Add(bombSingle(f, 1<<20))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := Decode(data)
		checkResult(t, out, err)
	})
}

// FuzzDecodeJSON fuzzes the state's JSON behind a valid gzip layer.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(appliedState))
	f.Add([]byte(initState))
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":null},"b":{"sensitive":true},"c":{}}}`))
	f.Add([]byte(`{"version":4,"outputs":{"a":{"value":1e400}}}`))
	f.Add([]byte(`{"version":"4"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, err := decodeJSON(raw)
		checkResult(t, out, err)
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
