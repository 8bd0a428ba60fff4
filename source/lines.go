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
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/topicname"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultMaxLines is the default number of lines in one batch returned by
// [LinesSource.Read]: 500. Override it with [MaxLines].
const DefaultMaxLines = 500

// DefaultFollowInterval is how often a [LinesSource] with [Follow] looks at
// its file while it waits for new lines, unless [FollowInterval] says
// otherwise: 1 s, as tail -F. It bounds the wait for a change inotify does
// not report (a file on NFS written from another machine, no inotify
// instance left); a change inotify reports is seen at once. Each look is two
// stat calls.
const DefaultFollowInterval = time.Second

// linesReadBufferBytes is the size of the buffered reader over the file. It
// bounds nothing: a longer line is read in several fills.
const linesReadBufferBytes = 64 << 10

// LinesSource reads the lines of a file as a stream.Source[string]. Build it
// with [Lines].
//
// A line is everything up to a '\n'. The '\n' and one '\r' right before it
// are stripped, so both LF and CRLF files give the same text; everything else,
// trailing spaces and a '\r' elsewhere in the line included, is kept byte for
// byte. A last line without a terminator is still a line (its one trailing
// '\r', if any, is stripped too, as bufio.ScanLines does), and the empty text
// after a final '\n' is not a line. Lines may be of any length. [KeepCR]
// keeps the '\r'. strom produce follows the same rule (and --keep-cr), so a
// file produced by it and read by this source gives the same values.
//
// # Lineage and positions
//
// Each element's lineage is the source's topic (see [LinesTopic]), partition
// 0, an offset and an epoch. The offset is the line's index in its file plus
// the file's base offset: 0 for the first file the source reads, so that for
// a file that never changes the offset is the line index. The epoch is the
// file's generation, a number the source gives each file it reads (or
// checkpoint.NoEpoch when it keeps no identities, see below). A
// checkpointing pipeline thus saves the offset of the next line to read and
// the generation of the file it counts lines of.
//
// # File identity
//
// Before it returns the first line of a file, the source saves the file's
// identity ([FileIdentity]: device, inode and a CRC32C fingerprint of its
// first [FingerprintBytes] bytes, fewer for a shorter file), its generation
// and its base offset in the checkpoint store, as a state snapshot
// (checkpoint.StateStore) named "lines-identity.<topic>" (for a long topic,
// its first bytes and a CRC32C of the whole name, to stay within 249
// bytes). It does so when it was given the store, by [LinesSource.Resume]
// or [LinesFromStore], and the store is a StateStore (checkpoint.FileStore
// and MemoryStore are). A saved
// position (offset, generation) and the identity saved under that generation
// always describe the same file, because a generation is never reused and
// its identity is saved before any line of it can be handled, let alone
// checkpointed. While a file is shorter than FingerprintBytes its
// fingerprint is extended, and saved again, as the source reads more of it.
//
// When the source opens its file (on the first Read after Resume or Close)
// it checks the file against the identity of the position: another device
// or inode is [FileReplaced], the same inode with other first bytes
// [FileRewritten], fewer bytes than were fingerprinted or fewer lines than
// the position [FileTruncated], and a generation the store holds no identity
// for [FileIdentityLost]. A change is never a silent skip: by default
// ([FileChangeRestart]) the file now at the path is read from its first
// line, every line of it handled, with offsets continuing above the saved
// position (and [OnFileChanged] hears of it); with
// [OnFileChange]([FileChangeFail]) Read fails with a [*FileChangedError]
// naming the file, the saved identity and what changed.
//
// A position saved without a generation (checkpoint.NoEpoch: by hand, by a
// pipeline whose source was never given its store, or with a store that
// keeps no state) is taken as a line index of the file at the path; only
// its length is checked (fewer lines than the position is
// [FileTruncated]). A change past the first FingerprintBytes bytes of a
// file that keeps its inode and grows no shorter is not detected.
//
// # End of file
//
// By default the file is read to its end as it is when the end is reached,
// and Read then returns io.EOF. With [Follow] the source tails the file
// instead, across rotations. The source opens lazily on the first Read. A
// LinesSource is not safe for concurrent use.
type LinesSource struct {
	path  string
	topic string
	cfg   linesConfig

	// The open file; f is nil while closed.
	f         *os.File
	br        *bufio.Reader // reads f
	gen       int32         // epoch of f's lines: its generation, or NoEpoch
	base      int64         // offset of f's first line
	next      int64         // offset of the next line br yields
	read      int64         // bytes consumed from f, from its start
	head      []byte        // f's first bytes consumed, up to FingerprintBytes
	savedLen  int           // len(head) when gen's identity was last saved; -1 never
	partial   []byte        // Follow: the unterminated end of f read so far
	rotated   bool          // Follow: another file is at the path; finish f first
	switching bool          // Follow: f is finished; open the file at the path next
	atEnd     bool          // Follow: br reached the end of f; look at the file before reading on
	wake      chan struct{} // Follow: inotify's wake-up for wait, made on first use
	eof       bool          // the end of the file was reached; Read returns io.EOF

	want    resumePoint // where the next open continues, and what it checks
	resumed bool        // Resume was called (LinesFromStore does it once)

	// Identities; store is nil when they are not kept.
	store   checkpoint.StateStore
	gens    []fileGeneration // the identities kept, by increasing generation
	nextGen int32            // the generation of the next new file
	runGen  int32            // the lowest generation used since Resume

	pending error // an error that arrived with a batch, returned by the next Read
}

