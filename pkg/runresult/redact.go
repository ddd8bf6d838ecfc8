package runresult

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Sensitive replaces a redacted value (upstream's word, A3-80).
const Sensitive = "(sensitive)"

// MinSubstring is the shortest value replaced wherever it occurs. A
// shorter value ("1", "eu") is replaced only where it stands alone, between
// characters that are neither letters nor digits: replaced everywhere it
// would make every tail unreadable, and such a value is no credential.
const MinSubstring = 4

// Redactor replaces known values in text with [Sensitive]. The runner adds
// every value it knows may be sensitive (SPEC O1, X1): the environment's,
// the credential files', the variables' and the inputs'. The zero value is
// not usable; use [NewRedactor].
type Redactor struct {
	long  map[string]struct{}
	short map[string]struct{}
}

// NewRedactor returns an empty Redactor.
func NewRedactor() *Redactor {
	return &Redactor{long: map[string]struct{}{}, short: map[string]struct{}{}}
}

// Add adds a value: the value itself, each of its lines (a key file, a
// cloud-config: an error may quote one line), and their JSON-escaped forms
// (an error may quote the value as a string literal). Empty values and
// lines shorter than MinSubstring of a longer value are not added.
func (r *Redactor) Add(value string) {
	value = strings.TrimRight(value, "\r\n")
	if strings.TrimSpace(value) == "" {
		return
	}
	r.add(value)
	if !strings.ContainsAny(value, "\r\n") {
		return
	}
	for l := range strings.Lines(value) {
		if l = strings.TrimSpace(l); len(l) >= MinSubstring {
			r.add(l)
		}
	}
}

func (r *Redactor) add(v string) {
	if len(v) < MinSubstring {
		r.short[v] = struct{}{}
		return
	}
	r.long[v] = struct{}{}
	if q := strconv.Quote(v); q[1:len(q)-1] != v {
		r.long[q[1:len(q)-1]] = struct{}{}
	}
}

// AddJSON adds the leaves of a JSON document, every string and number
// (booleans and null hold nothing to hide), and the compact text of every
// object and array within it. It returns an error when data is not JSON;
// the error does not quote it.
func (r *Redactor) AddJSON(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return errNotJSON
	}
	r.addJSON(v)
	return nil
}

var errNotJSON = jsonError("not JSON")

type jsonError string

func (e jsonError) Error() string { return string(e) }

func (r *Redactor) addJSON(v any) {
	switch t := v.(type) {
	case string:
		r.Add(t)
	case json.Number:
		r.Add(t.String())
	case []any:
		if b, err := json.Marshal(t); err == nil && len(t) > 0 {
			r.Add(string(b))
		}
		for _, e := range t {
			r.addJSON(e)
		}
	case map[string]any:
		if b, err := json.Marshal(t); err == nil && len(t) > 0 {
			r.Add(string(b))
		}
		for _, e := range t {
			r.addJSON(e)
		}
	}
}

// AddFrom adds every value o holds (nil holds none).
func (r *Redactor) AddFrom(o *Redactor) {
	if o == nil {
		return
	}
	maps.Copy(r.long, o.long)
	maps.Copy(r.short, o.short)
}

// Redact returns s with every value added replaced by [Sensitive]: long
// values wherever they occur, longest first, then short ones where they
// stand alone.
func (r *Redactor) Redact(s string) string {
	if len(r.long) > 0 {
		needles := make([]string, 0, len(r.long))
		for v := range r.long {
			needles = append(needles, v)
		}
		// Longest first: a value that contains another is replaced whole.
		slices.SortFunc(needles, func(a, b string) int {
			if d := len(b) - len(a); d != 0 {
				return d
			}
			return strings.Compare(a, b)
		})
		pairs := make([]string, 0, 2*len(needles))
		for _, v := range needles {
			pairs = append(pairs, v, Sensitive)
		}
		s = strings.NewReplacer(pairs...).Replace(s)
	}
	for v := range r.short {
		s = replaceAlone(s, v)
	}
	return s
}

// replaceAlone replaces v where it stands alone in s: at the start or
// after a character that is not a letter or digit, and at the end or
// before one.
func replaceAlone(s, v string) string {
	var b strings.Builder
	from := 0 // s[:from] is written
	for at := 0; at <= len(s)-len(v); {
		i := strings.Index(s[at:], v)
		if i < 0 {
			break
		}
		i += at
		end := i + len(v)
		if (i == 0 || !word(s[i-1])) && (end == len(s) || !word(s[end])) {
			b.WriteString(s[from:i])
			b.WriteString(Sensitive)
			from, at = end, end
			continue
		}
		at = i + 1
	}
	b.WriteString(s[from:])
	return b.String()
}

// word reports the bytes of letters and digits: ASCII ones, and any byte
// of a multi-byte character (which is a letter more often than not).
func word(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c >= 0x80
}
