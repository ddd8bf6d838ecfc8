package tfstate

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// What the kubernetes backend writes (SPEC T2; docs/runtime-environment.md,
// "State in the kubernetes backend").
const (
	// DataKey is the Secret data key holding the gzip-compressed state.
	DataKey = "tfstate"
	// LabelState is "true" on every state Secret and lock Lease.
	LabelState = "tfstate"
	// LabelSuffix carries the backend's secret_suffix.
	LabelSuffix = "tfstateSecretSuffix"
	// LabelWorkspace carries the workspace name.
	LabelWorkspace = "tfstateWorkspace"
	// LabelManagedBy is app.kubernetes.io/managed-by, "terraform" (also when
	// OpenTofu writes it).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// Workspace is the only workspace captf uses.
	Workspace = "default"
	// ChunkSize is the size of every chunk but the last of a state that
	// HashiCorp Terraform split across Secrets (its defaultChunkSize).
	ChunkSize = 1 << 20
)

// Limits of SPEC T4.
const (
	// MaxStateBytes bounds the decompressed state, and the compressed input.
	MaxStateBytes = 16 << 20
	// MaxOutputsBytes bounds status.outputs as JSON, and the JSON of the
	// list of sensitive output names.
	MaxOutputsBytes = 32 << 10
	// MaxParts is the most Secrets a state of at most MaxStateBytes
	// compressed bytes can be split into.
	MaxParts = MaxStateBytes / ChunkSize
)

// SecretName is the name of the (first) state Secret of suffix, workspace
// default: tfstate-default-<suffix>.
func SecretName(suffix string) string { return "tfstate-" + Workspace + "-" + suffix }

// PartName is the name of chunk i of a split state: SecretName for 0, else
// SecretName followed by -part-<i>.
func PartName(suffix string, i int) string {
	if i == 0 {
		return SecretName(suffix)
	}
	return SecretName(suffix) + "-part-" + strconv.Itoa(i)
}

// Selector selects the state Secrets of suffix in workspace default: the
// labels every part carries.
func Selector(suffix string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelState: "true", LabelSuffix: suffix, LabelWorkspace: Workspace})
}

// MaybeSplit reports whether s, the Secret named SecretName, may be the
// first chunk of a split state: only a full chunk can be followed by more.
func MaybeSplit(s *corev1.Secret) bool {
	return s != nil && len(s.Data[DataKey]) == ChunkSize
}

// Kind classifies a failure to read outputs.
type Kind int

const (
	// KindNotFound: no state Secret, or one without the tfstate key (the
	// backend's own reading of "no state"). OutputsAvailable=False/StateNotFound.
	KindNotFound Kind = iota + 1
	// KindIncomplete: a split state lacks a part.
	KindIncomplete
	// KindNotGzip: the data is not a gzip stream, or a corrupt one.
	KindNotGzip
	// KindTooLarge: more than MaxStateBytes, compressed or decompressed.
	KindTooLarge
	// KindNotJSON: the decompressed data is not a JSON object.
	KindNotJSON
	// KindEncrypted: the state is an OpenTofu encryption envelope.
	KindEncrypted
	// KindUnsupported: a state format version other than 4.
	KindUnsupported
	// KindOutputsTooLarge: the outputs, or the sensitive names, exceed
	// MaxOutputsBytes as JSON. OutputsAvailable=False/OutputsTooLarge.
	KindOutputsTooLarge
)

// String names the kind, for logs.
func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "NotFound"
	case KindIncomplete:
		return "Incomplete"
	case KindNotGzip:
		return "NotGzip"
	case KindTooLarge:
		return "TooLarge"
	case KindNotJSON:
		return "NotJSON"
	case KindEncrypted:
		return "Encrypted"
	case KindUnsupported:
		return "Unsupported"
	case KindOutputsTooLarge:
		return "OutputsTooLarge"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is every failure of this package. Message never quotes the state.
type Error struct {
	Kind    Kind
	Message string
}

func (e *Error) Error() string { return e.Message }