// resumePoint is where a LinesSource continues when it opens its file.
type resumePoint struct {
	next     int64         // offset of the next line to read
	base     int64         // offset of the file's first line
	gen      int32         // the file's generation; NoEpoch when unknown
	id       *FileIdentity // identity to check the file against; nil: unchecked
	lost     bool          // the position names a generation without identity
	savedLen int           // fingerprint length saved for gen; -1 never
}

// The interfaces a LinesSource implements.
var (
	_ stream.Source[string] = (*LinesSource)(nil)
	_ stream.Resumer        = (*LinesSource)(nil)
)

// Lines returns a source yielding the lines of the file at path, in batches of
// up to [DefaultMaxLines], ending with io.EOF (or, with [Follow], never).
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
	return &LinesSource{path: path, topic: topic, cfg: cfg, want: resumePoint{gen: checkpoint.NoEpoch, savedLen: -1}}
}

// Topic returns the lineage topic of the source's elements.
func (s *LinesSource) Topic() string { return s.topic }

// Position returns the offset of the next line Read will return: for a file
// that never changed, the number of lines returned (or skipped by Resume) so
// far.
func (s *LinesSource) Position() int64 {
	if s.f != nil {
		return s.next
	}
	return s.want.next
}

// Read returns the next batch of up to MaxLines lines. At the end of the file
// it returns nil, io.EOF, and io.EOF again on every later call, until Close or
// Resume; with [Follow] it waits for new lines instead. A done context
// returns ctx.Err(). A file that changed under [FileChangeFail] is a
// [*FileChangedError] wrapped in a [*FileError]; other failures are a
// [*FileError].
func (s *LinesSource) Read(ctx context.Context) ([]stream.Element[string], error) {
	if err := s.pending; err != nil {
		s.pending = nil
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.cfg.store != nil && !s.resumed {
		if err := s.Resume(ctx, s.cfg.store); err != nil {
			return nil, err
		}
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
		if s.switching {
			if len(batch) > 0 {
				break // a batch holds the lines of one file
			}
			if err := s.switchFile(); err != nil {
				return nil, err
			}
		}
		if s.atEnd {
			// Every read past an end of the file follows a look at the
			// file: a truncation or rewrite is seen before its bytes are
			// taken for lines of the old content.
			if len(batch) > 0 {
				break
			}
			moved, err := s.poll()
			if err == nil && !moved {
				err = s.wait(ctx)
			}
			if err != nil {
				return nil, err
			}
			s.atEnd = false
			continue
		}
		data, err := s.br.ReadBytes('\n')
		s.consumed(data)
		if err == nil {
			batch = s.emit(batch, data)
			continue
		}
		if !errors.Is(err, io.EOF) {
			err = &FileError{Path: s.path, Err: fmt.Errorf("reading line %d: %w", s.next-s.base, err)}
			if len(batch) == 0 {
				return nil, err
			}
			s.pending = err
			break
		}
		if !s.cfg.follow {
			if len(data) > 0 {
				batch = s.emit(batch, data)
			}
			s.eof = true
			break
		}
		s.partial = append(s.partial, data...)
		if s.rotated {
			if len(s.partial) > 0 {
				batch = s.emit(batch, nil) // rotated away: its '\n' never comes
			}
			s.switching = true
			continue
		}
		s.atEnd = true
	}
	if len(batch) == 0 && s.eof {
		return nil, io.EOF
	}
	if err := s.keepIdentity(ctx, batch); err != nil {
		return nil, err
	}
	return batch, nil
}

// consumed notes that data was read from f.
func (s *LinesSource) consumed(data []byte) {
	s.read += int64(len(data))
	if n := FingerprintBytes - len(s.head); n > 0 {
		s.head = append(s.head, data[:min(n, len(data))]...)
	}
}

// emit appends the line s.partial+data to batch, as the line at s.next.
func (s *LinesSource) emit(batch []stream.Element[string], data []byte) []stream.Element[string] {
	line := data
	if len(s.partial) > 0 {
		line = append(s.partial, data...)
		s.partial = nil
	}
	batch = append(batch, stream.Element[string]{
		Value:     string(trimLineEnd(line, s.cfg.keepCR)),
		Topic:     s.topic,
		Partition: 0,
		Offset:    s.next,
		Epoch:     s.gen,
	})
	s.next++
	return batch
}

// open checks the topic name, opens the file, checks it against the
// identity of s.want and moves to s.want's line, or, when the file changed,
// follows the policy.
func (s *LinesSource) open() error {
	if err := log.ValidateTopicName(s.topic); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	f, err := os.Open(s.path)
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return &FileError{Path: s.path, Err: err}
	}
	s.setFile(f)
	w := s.want
	change, found, err := s.check(f, info, w)
	if err == nil && change == 0 && w.next > w.base {
		var n int64
		n, err = s.skip(w.next - w.base)
		if err == nil && n < w.next-w.base {
			change, found = FileTruncated, identityOf(info, s.head[:min(len(s.head), fingerprintLen(w))])
		}
	}
	if err != nil {
		_ = s.closeFile() // read-only: a close error loses nothing
		return &FileError{Path: s.path, Err: fmt.Errorf("opening at line %d: %w", w.next-w.base, err)}
	}
	if change != 0 {
		cerr := &FileChangedError{Path: s.path, Change: change, Found: found, Position: w.next, Line: w.next - w.base}
		if w.id != nil {
			cerr.Saved = *w.id
		}
		if s.cfg.onChange == FileChangeFail {
			_ = s.closeFile() // read-only: a close error loses nothing
			return stream.Permanent(&FileError{Path: s.path, Err: cerr})
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			_ = s.closeFile() // read-only: a close error loses nothing
			return &FileError{Path: s.path, Err: err}
		}
		s.setFile(f)
		s.gen, s.base, s.next, s.savedLen = s.newGen(), w.next, w.next, -1
		s.report(cerr)
		return nil
	}
	s.base, s.next, s.savedLen = w.base, w.next, w.savedLen
	if s.gen = w.gen; s.gen == checkpoint.NoEpoch {
		s.gen, s.savedLen = s.newGen(), -1
	} else {
		s.runGen = min(s.runGen, s.gen)
	}
	return nil
}

