package bounded

import (
	"errors"
	"fmt"
	"strconv"
)

// Kind says what stopped a read.
type Kind int

const (
	// KindInput: more input than Limits.MaxInput (compressed bytes, or a
	// response body over its budget).
	KindInput Kind = iota + 1
	// KindSize: more output than Limits.MaxSize (decompressed bytes, or
	// JSON text).
	KindSize
	// KindDepth: JSON nested deeper than Limits.MaxDepth.
	KindDepth
	// KindValues: more JSON values than Limits.MaxValues.
	KindValues
	// KindToken: a JSON string or number longer than Limits.MaxToken bytes.
	KindToken
	// KindCorrupt: not a gzip stream, or a corrupt or truncated one.
	KindCorrupt
	// KindSyntax: not valid JSON.
	KindSyntax
	// KindType: valid JSON of a type the reader did not expect.
	KindType
)

// String names the kind, for logs.
func (k Kind) String() string {
	switch k {
	case KindInput:
		return "Input"
	case KindSize:
		return "Size"
	case KindDepth:
		return "Depth"
	case KindValues:
		return "Values"
	case KindToken:
		return "Token"
	case KindCorrupt:
		return "Corrupt"
	case KindSyntax:
		return "Syntax"
	case KindType:
		return "Type"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Limit reports whether k is a limit that stopped a read (the input may be
// well formed), rather than malformed input.
func (k Kind) Limit() bool { return k >= KindInput && k <= KindToken }

// Error is every failure of this package. Message is a fixed text with
// sizes and offsets: it never quotes the input (SPEC X1).
type Error struct {
	Kind Kind
	// Offset is the byte offset in the decoded stream (the JSON text)
	// where the read stopped, -1 when there is none.
	Offset  int64
	Message string
}

func (e *Error) Error() string { return e.Message }

func fail(k Kind, offset int64, format string, args ...any) *Error {
	return &Error{Kind: k, Offset: offset, Message: fmt.Sprintf(format, args...)}
}

// KindOf returns the Kind of err, 0 when err is not (and wraps no) *Error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// As returns the *Error err is or wraps, nil when there is none.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
