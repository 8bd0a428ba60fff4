package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultMaxLines is the default number of lines in one batch returned by
// [LinesSource.Read]: 500. Override it with [MaxLines].
const DefaultMaxLines = 500

// linesReadBufferBytes is the size of the buffered reader over the file. It
// bounds nothing: a longer line is read in several fills.
const linesReadBufferBytes = 64 << 10

// LinesOption configures a [LinesSource]; pass options to [Lines].
type LinesOption interface {
	applyLines(*linesConfig)
}

// linesConfig holds a LinesSource's settings; defaultLinesConfig lists every
// default.
type linesConfig struct {
	topic    string // LinesTopic; "" means derived from the file name
	maxLines int    // MaxLines
}

func defaultLinesConfig() linesConfig {
	return linesConfig{topic: "", maxLines: DefaultMaxLines}
}

// linesOptionFunc adapts a closure to LinesOption.
type linesOptionFunc func(*linesConfig)

func (f linesOptionFunc) applyLines(c *linesConfig) { f(c) }

// LinesTopic sets the topic name of the lineage the source gives its elements,
// which is also the name a checkpoint store keeps the position under,
// overriding the default derived from the file name (see [Lines]). The name
// must follow Kafka's rule (1 to 249 of [a-zA-Z0-9._-], not "." or ".."); an
// illegal name makes Read and Resume fail with an error wrapping
// log.ErrInvalidTopic. An empty name keeps the default.
func LinesTopic(name string) LinesOption {
	return linesOptionFunc(func(c *linesConfig) { c.topic = name })
}

// MaxLines bounds the number of lines in one batch returned by Read,
// overriding the default of [DefaultMaxLines] (500). n <= 0 keeps the default.
func MaxLines(n int) LinesOption {
	return linesOptionFunc(func(c *linesConfig) {
		if n > 0 {
			c.maxLines = n
		}
	})
}

// LinesSource reads the lines of a file as a stream.Source[string]. Build it
// with [Lines].
//
// A line is everything up to a '\n'. The '\n' and one '\r' right before it
// are stripped, so both LF and CRLF files give the same text; everything else,
// trailing spaces included, is kept byte for byte. A last line without a
// terminator is still a line (its one trailing '\r', if any, is stripped too,
// as bufio.ScanLines does), and the empty text after a final '\n' is not a
// line. Lines may be of any length.
//
// Each element's lineage is the source's topic (see [LinesTopic]), partition 0
// and the 0-based line index as offset, so a checkpointing pipeline saves the
// index of the next line to read and [LinesSource.Resume] skips what was
// handled.
//
// The file is read to its end as it is when the end is reached; the source
// does not tail a growing file. It opens lazily on the first Read. A
// LinesSource is not safe for concurrent use.
type LinesSource struct {
	path  string
	topic string
	cfg   linesConfig

	f    *os.File      // nil while closed
	br   *bufio.Reader // reads f
	line int64         // index of the next line br will yield
	skip int64         // lines below this index are read but not returned
	eof  bool          // the end of the file was reached; Read returns io.EOF

	pending error // an error that arrived with a batch, returned by the next Read
}

// The interfaces a LinesSource implements.
var (
	_ stream.Source[string] = (*LinesSource)(nil)
	_ stream.Resumer        = (*LinesSource)(nil)
)

// Lines returns a source yielding the lines of the file at path, in batches of
// up to [DefaultMaxLines], ending with io.EOF.
//
// Its lineage topic defaults to the file's base name with every character
// outside [a-zA-Z0-9._-] replaced by '_' and cut to 249 bytes ("lines" when
// that leaves "", "." or ".."): "/var/log/auth log.txt" gives "auth_log.txt".
// Errors opening or reading the file are returned by Read as a [*FileError].
func Lines(path string, opts ...LinesOption) *LinesSource {
	cfg := defaultLinesConfig()
	for _, o := range opts {
		if o != nil {
			o.applyLines(&cfg)
		}
	}
	topic := cfg.topic
	if topic == "" {
		topic = topicFromFileName(path)
	}
	return &LinesSource{path: path, topic: topic, cfg: cfg}
}

