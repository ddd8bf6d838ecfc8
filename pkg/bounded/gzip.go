package bounded

import (
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
)

// Gunzip returns a reader of the decompression of r, a gzip stream (or
// several concatenated, as gzip readers read them) that must end where r
// ends. It reads at most l.MaxInput+1 bytes of r and produces at most
// l.MaxSize bytes: past either it fails with KindInput or KindSize, so a
// decompression bomb costs the decompressor's window (32 KiB) and its
// tables, whatever it expands to. Corrupt input is KindCorrupt, with a
// message that names the problem, never the data. An error of r itself
// (other than io.EOF) passes through unchanged, on the first read or
// later: r may fetch its bytes as they are needed.
//
// The gzip header is read here: a source that is not gzip fails at once.
func Gunzip(r io.Reader, l Limits) (io.Reader, error) {
	l = l.norm()
	src := &counted{r: r, max: l.MaxInput}
	z, err := gzip.NewReader(src)
	if err != nil {
		if src.err != nil {
			return nil, src.err
		}
		if errors.Is(err, io.EOF) {
			return nil, fail(KindCorrupt, -1, "the input is empty, not gzip")
		}
		return nil, fail(KindCorrupt, -1, "the input is not gzip (no gzip header)")
	}
	return &gunzip{z: z, src: src, max: l.MaxSize}, nil
}

// counted reads r, failing past max bytes. It keeps r's first error so
// that Gunzip can tell it from the decompressor's.
type counted struct {
	r   io.Reader
	n   int64
	max int64
	err error
}

func (c *counted) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	// One byte more than allowed tells a source of exactly max bytes from
	// a longer one.
	if room := c.max - c.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		c.err = fail(KindInput, -1, "the compressed input exceeds %d bytes", c.max)
		return 0, c.err
	}
	if err != nil && err != io.EOF {
		c.err = err
	}
	return n, err
}

type gunzip struct {
	z   *gzip.Reader
	src *counted
	out int64
	max int64
	err error
}

func (g *gunzip) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if room := g.max - g.out + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := g.z.Read(p)
	g.out += int64(n)
	if g.out > g.max {
		g.err = fail(KindSize, g.max, "the decompressed input exceeds %d bytes", g.max)
		return n - int(g.out-g.max), g.err
	}
	switch {
	case err == nil || err == io.EOF:
		return n, err
	case g.src.err != nil:
		g.err = g.src.err
	default:
		g.err = fail(KindCorrupt, g.out, "the input is a corrupt or truncated gzip stream (%s after %d decompressed bytes)", gzipProblem(err), g.out)
	}
	return n, g.err
}

// gzipProblem names a decompression failure without quoting anything.
func gzipProblem(err error) string {
	var corrupt flate.CorruptInputError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "unexpected end"
	case errors.Is(err, gzip.ErrChecksum):
		return "checksum mismatch"
	case errors.Is(err, gzip.ErrHeader):
		return "invalid header after the first stream"
	case errors.As(err, &corrupt):
		return "invalid compressed data"
	}
	return "invalid compressed data"
}

// ReadAll reads r to its end, failing with KindSize past max bytes. It
// never holds a buffer larger than max+1 bytes, and allocates about twice
// what it returns, never what r would yield.
func ReadAll(r io.Reader, max int64) ([]byte, error) {
	if max < 0 {
		max = 0
	}
	buf := make([]byte, 0, min(max+1, 32<<10))
	for {
		if int64(len(buf)) == int64(cap(buf)) {
			// Double, but jump straight to max+1 rather than to a size just
			// short of it.
			next := 2 * int64(cap(buf))
			if next >= max {
				next = max + 1
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > max {
			return nil, fail(KindSize, max, "the input exceeds %d bytes", max)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
