package log

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// epochFileName is a partition's epoch history, in the format of Kafka's
// leader-epoch-checkpoint file: a version line (0), a count line, then one
// "epoch startOffset" line per epoch, oldest first.
//
//	0
//	3
//	0 0
//	1 95
//	2 140
//
// The file is replaced whole (temporary file, fsync, rename, directory
// fsync) before the first append of a new epoch, so an epoch recorded in a
// record is always in the file.
const epochFileName = "leader-epoch-checkpoint"

// epochEntry says that epoch's records start at offset start.
type epochEntry struct {
	epoch int32
	start int64
}

// epochs is a partition's epoch history, ordered by epoch and start.
type epochs []epochEntry

// readEpochs reads the epoch file of a partition folder; a missing file is an
// empty history. A file that does not parse is *CorruptError-free but wraps
// ErrCorrupt naming the path, and so is one that is not a regular file (a
// symbolic link, a FIFO: see readRegularFile).
func readEpochs(dir string) (epochs, error) {
	path := filepath.Join(dir, epochFileName)
	b, err := readRegularFile(path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := parseEpochs(b)
	if err != nil {
		return nil, fmt.Errorf("%w: epoch file %s: %v", ErrCorruptMetadata, path, err)
	}
	return e, nil
}

func parseEpochs(b []byte) (epochs, error) {
	// Lines end in "\n" (encode's) or "\r\n" (the file passed through an
	// editor that writes CRLF). A last line without "\n" is taken as it
	// is, so a stray "\r" at the end of the file is not a line ending
	// (bufio.ScanLines would drop it, and accept "0\r" as "0": found by
	// FuzzParseEpochs).
	rest := b
	line := func() (string, bool) {
		if len(rest) == 0 {
			return "", false
		}
		l, after, found := bytes.Cut(rest, []byte{'\n'})
		rest = after
		if found {
			l = bytes.TrimSuffix(l, []byte{'\r'})
		}
		return string(l), true
	}
	v, ok := line()
	if !ok || v != "0" {
		return nil, fmt.Errorf("version line %q, want 0", v)
	}
	c, ok := line()
	n64, ok := decimal(c, ok, 31)
	if !ok {
		return nil, fmt.Errorf("count line %q is not a count", c)
	}
	n := int(n64)
	// The count is untrusted: each entry takes a line of at least 4 bytes
	// ("0 0\n"), so the file cannot hold more than len(b)/4 of them, and a
	// damaged count of 2^31 must not size the slice.
	if n > len(b)/4 {
		return nil, fmt.Errorf("count line %q: a file of %d bytes holds at most %d entries", c, len(b), len(b)/4)
	}
	out := make(epochs, 0, n)
	for i := range n {
		l, ok := line()
		es, ss, found := strings.Cut(l, " ")
		epoch, eok := decimal(es, ok && found, 31)
		start, sok := decimal(ss, eok, 63)
		if !sok {
			return nil, fmt.Errorf("entry %d %q is not \"epoch startOffset\"", i, l)
		}
		e := epochEntry{epoch: int32(epoch), start: start}
		if i > 0 && (e.epoch <= out[i-1].epoch || e.start < out[i-1].start) {
			return nil, fmt.Errorf("entry %d %q is not after %d %d", i, l, out[i-1].epoch, out[i-1].start)
		}
		out = append(out, e)
	}
	if extra, ok := line(); ok {
		return nil, fmt.Errorf("unexpected line %q after %d entries", extra, n)
	}
	return out, nil
}

// decimal parses s, when ok, as what encode writes for a number: a
// non-negative integer below 2^bits in decimal, without sign or leading
// zeros. Anything else (a sign, "007", a second space, a trailing field)
// was not written by encode, and the file is corrupt.
func decimal(s string, ok bool, bits int) (int64, bool) {
	if !ok || s == "" || s[0] == '+' || s[0] == '-' || len(s) > 1 && s[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, bits+1)
	return v, err == nil && v >= 0
}

func (e epochs) encode() []byte {
	b := fmt.Appendf(nil, "0\n%d\n", len(e))
	for _, x := range e {
		b = fmt.Appendf(b, "%d %d\n", x.epoch, x.start)
	}
	return b
}

// write replaces the epoch file of dir with e, durably.
func (e epochs) write(dir string) error {
	if err := replaceFile(dir, epochFileName, e.encode()); err != nil {
		return fmt.Errorf("log: write epoch file in %s: %w", dir, err)
	}
	return nil
}

// latest returns the current epoch, -1 for an empty history.
func (e epochs) latest() int32 {
	if len(e) == 0 {
		return -1
	}
	return e[len(e)-1].epoch
}

// begin returns the history with a new epoch (one above every epoch ever
// recorded) starting at offset start. Entries starting at or above start
// are dropped first, as Kafka's truncateFromEnd does: their records are gone
// (truncated) or were never written (an epoch that appended nothing).
func (e epochs) begin(start int64) epochs {
	next := e.latest() + 1
	i := sort.Search(len(e), func(i int) bool { return e[i].start >= start })
	return append(e[:i:i], epochEntry{epoch: next, start: start})
}

// endOffset returns where epoch ended: the start offset of the first later
// epoch, or logEnd when epoch is the latest (or above it, as a checkpoint
// from a log since recreated would be). ok is false when epoch is older than
// the whole history, so nothing is known about it.
func (e epochs) endOffset(epoch int32, logEnd int64) (int64, bool) {
	// The first entry above epoch starts where epoch (or the epoch below it
	// that it replaced) ended.
	i := sort.Search(len(e), func(i int) bool { return e[i].epoch > epoch })
	if i == 0 {
		return 0, false
	}
	if i == len(e) {
		return logEnd, true
	}
	return e[i].start, true
}

// divergence returns the start offset of the first epoch after epoch: the
// point from which records of a later epoch may sit at offsets a reader in
// epoch saw with other contents. ok is false when epoch is the latest (or
// unknown): nothing diverged.
func (e epochs) divergence(epoch int32) (int64, bool) {
	i := sort.Search(len(e), func(i int) bool { return e[i].epoch > epoch })
	if i == 0 || i == len(e) {
		return 0, false
	}
	return e[i].start, true
}
