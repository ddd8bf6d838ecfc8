package runresult

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Clean returns s as valid UTF-8 without control or bidirectional
// formatting characters, but for newlines and tabs: what a status field,
// an event and a terminal show as it is. Invalid bytes become U+FFFD; a
// carriage return is dropped. Clean(Clean(s)) == Clean(s).
func Clean(s string) string {
	return clean(s, func(r rune) (rune, bool) {
		if r == '\n' || r == '\t' {
			return r, true
		}
		return 0, false
	})
}

// cleanLine is Clean for a one-line field: newlines and tabs become spaces.
func cleanLine(s string) string {
	return clean(s, func(r rune) (rune, bool) {
		if r == '\n' || r == '\t' {
			return ' ', true
		}
		return 0, false
	})
}

func clean(s string, keep func(rune) (rune, bool)) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	return strings.Map(func(r rune) rune {
		switch {
		case unicode.IsControl(r):
			if k, ok := keep(r); ok {
				return k
			}
			return -1
		case bidi(r):
			return -1
		}
		return r
	}, s)
}

// bidi reports the bidirectional formatting characters, which can make a
// line read otherwise than it is.
func bidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}

// Shorten returns s when it is at most max bytes; otherwise its first line
// (shortened to half of max at most), a "..." line, and as many of its
// last lines as fit, so the whole is at most max bytes of valid UTF-8 (s
// being valid). A Terraform error keeps its "Error: ..." headline and its
// last lines. A one-line s keeps its start and end around "...".
func Shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	const multi, single = "\n...\n", "..."
	marker := single
	if strings.Contains(s, "\n") {
		marker = multi
	}
	if max < len(marker)+2 {
		return prefix(s, max)
	}
	budget := max - len(marker)
	head := s
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		head = s[:i]
	}
	head = prefix(head, budget/2)
	rest := s[len(head):]
	tail := suffix(rest, budget-len(head))
	if marker == multi {
		// Start the tail at a line when one starts within it.
		if i := strings.IndexByte(tail, '\n'); i >= 0 && i+1 < len(tail) {
			tail = tail[i+1:]
		}
		tail = strings.TrimLeft(tail, "\n")
	}
	return head + marker + tail
}

// prefix is the longest prefix of s of at most n bytes that ends on a rune
// boundary.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// suffix is the longest suffix of s of at most n bytes that starts on a
// rune boundary.
func suffix(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