// setFile makes f the open file, read from its start.
func (s *LinesSource) setFile(f *os.File) {
	if s.br == nil {
		s.br = bufio.NewReaderSize(f, linesReadBufferBytes)
	} else {
		s.br.Reset(f)
	}
	s.f = f
	s.read, s.head, s.partial = 0, nil, nil
	s.eof, s.rotated, s.switching, s.atEnd = false, false, false, false
}

// skip reads and drops n lines, and returns how many it found: fewer when
// the file ends first. Without Follow an unterminated last line counts (it
// was a line when it was read); with Follow it is kept in s.partial.
func (s *LinesSource) skip(n int64) (int64, error) {
	var got int64
	for got < n {
		data, err := s.br.ReadBytes('\n')
		s.consumed(data)
		if err == nil {
			got++
			continue
		}
		if !errors.Is(err, io.EOF) {
			return got, err
		}
		if len(data) > 0 {
			if !s.cfg.follow {
				got++
			} else {
				s.partial = append(s.partial, data...)
			}
		}
		return got, nil
	}
	return got, nil
}

// newGen returns the generation of a new file: the next number when the
// source keeps identities, else NoEpoch.
func (s *LinesSource) newGen() int32 {
	if s.store == nil {
		return checkpoint.NoEpoch
	}
	g := s.nextGen
	s.nextGen++ // 2^31 files would wrap; at one file a second that is 68 years
	return g
}

