package bounded

import "io"

// bufSize is the decoder's read buffer: all it holds of a skipped value.
const bufSize = 8 << 10

// Decoder walks one JSON document from a stream within Limits. Its caller
// reads the top-level value with one of Object, Array, Skip, Capture (and
// Peek to choose), then calls End. Object and Array call back for each
// member or element, which the callback must read the same way: the walk
// keeps what the callbacks keep and nothing else.
//
// The first error sticks: every later call returns it.
type Decoder struct {
	r   io.Reader
	l   Limits
	buf []byte
	// pos and n delimit the unread bytes of buf; off is the stream offset
	// of buf[0].
	pos, n int
	off    int64
	// pending is the source's error (io.EOF included), returned once buf
	// is used up.
	pending error
	err     error
	depth   int
	values  int
	// capture, when not nil, receives the significant bytes consumed.
	capture *capture
}

// capture collects a value as compact JSON up to max bytes.
type capture struct {
	buf  []byte
	max  int
	over bool
}

func (c *capture) add(b ...byte) {
	if c.over {
		return
	}
	if len(c.buf)+len(b) > c.max {
		c.over = true
		c.buf = nil
		return
	}
	c.buf = append(c.buf, b...)
}

// NewDecoder returns a decoder of the JSON document r yields.
func NewDecoder(r io.Reader, l Limits) *Decoder {
	l = l.norm()
	return &Decoder{r: r, l: l, buf: make([]byte, min(int64(bufSize), l.MaxSize+1))}
}

// Offset is the number of bytes of JSON text consumed so far.
func (d *Decoder) Offset() int64 { return d.off + int64(d.pos) }

func (d *Decoder) syntax(what string) error {
	if d.err == nil {
		d.err = fail(KindSyntax, d.Offset(), "invalid JSON at byte %d: %s", d.Offset(), what)
	}
	return d.err
}

// fill reads more of the source into buf once it is used up; false when
// there is nothing more (d.err holds a failure; at the end of input it is
// nil).
func (d *Decoder) fill() bool {
	for d.pos == d.n {
		if d.err != nil {
			return false
		}
		if d.pending != nil {
			if d.pending != io.EOF {
				d.err = d.pending
			}
			return false
		}
		d.off += int64(d.n)
		d.pos, d.n = 0, 0
		m, err := d.r.Read(d.buf)
		d.n = m
		if d.off+int64(m) > d.l.MaxSize {
			// What lies within the limit is read; the limit is an error
			// only when the value goes on past it.
			d.n = int(d.l.MaxSize - d.off)
			err = fail(KindSize, d.l.MaxSize, "the JSON text exceeds %d bytes", d.l.MaxSize)
		}
		if err != nil {
			d.pending = err
		}
	}
	return true
}

// peek returns the next byte without consuming it; false at the end of
// input or on an error.
func (d *Decoder) peek() (byte, bool) {
	if d.pos == d.n && !d.fill() {
		return 0, false
	}
	return d.buf[d.pos], true
}

// take consumes the byte peek returned, adding it to a capture.
func (d *Decoder) take() {
	if d.capture != nil {
		d.capture.add(d.buf[d.pos])
	}
	d.pos++
}

// space skips whitespace and returns the next byte, unconsumed.
func (d *Decoder) space() (byte, bool) {
	for {
		c, ok := d.peek()
		if !ok {
			return 0, false
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return c, true
		}
	}
}

// next returns the next significant byte, or fails naming what was
// expected at the end of input.
func (d *Decoder) next(expected string) (byte, error) {
	c, ok := d.space()
	if !ok {
		if d.err != nil {
			return 0, d.err
		}
		return 0, d.syntax("unexpected end of input, expected " + expected)
	}
	return c, nil
}

func typeOf(c byte) Type {
	switch {
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == '"':
		return String
	case c == '-' || c >= '0' && c <= '9':
		return Number
	case c == 't' || c == 'f':
		return Bool
	case c == 'n':
		return Null
	}
	return 0
}

// Peek returns the type of the next value without reading it.
func (d *Decoder) Peek() (Type, error) {
	if d.err != nil {
		return 0, d.err
	}
	c, err := d.next("a value")
	if err != nil {
		return 0, err
	}
	t := typeOf(c)
	if t == 0 {
		return 0, d.syntax("expected a value")
	}
	return t, nil
}

// Skip reads the next value, keeping nothing of it.
func (d *Decoder) Skip() error {
	if d.err != nil {
		return d.err
	}
	return d.value(nil)
}

