package tfstate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/captf/captf/pkg/bounded"
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

// Limits of SPEC T4 and B10.
const (
	// MaxStateBytes bounds the decompressed state, and the compressed input.
	MaxStateBytes = 16 << 20
	// MaxOutputsBytes bounds status.outputs as JSON, and the JSON of the
	// list of sensitive output names.
	MaxOutputsBytes = 32 << 10
	// MaxParts is the most Secrets a state of at most MaxStateBytes
	// compressed bytes can be split into.
	MaxParts = MaxStateBytes / ChunkSize
	// MaxDepth bounds the nesting of the state's JSON: far deeper than any
	// state Terraform writes (a resource's attributes nest a few levels per
	// block), and free to skip (the decoder keeps one counter).
	MaxDepth = 512
	// MaxValues bounds the JSON values of the state: 4M, a quarter of a
	// value per byte of MaxStateBytes; Terraform's indented JSON spends far
	// more bytes per value.
	MaxValues = 1 << 22
	// MaxKey bounds the keys the decoder holds: the state's top-level keys,
	// output names and the keys of an output. A longer one is no state
	// Terraform writes.
	MaxKey = 4 << 10
	// maxCaptured bounds the output values and names the decoder holds, as
	// compact JSON: twice MaxOutputsBytes, so that Encode, not the decoder,
	// decides T4's cap for anything near it.
	maxCaptured = 2 * MaxOutputsBytes
)

// limits are the bounds of the state's decoding (SPEC B10): every string
// may be as long as the state (a resource attribute may hold a file),
// since a skipped string costs nothing.
var limits = bounded.Limits{MaxInput: MaxStateBytes, MaxSize: MaxStateBytes, MaxDepth: MaxDepth,
	MaxValues: MaxValues, MaxToken: MaxStateBytes, MaxKey: MaxKey}

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