// Topic returns the lineage topic of the source's elements.
func (s *LinesSource) Topic() string { return s.topic }

// Position returns the index of the next line Read will return, which is the
// number of lines returned (or skipped by Resume) so far.
func (s *LinesSource) Position() int64 { return max(s.line, s.skip) }

// Read returns the next batch of up to MaxLines lines. At the end of the file
// it returns nil, io.EOF, and io.EOF again on every later call, until Close or
// Resume. A done context returns ctx.Err(). Other failures are a [*FileError].
func (s *LinesSource) Read(ctx context.Context) ([]stream.Element[string], error) {
	if err := s.pending; err != nil {
		s.pending = nil
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.f == nil {
		if err := s.open(); err != nil {
			return nil, err
		}
	}
	if s.eof {
		return nil, io.EOF
	}
	var batch []stream.Element[string]
	for len(batch) < s.cfg.maxLines {
		data, err := s.br.ReadBytes('\n')
		if len(data) > 0 {
			idx := s.line
			s.line++
			if idx >= s.skip {
				batch = append(batch, stream.Element[string]{
					Value:     string(trimLineEnd(data)),
					Topic:     s.topic,
					Partition: 0,
					Offset:    idx,
					Epoch:     checkpoint.NoEpoch,
				})
			}
		}
		if errors.Is(err, io.EOF) {
			s.eof = true
			break
		}
		if err != nil {
			err = &FileError{Path: s.path, Err: fmt.Errorf("reading line %d: %w", s.line, err)}
			if len(batch) == 0 {
				return nil, err
			}
			s.pending = err
			break
		}
	}
	if len(batch) == 0 && s.eof {
		return nil, io.EOF
	}
	return batch, nil
}

// open checks the topic name and opens the file from its beginning.
func (s *LinesSource) open() error {
	if err := log.ValidateTopicName(s.topic); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	f, err := os.Open(s.path)
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	s.f = f
	s.br = bufio.NewReaderSize(f, linesReadBufferBytes)
	s.line = 0
	s.eof = false
	return nil
}

// Resume makes the next Read start at the line index saved in store under the
// source's topic, partition 0, or at the first line when the store has none.
// The file is opened again and read from its start; lines below the saved
// index are read and skipped. A saved index at or past the last line makes the
// next Read return io.EOF. A failing store returns its error wrapped in a
// [*FileError] and leaves the source as it was; a nil store is [ErrNilStore].
func (s *LinesSource) Resume(ctx context.Context, store checkpoint.Store) error {
	if store == nil {
		return &FileError{Path: s.path, Err: ErrNilStore}
	}
	if err := log.ValidateTopicName(s.topic); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	pos, found, err := store.Load(ctx, s.topic, 0)
	if err != nil {
		return &FileError{Path: s.path, Err: fmt.Errorf("loading checkpoint: %w", err)}
	}
	if err := s.Close(); err != nil {
		return err
	}
	s.skip, s.line = 0, 0
	if found {
		s.skip = pos.Offset
	}
	return nil
}

// Close closes the file. The source stays usable: the next Read opens the
// file again and continues at [LinesSource.Position]. It returns the error of
// closing the file, as a [*FileError].
func (s *LinesSource) Close() error {
	s.pending = nil
	if s.f == nil {
		return nil
	}
	s.skip = s.Position()
	s.line = 0
	f := s.f
	s.f, s.br, s.eof = nil, nil, false
	if err := f.Close(); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	return nil
}

// trimLineEnd strips one trailing '\n' and then one trailing '\r'.
func trimLineEnd(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// topicFromFileName derives a legal topic name from path's base name.
func topicFromFileName(path string) string {
	base := []byte(filepath.Base(path))
	for i, c := range base {
		if !topicname.ValidChar(rune(c)) {
			base[i] = '_'
		}
	}
	if len(base) > topicname.MaxLen {
		base = base[:topicname.MaxLen]
	}
	name := string(base)
	if name == "" || name == "." || name == ".." {
		return "lines"
	}
	return name
}
