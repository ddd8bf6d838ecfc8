package tfstate

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	"github.com/captf/captf/pkg/bounded"
)

// walk is what Read keeps of a state while it reads it.
type walk struct {
	d         *bounded.Decoder
	version   *int64
	serial    *int64
	encrypted bool
	outputs   map[string]output
	// held counts the bytes of output values and names held, against
	// maxCaptured; over is set once a value or a name did not fit.
	held int
	over bool
	// problem is the first value of an unexpected type: reported once the
	// document proved well formed and within the limits, as
	// encoding/json would.
	problem *Error
	// keep are the outputs read on their own, each within its bound
	// (ReadKeeping), whatever the budget of the others; kept holds their
	// non-sensitive values within it, keptTooLarge those over it.
	keep         Keep
	kept         map[string]json.RawMessage
	keptTooLarge map[string]bool
}

type output struct {
	value     json.RawMessage
	sensitive bool
	// cut says the value was not captured whole (over the bound of the
	// capture).
	cut bool
}

func (w *walk) typeProblem(what string) error {
	if w.problem == nil {
		w.problem = fail(KindNotJSON, "the decompressed state is not a Terraform state (%s at byte %d)", what, w.d.Offset())
	}
	return w.d.Skip()
}

// state reads the document. Keys match as encoding/json matches them
// (case-insensitively, the last one wins).
func (w *walk) state() error {
	if t, err := w.d.Peek(); err != nil {
		return err
	} else if t != bounded.Object {
		// Not a state, whatever follows: stop reading.
		return fail(KindNotJSON, "the decompressed state is not a Terraform state (a JSON %s, not an object)", t)
	}
	err := w.d.Object(func(key string) error {
		switch {
		case strings.EqualFold(key, "version"):
			return w.readVersion()
		case strings.EqualFold(key, "outputs"):
			return w.readOutputs()
		case strings.EqualFold(key, "serial"):
			return w.readSerial()
		case strings.EqualFold(key, "encrypted_data"), strings.EqualFold(key, "encryption_version"):
			// OpenTofu's state encryption envelope: {"meta",
			// "encrypted_data", "encryption_version"}.
			w.encrypted = true
		}
		return w.d.Skip()
	})
	if err != nil {
		return err
	}
	return w.d.End()
}

func (w *walk) readVersion() error {
	t, err := w.d.Peek()
	switch {
	case err != nil:
		return err
	case t == bounded.Null:
		w.version = nil
		return w.d.Skip()
	case t != bounded.Number:
		return w.typeProblem("a format version that is not a number")
	}
	raw, ok, err := w.d.Capture(32)
	if err != nil {
		return err
	}
	v, perr := strconv.ParseInt(string(raw), 10, strconv.IntSize)
	if !ok || perr != nil {
		if w.problem == nil {
			w.problem = fail(KindNotJSON, "the decompressed state is not a Terraform state (a format version that is not an integer)")
		}
		return nil
	}
	w.version = &v
	return nil
}

// readSerial keeps the state's serial when it is a non-negative integer
// that fits an int64; anything else is no serial (not an error: the
// outputs do not depend on it).
func (w *walk) readSerial() error {
	w.serial = nil
	if t, err := w.d.Peek(); err != nil || t != bounded.Number {
		if err != nil {
			return err
		}
		return w.d.Skip()
	}
	raw, ok, err := w.d.Capture(32)
	if err != nil || !ok {
		return err
	}
	if v, perr := strconv.ParseInt(string(raw), 10, 64); perr == nil && v >= 0 {
		w.serial = &v
	}
	return nil
}

func (w *walk) readOutputs() error {
	t, err := w.d.Peek()
	switch {
	case err != nil:
		return err
	case t == bounded.Null:
		w.outputs = nil
		return w.d.Skip()
	case t != bounded.Object:
		return w.typeProblem("outputs that are not an object")
	}
	if w.outputs == nil {
		w.outputs = map[string]output{}
	}
	return w.d.Object(func(name string) error {
		w.hold(len(name) + 4)
		o, err := w.readOutput(name)
		if err != nil {
			return err
		}
		w.keepOutput(name, o)
		if w.over {
			return nil
		}
		if !o.sensitive {
			w.hold(len(o.value))
		}
		if !w.over {
			w.outputs[name] = o
		}
		return nil
	})
}

// hold counts n more bytes held; past maxCaptured it sets over, and the
// walk keeps nothing more (the result is KindOutputsTooLarge).
func (w *walk) hold(n int) {
	w.held += n
	if w.held > maxCaptured {
		w.over = true
		w.outputs = nil
	}
}

