package runner

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"sync"

	"github.com/captf/captf/pkg/contract"
	"github.com/captf/captf/pkg/runresult"
)

// maxLogLine is the longest line the log redactor holds back waiting for
// its end; a longer one is written redacted in pieces.
const maxLogLine = 1 << 20

// sensitiveInputs returns a Redactor of the values of the inputs whose
// values are sensitive (SPEC O9: the variables a Secret gave; K5: the
// bootstrap data, also decoded), nil when there are none: Terraform's
// output passes through it on its way to the pod's log (X1), since a
// module need not declare such a variable sensitive.
func sensitiveInputs(in contract.Inputs) *runresult.Redactor {
	names := in.Sensitive()
	if len(names) == 0 {
		return nil
	}
	r := runresult.NewRedactor()
	for _, k := range names {
		_ = r.AddJSON(in[k])
		if k != contract.InputBootstrapData {
			continue
		}
		// A module decodes it (base64decode), and Terraform may quote a
		// decoded line, a join token among them.
		var encoded string
		if json.Unmarshal(in[k], &encoded) == nil {
			if b, err := base64.StdEncoding.DecodeString(encoded); err == nil {
				r.Add(string(b))
			}
		}
	}
	return r
}

// lineRedactor writes what it is given to w a line at a time, each with
// the redactor's values replaced. Flush writes a last line without its
// end.
type lineRedactor struct {
	mu  sync.Mutex
	w   io.Writer
	r   *runresult.Redactor
	buf []byte
}

func (l *lineRedactor) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			if len(l.buf) > maxLogLine {
				if err := l.emit(len(l.buf)); err != nil {
					return len(p), err
				}
			}
			return len(p), nil
		}
		if err := l.emit(i + 1); err != nil {
			return len(p), err
		}
	}
}

// emit writes the first n bytes of the buffer, redacted.
func (l *lineRedactor) emit(n int) error {
	_, err := io.WriteString(l.w, l.r.Redact(string(l.buf[:n])))
	l.buf = append(l.buf[:0], l.buf[n:]...)
	return err
}

// Flush writes what is left of the last line.
func (l *lineRedactor) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return nil
	}
	return l.emit(len(l.buf))
}
