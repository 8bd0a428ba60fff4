package torture

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
)

// The kinds of journal line. The publisher writes kindWrite before an append
// and kindAck after it returned; a consumer writes kindHandled or
// kindFiltered before its stage function returns, and kindSave /
// kindSaved around each FileStore.Save.
const (
	kindWrite    = 'W' // the publisher is about to append the record id
	kindAck      = 'A' // the append of id returned: partition, offset
	kindHandled  = 'H' // a consumer's last stage finished the record at offset
	kindFiltered = 'F' // a consumer's filter dropped the record at offset
	kindSave     = 'S' // a consumer is about to save position (in offset)
	kindSaved    = 'D' // that save returned nil
)

// entry is one journal line: "K PARTITION OFFSET ID CRC\n", CRC being the
// CRC32C (8 hex digits) of everything before its separating space. The CRC
// makes a line torn by a kill, and the line the next incarnation writes
// after it, parse as nothing rather than as something else.
type entry struct {
	kind      byte
	partition int32
	offset    int64 // the record's offset, or the position for kindSave and kindSaved; -1 for kindWrite
	id        string
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendLine appends e's line to dst.
func (e entry) appendLine(dst []byte) []byte {
	start := len(dst)
	dst = append(dst, e.kind, ' ')
	dst = strconv.AppendInt(dst, int64(e.partition), 10)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, e.offset, 10)
	dst = append(dst, ' ')
	dst = append(dst, e.id...)
	sum := crc32.Checksum(dst[start:], castagnoli)
	dst = append(dst, ' ')
	dst = fmt.Appendf(dst, "%08x", sum)
	return append(dst, '\n')
}

// parseLine parses one line (without its newline); ok is false for a torn or
// garbled line.
func parseLine(line []byte) (e entry, ok bool) {
	sp := bytes.LastIndexByte(line, ' ')
	if sp < 0 || len(line)-sp-1 != 8 {
		return entry{}, false
	}
	sum, err := strconv.ParseUint(string(line[sp+1:]), 16, 32)
	if err != nil || uint32(sum) != crc32.Checksum(line[:sp], castagnoli) {
		return entry{}, false
	}
	f := bytes.Fields(line[:sp])
	if len(f) != 4 || len(f[0]) != 1 {
		return entry{}, false
	}
	p, err1 := strconv.ParseInt(string(f[1]), 10, 32)
	off, err2 := strconv.ParseInt(string(f[2]), 10, 64)
	if err1 != nil || err2 != nil {
		return entry{}, false
	}
	return entry{kind: f[0][0], partition: int32(p), offset: off, id: string(f[3])}, true
}

// journal is an append-only file of entries, shared by the goroutines of one
// process. Every entry is one write(2) on a file opened with O_APPEND, so it
// is in the page cache, and survives a SIGKILL of the writer, once add
// returns; a kill can at most tear the line being written.
type journal struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// openJournal opens path for appending, creating it. When the file does not
// end in a newline (the last incarnation was killed inside a write), it
// writes one, so the torn line stays one garbled line.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("torture: open journal: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("torture: journal %s: %w", path, err)
	}
	if size := fi.Size(); size > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, size-1); err != nil {
			f.Close()
			return nil, fmt.Errorf("torture: journal %s: read its last byte: %w", path, err)
		}
		if last[0] != '\n' {
			if _, err := f.Write([]byte{'\n'}); err != nil {
				f.Close()
				return nil, fmt.Errorf("torture: journal %s: end its torn line: %w", path, err)
			}
		}
	}
	return &journal{f: f}, nil
}

// add writes e as one line.
func (j *journal) add(e entry) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = e.appendLine(j.buf[:0])
	if _, err := j.f.Write(j.buf); err != nil {
		return fmt.Errorf("torture: journal %s: %w", j.f.Name(), err)
	}
	return nil
}

// close closes the file.
func (j *journal) close() error { return j.f.Close() }

// entrySource gives the entries that appeared since its last call: a
// consumer's journal, or what Kafka holds from the relay.
type entrySource interface {
	next() ([]entry, error)
	tornLines() int
}

// tailer reads a journal that another process is appending to, from where
// its last call stopped: whole lines only, keeping a partial last line for
// the next call.
type tailer struct {
	path    string
	off     int64
	partial []byte
	torn    int // lines that did not parse
}

func (t *tailer) tornLines() int { return t.torn }

// next returns the entries appended since the last call. A journal that
// does not exist yet has none.
func (t *tailer) next() ([]entry, error) {
	f, err := os.Open(t.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("torture: read journal: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.NewSectionReader(f, t.off, 1<<62))
	if err != nil {
		return nil, fmt.Errorf("torture: read journal %s at byte %d: %w", t.path, t.off, err)
	}
	t.off += int64(len(data))
	data = append(t.partial, data...)
	var out []entry
	for {
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			break
		}
		if e, ok := parseLine(data[:nl]); ok {
			out = append(out, e)
		} else {
			t.torn++
		}
		data = data[nl+1:]
	}
	t.partial = append([]byte(nil), data...)
	return out, nil
}