func fail(k Kind, format string, args ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the Kind of err, 0 when err is not an *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// Assemble returns the compressed state of suffix from secrets, which hold
// the state Secret and, for a split state, its parts (any order; Secrets
// with other names are ignored, a tenant's copies included). It follows the
// chunks from PartName(suffix, 0) while each is a full ChunkSize, so a
// stale part left after the state shrank is never read.
func Assemble(suffix string, secrets []corev1.Secret) ([]byte, error) {
	byName := make(map[string]*corev1.Secret, len(secrets))
	for i := range secrets {
		byName[secrets[i].Name] = &secrets[i]
	}
	var out []byte
	for i := 0; ; i++ {
		name := PartName(suffix, i)
		s, ok := byName[name]
		if !ok && i == 0 {
			return nil, fail(KindNotFound, "Secret %s does not exist", name)
		}
		if !ok {
			if _, later := byName[PartName(suffix, i+1)]; later {
				return nil, fail(KindIncomplete, "split state: part Secret %s is missing", name)
			}
			// A state of an exact multiple of ChunkSize ends here; a
			// missing last part shows as a truncated gzip stream.
			return out, nil
		}
		chunk, ok := s.Data[DataKey]
		if !ok {
			if i == 0 {
				return nil, fail(KindNotFound, "Secret %s has no %q key", name, DataKey)
			}
			return nil, fail(KindIncomplete, "split state: part Secret %s has no %q key", name, DataKey)
		}
		if i >= MaxParts || len(out)+len(chunk) > MaxStateBytes {
			return nil, fail(KindTooLarge, "the compressed state exceeds %d bytes", MaxStateBytes)
		}
		out = append(out, chunk...)
		if len(chunk) != ChunkSize {
			return out, nil
		}
	}
}

// Outputs are the outputs of a state: the values of the non-sensitive ones,
// and only the names of the sensitive ones.
type Outputs struct {
	// Values maps each non-sensitive output's name to its value as
	// canonical JSON (compact, object keys sorted, numbers as written).
	Values map[string]json.RawMessage
	// Sensitive are the names of the sensitive outputs, sorted.
	Sensitive []string
}

// stateFile is what Decode reads of a state file; everything else
// (resources, check results) is skipped.
type stateFile struct {
	Version *int                   `json:"version"`
	Outputs map[string]stateOutput `json:"outputs"`
	// OpenTofu's state encryption envelope: {"meta", "encrypted_data",
	// "encryption_version"}.
	EncryptedData     json.RawMessage `json:"encrypted_data"`
	EncryptionVersion json.RawMessage `json:"encryption_version"`
}

type stateOutput struct {
	Value     json.RawMessage `json:"value"`
	Sensitive bool            `json:"sensitive"`
}

// Decode decompresses a state (at most MaxStateBytes, whatever the input
// expands to) and returns its outputs.
func Decode(compressed []byte) (*Outputs, error) {
	if len(compressed) > MaxStateBytes {
		return nil, fail(KindTooLarge, "the compressed state exceeds %d bytes", MaxStateBytes)
	}
	zr, err := gzip.NewReader(bytes.NewReader(compressed))
	if err != nil {
		if len(bytes.TrimSpace(compressed)) > 0 && bytes.TrimSpace(compressed)[0] == '{' {
			return nil, fail(KindNotGzip, "the state is not gzip-compressed (it looks like plain JSON; the kubernetes backend always compresses)")
		}
		return nil, fail(KindNotGzip, "the state is not gzip-compressed (%d bytes without a gzip header)", len(compressed))
	}
	raw, err := readCapped(zr, MaxStateBytes)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		// gzip and flate errors carry offsets and checksums, never data;
		// still, say it in our words.
		return nil, fail(KindNotGzip, "the state is a corrupt or truncated gzip stream (%s)", gzipProblem(err))
	}
	return decodeJSON(raw)
}