// Capture reads the next value and returns it as compact JSON (whitespace
// between tokens dropped; strings and numbers as written) when that is at
// most max bytes; a longer value is read to its end and dropped (ok
// false): the decoder never holds more than max bytes of it.
func (d *Decoder) Capture(max int) (raw []byte, ok bool, err error) {
	if d.err != nil {
		return nil, false, d.err
	}
	c := &capture{max: max}
	d.capture = c
	err = d.value(nil)
	d.capture = nil
	if err != nil {
		return nil, false, err
	}
	if c.over {
		return nil, false, nil
	}
	return c.buf, true, nil
}

// Object reads the next value, which must be an object (else KindType,
// with nothing read), calling member for each member with its key (at most
// MaxKey bytes as written, else KindToken); member must read the member's
// value. An error member returns stops the walk: the decoder is then in
// the middle of the object.
func (d *Decoder) Object(member func(key string) error) error {
	if t, err := d.Peek(); err != nil {
		return err
	} else if t != Object {
		return fail(KindType, d.Offset(), "expected a JSON object at byte %d, found %s", d.Offset(), t)
	}
	return d.value(member)
}

// Array reads the next value, which must be an array (else KindType, with
// nothing read), calling elem for each element; elem must read it.
func (d *Decoder) Array(elem func() error) error {
	if t, err := d.Peek(); err != nil {
		return err
	} else if t != Array {
		return fail(KindType, d.Offset(), "expected a JSON array at byte %d, found %s", d.Offset(), t)
	}
	if err := d.count(); err != nil {
		return err
	}
	return d.array(elem)
}

// End reads the rest of the input, which must be whitespace only: a
// source that checks its data at its end (a gzip checksum) is read to it.
func (d *Decoder) End() error {
	if d.err != nil {
		return d.err
	}
	if _, ok := d.space(); ok {
		return d.syntax("data after the JSON value")
	}
	return d.err
}

// count counts one value against MaxValues.
func (d *Decoder) count() error {
	d.values++
	if d.values > d.l.MaxValues {
		d.err = fail(KindValues, d.Offset(), "the JSON text has more than %d values", d.l.MaxValues)
		return d.err
	}
	return nil
}

// value reads one value; member, when not nil, is called for the members
// of an object (Object).
func (d *Decoder) value(member func(key string) error) error {
	c, err := d.next("a value")
	if err != nil {
		return err
	}
	if err := d.count(); err != nil {
		return err
	}
	switch typeOf(c) {
	case Object:
		return d.object(member)
	case Array:
		return d.array(nil)
	case String:
		return d.str()
	case Number:
		return d.number()
	case Bool:
		if c == 't' {
			return d.literal("true")
		}
		return d.literal("false")
	case Null:
		return d.literal("null")
	}
	return d.syntax("expected a value")
}

func (d *Decoder) open() error {
	d.take()
	d.depth++
	if d.depth > d.l.MaxDepth {
		d.err = fail(KindDepth, d.Offset(), "the JSON text nests deeper than %d levels", d.l.MaxDepth)
		return d.err
	}
	return nil
}

func (d *Decoder) object(member func(key string) error) error {
	if err := d.open(); err != nil {
		return err
	}
	c, err := d.next("a key or '}'")
	if err != nil {
		return err
	}
	if c == '}' {
		d.take()
		d.depth--
		return nil
	}
	for {
		if c != '"' {
			return d.syntax("expected a string key")
		}
		var key string
		if member != nil {
			if key, err = d.key(); err != nil {
				return err
			}
		} else if err := d.str(); err != nil {
			return err
		}
		if c, err = d.next("':'"); err != nil {
			return err
		}
		if c != ':' {
			return d.syntax("expected ':' after a key")
		}
		d.take()
		if member != nil {
			err = member(key)
			if err == nil {
				err = d.err
			}
		} else {
			err = d.value(nil)
		}
		if err != nil {
			return err
		}
		if c, err = d.next("',' or '}'"); err != nil {
			return err
		}
		switch c {
		case ',':
			d.take()
			if c, err = d.next("a key"); err != nil {
				return err
			}
		case '}':
			d.take()
			d.depth--
			return nil
		default:
			return d.syntax("expected ',' or '}' after an object member")
		}
	}
}

func (d *Decoder) array(elem func() error) error {
	if err := d.open(); err != nil {
		return err
	}
	c, err := d.next("a value or ']'")
	if err != nil {
		return err
	}
	if c == ']' {
		d.take()
		d.depth--
		return nil
	}
	for {
		if elem != nil {
			err = elem()
			if err == nil {
				err = d.err
			}
		} else {
			err = d.value(nil)
		}
		if err != nil {
			return err
		}
		if c, err = d.next("',' or ']'"); err != nil {
			return err
		}
		switch c {
		case ',':
			d.take()
		case ']':
			d.take()
			d.depth--
			return nil
		default:
			return d.syntax("expected ',' or ']' after an array element")
		}
	}
}
