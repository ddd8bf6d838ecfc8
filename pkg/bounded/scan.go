package bounded

import "encoding/json"

// The scanner of Decoder: the tokens inside a value (keys, strings,
// numbers and literals), each read byte by byte within the Limits.

// key reads an object key and returns it unescaped; it holds at most
// MaxKey bytes of it.
func (d *Decoder) key() (string, error) {
	outer := d.capture
	c := &capture{max: d.l.MaxKey + 2}
	d.capture = c
	err := d.str()
	d.capture = outer
	if err != nil {
		return "", err
	}
	if c.over {
		d.err = fail(KindToken, d.Offset(), "an object key before byte %d is longer than %d bytes", d.Offset(), d.l.MaxKey)
		return "", d.err
	}
	if outer != nil {
		outer.add(c.buf...)
	}
	var s string
	if err := json.Unmarshal(c.buf, &s); err != nil {
		// d.str validated it; not reached.
		return "", d.syntax("invalid string")
	}
	return s, nil
}

func (d *Decoder) tooLong(what string) error {
	d.err = fail(KindToken, d.Offset(), "a JSON %s at byte %d is longer than %d bytes", what, d.Offset(), d.l.MaxToken)
	return d.err
}

// str reads a string, validating its escapes and counting its length.
func (d *Decoder) str() error {
	d.take() // the opening quote
	length := 0
	for {
		if d.pos == d.n && !d.fill() {
			if d.err != nil {
				return d.err
			}
			return d.syntax("unexpected end of input in a string")
		}
		run := d.buf[d.pos:d.n]
		i := 0
		for i < len(run) {
			if b := run[i]; b == '"' || b == '\\' || b < 0x20 {
				break
			}
			i++
		}
		if length+i > d.l.MaxToken {
			return d.tooLong("string")
		}
		if d.capture != nil {
			d.capture.add(run[:i]...)
		}
		d.pos += i
		length += i
		if i == len(run) {
			continue
		}
		switch b := run[i]; {
		case b == '"':
			d.take()
			return nil
		case b < 0x20:
			return d.syntax("control character in a string")
		}
		// An escape: \ and one of "\/bfnrt, or u and four hex digits.
		d.take()
		e, ok := d.peek()
		if !ok {
			if d.err != nil {
				return d.err
			}
			return d.syntax("unexpected end of input in a string")
		}
		n := 1
		switch e {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			d.take()
		case 'u':
			d.take()
			for range 4 {
				h, ok := d.peek()
				if !ok || !isHex(h) {
					if d.err != nil {
						return d.err
					}
					return d.syntax("invalid \\u escape in a string")
				}
				d.take()
			}
			n = 5
		default:
			return d.syntax("invalid escape in a string")
		}
		length += 1 + n
		if length > d.l.MaxToken {
			return d.tooLong("string")
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// States of number.
const (
	nStart = iota
	nMinus
	nZero
	nInt
	nDot
	nFrac
	nExp
	nExpSign
	nExpDigits
	nEnd // the byte is not part of the number
	nBad // the byte cannot follow
)

// numberStep is the grammar of a number,
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, one byte at a time.
func numberStep(state int, c byte) int {
	digit := c >= '0' && c <= '9'
	switch state {
	case nStart:
		switch {
		case c == '-':
			return nMinus
		case c == '0':
			return nZero
		case digit:
			return nInt
		}
	case nMinus:
		switch {
		case c == '0':
			return nZero
		case digit:
			return nInt
		}
	case nZero, nInt, nFrac:
		switch {
		case digit && state != nZero:
			return state
		case c == '.' && state != nFrac:
			return nDot
		case c == 'e' || c == 'E':
			return nExp
		}
		return nEnd
	case nDot:
		if digit {
			return nFrac
		}
	case nExp:
		switch {
		case c == '+' || c == '-':
			return nExpSign
		case digit:
			return nExpDigits
		}
	case nExpSign, nExpDigits:
		if digit {
			return nExpDigits
		}
		if state == nExpDigits {
			return nEnd
		}
	}
	return nBad
}

// number reads a number.
func (d *Decoder) number() error {
	state, length := nStart, 0
	for {
		if d.pos == d.n && !d.fill() {
			if d.err != nil {
				return d.err
			}
			break
		}
		next := numberStep(state, d.buf[d.pos])
		if next == nEnd {
			break
		}
		if next == nBad {
			return d.syntax("invalid number")
		}
		state = next
		d.take()
		if length++; length > d.l.MaxToken {
			return d.tooLong("number")
		}
	}
	switch state {
	case nZero, nInt, nFrac, nExpDigits:
		return nil
	}
	return d.syntax("invalid number")
}

func (d *Decoder) literal(word string) error {
	for i := range len(word) {
		c, ok := d.peek()
		if !ok || c != word[i] {
			if d.err != nil {
				return d.err
			}
			return d.syntax("invalid literal (expected true, false or null)")
		}
		d.take()
	}
	return nil
}