// report hands a change the source handled to the OnFileChanged hook.
func (s *LinesSource) report(e *FileChangedError) {
	if s.cfg.onChanged != nil {
		s.cfg.onChanged(e)
	}
}

// Resume makes the next Read start at the position saved in store under the
// source's topic, partition 0, or at the first line when the store has none.
// When the store is a checkpoint.StateStore, Resume also loads the file
// identities saved in it, and from then on saves them there (see
// [LinesSource], "File identity"); the next Read checks the file against the
// identity of the position before it skips the lines below it. A saved
// position at or past the last line makes the next Read return io.EOF (or
// wait, with [Follow]). A failing store (a corrupt position or identity
// snapshot included) returns its error wrapped in a [*FileError] and leaves
// the source as it was; a nil store is [ErrNilStore].
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
	ss, _ := store.(checkpoint.StateStore)
	var gens []fileGeneration
	if ss != nil {
		if gens, err = loadGenerations(ctx, ss, s.topic); err != nil {
			return &FileError{Path: s.path, Err: fmt.Errorf("loading file identity: %w", err)}
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	s.resumed, s.store, s.gens = true, ss, gens
	s.nextGen = 0
	for _, g := range gens {
		s.nextGen = max(s.nextGen, g.Generation+1)
	}
	if found && pos.Epoch >= 0 {
		s.nextGen = max(s.nextGen, pos.Epoch+1)
	}
	s.runGen = s.nextGen
	s.want = resumePoint{gen: checkpoint.NoEpoch, savedLen: -1}
	if !found {
		return nil
	}
	s.want.next = pos.Offset
	if pos.Epoch == checkpoint.NoEpoch {
		return nil // a line index, unchecked
	}
	for _, g := range gens {
		if g.Generation == pos.Epoch && g.Base <= pos.Offset {
			id := g.identity()
			s.want = resumePoint{next: pos.Offset, base: g.Base, gen: g.Generation, id: &id, savedLen: g.FingerprintLen}
			return nil
		}
	}
	s.want.lost = true
	return nil
}

// Close closes the file. The source stays usable: the next Read opens the
// file again, checks that it is still the same file (see [LinesSource]) and
// continues at [LinesSource.Position]. It returns the error of closing the
// file, as a [*FileError].
func (s *LinesSource) Close() error {
	s.pending = nil
	if s.f == nil {
		return nil
	}
	w := resumePoint{next: s.next, base: s.base, gen: s.gen, savedLen: s.savedLen}
	if id, err := s.identity(); err == nil {
		w.id = &id
	}
	s.want = w
	if err := s.closeFile(); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	return nil
}

// closeFile closes the open file and drops what was read of it.
func (s *LinesSource) closeFile() error {
	f := s.f
	s.f, s.eof, s.partial, s.rotated, s.switching, s.atEnd = nil, false, nil, false, false, false
	if f == nil {
		return nil
	}
	return f.Close()
}

// trimLineEnd strips one trailing '\n' and then, unless keepCR, one
// trailing '\r'.
func trimLineEnd(b []byte, keepCR bool) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	if keepCR {
		return b
	}
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
