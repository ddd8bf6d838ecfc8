package bounded

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Unmarshal decodes data, one JSON document, into v once the stream check
// of l passed: size, depth, values and token lengths are checked before
// encoding/json allocates anything, so what it allocates is bounded by
// them. Its errors are *Error and never quote data: encoding/json's own
// messages may quote a number or a map key of the input.
//
// It is meant for small documents (the runner's result in a termination
// message, a variables source): data is already in memory, within
// l.MaxSize.
func Unmarshal(data []byte, v any, l Limits) error {
	l = l.norm()
	if int64(len(data)) > l.MaxSize {
		return fail(KindSize, l.MaxSize, "the JSON text is %d bytes, over the limit of %d", len(data), l.MaxSize)
	}
	d := NewDecoder(bytes.NewReader(data), l)
	if err := d.Skip(); err != nil {
		return err
	}
	if err := d.End(); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return fail(KindType, typ.Offset, "the JSON text has a value of an unexpected type at byte %d", typ.Offset)
		}
		// Valid JSON that does not fit v otherwise (an Unmarshaler's
		// error, an invalid target): say it in our words.
		return fail(KindType, -1, "the JSON text does not decode into %T", v)
	}
	return nil
}
