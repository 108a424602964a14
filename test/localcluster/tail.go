package localcluster

import (
	"bytes"
	"io"
	"sync"
)

// tailWriter passes writes on to out and keeps the last max bytes, so that an error about a process
// can quote what it printed last (its reason to exit, usually).
type tailWriter struct {
	out io.Writer
	max int

	mu   sync.Mutex
	tail []byte
	// cut is whether tail starts within a line.
	cut bool
}

func newTailWriter(out io.Writer, max int) *tailWriter {
	if out == nil {
		out = io.Discard
	}
	return &tailWriter{out: out, max: max}
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.tail = append(w.tail, p...)
	if over := len(w.tail) - w.max; over > 0 {
		w.cut = w.tail[over-1] != '\n'
		w.tail = append(w.tail[:0], w.tail[over:]...)
	}
	w.mu.Unlock()
	return w.out.Write(p)
}

// String returns the last lines kept, the first one whole.
func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tail
	if w.cut {
		if i := bytes.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		}
	}
	return string(t)
}
