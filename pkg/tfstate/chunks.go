package tfstate

import (
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Chunks returns a reader of the compressed state of suffix that fetches
// its Secrets with get as it reads them, holding one at a time: the chunk
// in SecretName(suffix), then, while each chunk is a full ChunkSize (a
// state HashiCorp Terraform split), the one in the next PartName. get
// returns nil for a Secret that does not exist. A part (i >= 1) without
// the labels of Selector(suffix) is not one: it counts as missing. So a
// stale part left after the state shrank is never read, and only the
// backend's own names are (SPEC B11: GETs by name, no LIST).
//
// Errors: KindNotFound without the first Secret or its key, KindIncomplete
// when a part is missing before another or lacks its key, KindTooLarge past
// MaxParts or MaxStateBytes; get's own errors pass through unchanged.
func Chunks(suffix string, get func(name string) (*corev1.Secret, error)) io.Reader {
	return &chunks{suffix: suffix, get: get, selector: Selector(suffix)}
}

type chunks struct {
	suffix   string
	get      func(name string) (*corev1.Secret, error)
	selector labels.Selector
	next     int // the index of the next part to fetch
	total    int
	cur      []byte
	done     bool
	err      error
}

func (c *chunks) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		switch {
		case c.err != nil:
			return 0, c.err
		case c.done:
			return 0, io.EOF
		}
		c.err = c.fetch()
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// part gets part i, nil when it does not exist or is not the suffix's.
func (c *chunks) part(i int) (*corev1.Secret, error) {
	s, err := c.get(PartName(c.suffix, i))
	if err != nil || s == nil {
		return nil, err
	}
	if i > 0 && !c.selector.Matches(labels.Set(s.Labels)) {
		return nil, nil
	}
	return s, nil
}

// fetch reads the next chunk into c.cur, or sets c.done.
func (c *chunks) fetch() error {
	i := c.next
	name := PartName(c.suffix, i)
	s, err := c.part(i)
	if err != nil {
		return err
	}
	if s == nil {
		if i == 0 {
			return fail(KindNotFound, "Secret %s does not exist", name)
		}
		later, err := c.part(i + 1)
		if err != nil {
			return err
		}
		if later != nil {
			return fail(KindIncomplete, "split state: part Secret %s is missing", name)
		}
		// A state of an exact multiple of ChunkSize ends here; a missing
		// last part shows as a truncated gzip stream.
		c.done = true
		return nil
	}
	chunk, ok := s.Data[DataKey]
	if !ok {
		if i == 0 {
			return fail(KindNotFound, "Secret %s has no %q key", name, DataKey)
		}
		return fail(KindIncomplete, "split state: part Secret %s has no %q key", name, DataKey)
	}
	if i >= MaxParts || c.total+len(chunk) > MaxStateBytes {
		return fail(KindTooLarge, "the compressed state exceeds %d bytes", MaxStateBytes)
	}
	c.total += len(chunk)
	c.cur = chunk
	c.next++
	c.done = len(chunk) != ChunkSize
	return nil
}