// keepOutput records output name when it is one of w.keep: its value
// when it is not sensitive and within its bound, else that it is over
// (the last one of a name wins, as in encoding/json).
func (w *walk) keepOutput(name string, o output) {
	bound, ok := w.keep[name]
	if !ok {
		return
	}
	delete(w.kept, name)
	delete(w.keptTooLarge, name)
	switch {
	case o.sensitive:
	case o.cut || len(o.value) > bound:
		w.keptTooLarge[name] = true
	default:
		w.kept[name] = o.value
	}
}

// readOutput reads one output: {"value": ..., "type": ..., "sensitive": bool}.
// The value of an output w.keep names is captured up to its own bound
// too, even once the others' budget is spent.
func (w *walk) readOutput(name string) (output, error) {
	var o output
	t, err := w.d.Peek()
	switch {
	case err != nil:
		return o, err
	case t == bounded.Null:
		return o, w.d.Skip()
	case t != bounded.Object:
		return o, w.typeProblem("an output that is not an object")
	}
	overflow := false
	err = w.d.Object(func(key string) error {
		switch {
		case strings.EqualFold(key, "value"):
			// What is left of the budget: a value that does not fit is
			// dropped, which is no loss if the output is sensitive.
			budget := max(0, maxCaptured-w.held)
			bound, keep := w.keep[name]
			raw, ok, err := w.d.Capture(max(budget, bound+1))
			o.value, o.cut = raw, !ok
			overflow = !ok || len(raw) > budget
			if overflow && !keep {
				o.value = nil
			}
			return err
		case strings.EqualFold(key, "sensitive"):
			t, err := w.d.Peek()
			switch {
			case err != nil:
				return err
			case t == bounded.Null:
				return w.d.Skip() // as encoding/json: null leaves a bool as it is
			case t != bounded.Bool:
				return w.typeProblem("an output's sensitive flag that is not a boolean")
			}
			raw, _, err := w.d.Capture(5)
			o.sensitive = string(raw) == "true"
			return err
		}
		return w.d.Skip()
	})
	if o.sensitive {
		o.value = nil
	} else if overflow {
		w.hold(maxCaptured + 1)
	}
	return o, err
}

// keptResult is what the walk kept of the outputs w.keep names.
func (w *walk) keptResult(out *Outputs) error {
	if w.keep == nil {
		return nil
	}
	out.Kept = map[string]json.RawMessage{}
	for name, v := range w.kept {
		c, err := canonical(v)
		if err != nil {
			return fail(KindNotJSON, "the value of output %q is not valid JSON", name)
		}
		out.Kept[name] = c
	}
	for name := range w.keptTooLarge {
		out.KeptTooLarge = append(out.KeptTooLarge, name)
	}
	sort.Strings(out.KeptTooLarge)
	return nil
}

// result judges what the walk kept, then makes the values canonical.
func (w *walk) result() (*Outputs, error) {
	switch {
	case w.problem != nil:
		return nil, w.problem
	case w.encrypted:
		return nil, fail(KindEncrypted, "the state is encrypted (OpenTofu state encryption): its outputs cannot be read")
	case w.version == nil:
		return nil, fail(KindNotJSON, "the decompressed state is not a Terraform state (no format version)")
	case *w.version != 4:
		return nil, fail(KindUnsupported, "state format version %d is not supported (only 4)", *w.version)
	case w.over:
		e := fail(KindOutputsTooLarge, "the outputs exceed %d bytes as JSON while they are read, over the limit of %d for status.outputs", maxCaptured, MaxOutputsBytes)
		if w.serial != nil {
			e.Serial, e.HasSerial = *w.serial, true
		}
		if w.keep == nil {
			return nil, e
		}
		// The outputs kept on their own are read all the same.
		out := &Outputs{Serial: e.Serial, HasSerial: e.HasSerial}
		if err := w.keptResult(out); err != nil {
			return nil, err
		}
		return out, e
	}
	out := &Outputs{Values: map[string]json.RawMessage{}, Sensitive: []string{}}
	if w.serial != nil {
		out.Serial, out.HasSerial = *w.serial, true
	}
	if err := w.keptResult(out); err != nil {
		return nil, err
	}
	for name, o := range w.outputs {
		if o.sensitive {
			out.Sensitive = append(out.Sensitive, name)
			continue
		}
		v, err := canonical(o.value)
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