// IsStateName reports whether name is one the backend gives a Secret of
// the state of suffix: SecretName(suffix), or PartName(suffix, i) for a
// part i >= 1 (SPEC T2, B15). The state clean-up deletes no other Secret,
// whatever labels it carries.
func IsStateName(suffix, name string) bool {
	base := SecretName(suffix)
	if name == base {
		return true
	}
	i, ok := strings.CutPrefix(name, base+"-part-")
	if !ok || i == "" || i[0] == '0' || len(i) > 9 {
		return false
	}
	for _, c := range []byte(i) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
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
	// KindTooLarge: more than MaxStateBytes, compressed or decompressed,
	// or past another limit of the decoder (MaxDepth, MaxValues, MaxKey),
	// or a state Secret over the budget of one uncached read.
	KindTooLarge
	// KindNotJSON: the decompressed data is not a JSON object.
	KindNotJSON
	// KindEncrypted: the state is an OpenTofu encryption envelope.
	KindEncrypted
	// KindUnsupported: a state format version other than 4.
	KindUnsupported
	// KindOutputsTooLarge: the outputs, or the sensitive names, exceed
	// MaxOutputsBytes as JSON (Encode), or the decoder's bound on what it
	// holds of them (Read). OutputsAvailable=False/OutputsTooLarge.
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
	// Serial and HasSerial are the state's serial, set on a
	// KindOutputsTooLarge error of Read when the state has one.
	Serial    int64
	HasSerial bool
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

// SerialOf returns the state serial of what Read returned: out's, or the
// one a KindOutputsTooLarge error carries.
func SerialOf(out *Outputs, err error) (int64, bool) {
	if out != nil {
		return out.Serial, out.HasSerial
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Serial, e.HasSerial
	}
	return 0, false
}

// Outputs are the outputs of a state: the values of the non-sensitive ones,
// and only the names of the sensitive ones.
type Outputs struct {
	// Values maps each non-sensitive output's name to its value as
	// canonical JSON (compact, object keys sorted, numbers as written).
	Values map[string]json.RawMessage
	// Sensitive are the names of the sensitive outputs, sorted.
	Sensitive []string
	// Kept are the canonical values of the non-sensitive outputs that
	// ReadKeeping's keep names and that are within their bound, and
	// KeptTooLarge (sorted) those over it; nil from Read.
	Kept         map[string]json.RawMessage
	KeptTooLarge []string
	// Serial is the state's serial, which Terraform increments with each
	// change it writes; HasSerial says whether the state has one (a
	// non-negative integer). SPEC O5 backs up each new serial.
	Serial    int64
	HasSerial bool
}

// Decode returns the outputs of a compressed state (see Read).
func Decode(compressed []byte) (*Outputs, error) {
	return Read(bytes.NewReader(compressed))
}

// Read returns the outputs of the compressed state r yields, bounded while
// it reads (SPEC B10): at most MaxStateBytes in and out of the
// decompressor, MaxDepth, MaxValues and MaxKey on the JSON, which is walked
// as a stream. It keeps the format version, whether the state is an
// encryption envelope, and the outputs: each value as compact JSON while it
// is read (at most maxCaptured bytes of values and names in all), dropped
// once its output proves sensitive (Terraform writes "sensitive" after
// "value"). Everything else (resources, check results) is validated and
// skipped, never held. The values kept are then made canonical.
//
// Errors of r that are not this package's or bounded's pass through (an
// API error while a part is fetched). A KindOutputsTooLarge error carries
// the state's serial (SerialOf): the state is sound, only its outputs are
// too large to publish, and a backup of it is still due (O5).
func Read(r io.Reader) (*Outputs, error) {
	return ReadKeeping(r, nil)
}

// Keep names outputs to read on their own, each with the bound of its
// value as compact JSON, in bytes (SPEC K7: the contract outputs, whose
// bounds are theirs, not status.outputs' 32 KiB).
type Keep map[string]int

// maxKept bounds the sum of a Keep's bounds (B10): what the walk may hold
// beside maxCaptured.
const maxKept = 4 << 20

// ReadKeeping is Read, and also reads the outputs keep names on their own
// (Outputs.Kept, Outputs.KeptTooLarge), each within its bound, whatever
// the size of the others. When the others are over the decoder's budget,
// it returns both the KindOutputsTooLarge error and the Outputs holding
// only what was kept (and the serial).
func ReadKeeping(r io.Reader, keep Keep) (*Outputs, error) {
	total := 0
	for _, b := range keep {
		total += b
	}
	if total > maxKept {
		return nil, fmt.Errorf("tfstate: outputs kept on their own may hold %d bytes, more than %d", total, maxKept)
	}
	br := bufio.NewReaderSize(r, 512)
	head, _ := br.Peek(64)
	zr, err := bounded.Gunzip(br, limits)
	if err != nil {
		if bounded.KindOf(err) == bounded.KindCorrupt {
			if t := bytes.TrimLeft(head, " \t\r\n"); len(t) > 0 && t[0] == '{' {
				return nil, fail(KindNotGzip, "the state is not gzip-compressed (it looks like plain JSON; the kubernetes backend always compresses)")
			}
			return nil, fail(KindNotGzip, "the state is not gzip-compressed (no gzip header)")
		}
		return nil, fromBounded(err)
	}
	return readJSON(zr, keep)
}

// readJSON reads the outputs of a decompressed state.
func readJSON(r io.Reader, keep Keep) (*Outputs, error) {
	w := &walk{d: bounded.NewDecoder(r, limits), keep: keep}
	if keep != nil {
		w.kept, w.keptTooLarge = map[string]json.RawMessage{}, map[string]bool{}
	}
	if err := w.state(); err != nil {
		return nil, fromBounded(err)
	}
	return w.result()
}

// fromBounded says a bounded error in this package's kinds; other errors
// pass through.
func fromBounded(err error) error {
	be := bounded.As(err)
	if be == nil {
		return err
	}
	switch {
	case be.Kind.Limit():
		return fail(KindTooLarge, "the state is too large: %s", be.Message)
	case be.Kind == bounded.KindCorrupt:
		return fail(KindNotGzip, "the state is not a valid gzip stream: %s", be.Message)
	}
	return fail(KindNotJSON, "the decompressed state is not a Terraform state JSON document: %s", be.Message)
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

// EncodeKept returns the JSON object of the kept outputs (Outputs.Kept),
// encoded as Encode encodes status.outputs.
func (o *Outputs) EncodeKept() ([]byte, error) {
	kept := o.Kept
	if kept == nil {
		kept = map[string]json.RawMessage{}
	}
	return encode(kept)
}