// gzipProblem names a decompression failure without quoting anything.
func gzipProblem(err error) string {
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end"
	case errors.Is(err, gzip.ErrChecksum):
		return "checksum mismatch"
	case errors.Is(err, gzip.ErrHeader):
		return "invalid header after the first stream"
	}
	return "invalid compressed data"
}

// readCapped reads r to its end, failing with KindTooLarge past limit
// bytes. It never holds a buffer larger than limit+1 bytes: a
// decompression bomb costs at most that, not what it would expand to.
func readCapped(r io.Reader, limit int) ([]byte, error) {
	lr := io.LimitReader(r, int64(limit)+1)
	buf := make([]byte, 0, min(limit+1, 32<<10))
	for {
		if len(buf) == cap(buf) {
			// Double, but jump straight to limit+1 rather than to a size
			// just short of it.
			next := 2 * cap(buf)
			if next >= limit {
				next = limit + 1
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, fail(KindTooLarge, "the decompressed state exceeds %d bytes", limit)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeJSON reads the outputs of a decompressed state.
func decodeJSON(raw []byte) (*Outputs, error) {
	var st stateFile
	if err := json.Unmarshal(raw, &st); err != nil {
		// Never the decoder's message: it can quote a character or a
		// number of the input (X1).
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, fail(KindNotJSON, "the decompressed state is not valid JSON (syntax error at byte %d of %d)", syn.Offset, len(raw))
		case errors.As(err, &typ):
			return nil, fail(KindNotJSON, "the decompressed state is not a Terraform state (unexpected JSON type at byte %d)", typ.Offset)
		}
		return nil, fail(KindNotJSON, "the decompressed state is not a Terraform state JSON document")
	}
	if st.EncryptedData != nil || st.EncryptionVersion != nil {
		return nil, fail(KindEncrypted, "the state is encrypted (OpenTofu state encryption): its outputs cannot be read")
	}
	if st.Version == nil {
		return nil, fail(KindNotJSON, "the decompressed state is not a Terraform state (no format version)")
	}
	if *st.Version != 4 {
		return nil, fail(KindUnsupported, "state format version %d is not supported (only 4)", *st.Version)
	}
	out := &Outputs{Values: map[string]json.RawMessage{}, Sensitive: []string{}}
	for name, o := range st.Outputs {
		if o.Sensitive {
			out.Sensitive = append(out.Sensitive, name)
			continue
		}
		v, err := canonical(o.Value)
		if err != nil {
			return nil, fail(KindNotJSON, "the value of output %q is not valid JSON", name)
		}
		out.Values[name] = v
	}
	sort.Strings(out.Sensitive)
	return out, nil
}

// canonical re-encodes a JSON value compactly with sorted object keys and
// numbers as written, as the API server stores it, without HTML escaping.
// A missing value is null.
func canonical(v json.RawMessage) (json.RawMessage, error) {
	if len(v) == 0 {
		return json.RawMessage("null"), nil
	}
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if err := d.Decode(&x); err != nil {
		return nil, err
	}
	return encode(x)
}

func encode(x any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Encode returns the JSON object of the non-sensitive outputs for
// status.outputs, failing with KindOutputsTooLarge when it, or the JSON of
// the sensitive names, exceeds MaxOutputsBytes.
func (o *Outputs) Encode() ([]byte, error) {
	values := o.Values
	if values == nil {
		values = map[string]json.RawMessage{}
	}
	b, err := encode(values)
	if err != nil {
		return nil, fail(KindNotJSON, "the outputs cannot be encoded as JSON")
	}
	if len(b) > MaxOutputsBytes {
		return nil, fail(KindOutputsTooLarge, "the non-sensitive outputs are %d bytes as JSON, over the limit of %d", len(b), MaxOutputsBytes)
	}
	names, _ := json.Marshal(o.Sensitive)
	if len(names) > MaxOutputsBytes {
		return nil, fail(KindOutputsTooLarge, "the names of the %d sensitive outputs are %d bytes as JSON, over the limit of %d", len(o.Sensitive), len(names), MaxOutputsBytes)
	}
	return b, nil
}
