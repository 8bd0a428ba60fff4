package sink

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/strom-dev/strom/stream"
)

// linesSink is the stream.Sink built by Lines.
type linesSink struct {
	w io.Writer
}

// Lines returns a sink writing each string followed by '\n' to w, with one
// w.Write call per non-empty batch (wrap w in a bufio.Writer and flush it
// yourself for fewer system calls across batches, or leave it unbuffered so
// each batch is out when Write returns). Nothing is escaped: a value that
// holds '\n' becomes several lines. A failed or short write returns an error
// "sink: lines: ..." wrapping the writer's error (io.ErrShortWrite for a short
// write without one). A nil w makes every Write return [ErrNilWriter].
//
// The sink is safe for concurrent use when w is.
func Lines(w io.Writer) stream.Sink[string] {
	return linesSink{w: w}
}

// Write writes values, one per line, in one call to the writer.
func (s linesSink) Write(_ context.Context, values []string) error {
	if s.w == nil {
		return ErrNilWriter
	}
	if len(values) == 0 {
		return nil
	}
	n := 0
	for _, v := range values {
		n += len(v) + 1
	}
	var buf bytes.Buffer
	buf.Grow(n)
	for _, v := range values {
		buf.WriteString(v)
		buf.WriteByte('\n')
	}
	written, err := s.w.Write(buf.Bytes())
	if err == nil && written < n {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("sink: lines: wrote %d of %d bytes: %w", written, n, err)
	}
	return nil
}
