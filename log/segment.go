package log

import (
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// segmentSuffix ends every segment file name; the stem is the segment's base
// offset zero-padded to 20 digits (the width of the largest int64), so a
// plain directory listing sorts segments by offset, as Kafka's do.
const segmentSuffix = ".log"

// segmentName returns the file name of the segment whose first offset is
// base.
func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base offset of a segment file name, or false
// for any other name (temporary files, the lock, metadata).
func parseSegmentName(name string) (int64, bool) {
	stem, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(stem, 10, 64)
	return base, err == nil && base >= 0
}

// segmentWriter is the write path of the active segment. Two
// implementations exist, fileWriter (pwrite through the descriptor) and
// mmapWriter (stores into a shared mapping); nothing above this interface may
// know which one it got, so both pass the same tests and the default can
// follow the benchmark.
type segmentWriter interface {
	// write stores whole, already encoded frames at byte position pos. The
	// body of each frame must be stored before its length becomes visible.
	write(frames []byte, pos int64) error
	// sync forces every written byte to stable storage.
	sync() error
	// cut removes the bytes in [pos, size): later reads see the end of the
	// log at pos.
	cut(pos, size int64) error
	// seal releases the write path of a segment that will take no more
	// records and whose intact frames end at size.
	seal(size int64) error
	// capacity is the most bytes the segment can hold.
	capacity() int64
	// prepare readies the bytes past end, the end of the frames, so that
	// syncing the frames that follow is cheap; the writer calls it when it
	// writes for a sync. mmapWriter writes zeros ahead (zeroAheadBytes);
	// fileWriter does nothing.
	prepare(end int64) error
}

// indexEntry maps an offset to the byte position of its frame.
type indexEntry struct {
	offset int64
	pos    int64
}

// segment is one file of a partition. Reads always go through the file
// descriptor (pread), whichever write path the segment uses: a pread never
// faults when another process truncates or deletes the file, while a load
// from a mapping would raise SIGBUS.
//
// The descriptor is reference counted: the partition holds one reference
// while the segment is in its list, and every Partition.Read takes one (under
// the partition lock) for as long as it preads, without holding the lock.
// Retention can therefore unlink a segment while a read is in it: the read
// finishes with the right bytes, and the last of the two to let go closes the
// descriptor.
type segment struct {
	base int64
	path string
	f    *os.File
	w    segmentWriter // nil when the segment is sealed or read-only
	refs atomic.Int32  // 1 for the partition's list, +1 per read in flight

	size      int64 // bytes of intact frames from position 0
	next      int64 // offset after the last intact frame
	index     []indexEntry
	indexedAt int64      // position of the last index entry, -1 when none
	lazy      *lazyIndex // set when a seal marker was trusted: index built on first read
	// sealing is true from the roll that sealed the segment until its
	// sealer finished (see sealJob); retention leaves it alone meanwhile.
	sealing atomic.Bool

	// maxTimestamp is the newest record timestamp (milliseconds) seen by
	// walk or written by an append; hasTimestamp says whether there was one.
	// Retention by age reads it (see retention.go).
	maxTimestamp int64
	hasTimestamp bool

	// gaps is set for a segment the cleaner compacted (its compacted flag,
	// compacted.go): its frames may skip offsets, and it ends at ends
	// (the offset after its last record before compaction) even when its
	// last frames were removed. Set at open, before any walk.
	gaps   bool
	ends   int64
	mapped int64 // the flag's mapped offset: no Truncate below it (compacted.go)
	tombAt int64 // when a pass first kept its tombstones, unix ms; 0: none (compacted.go)
	// records counts the frames walked: the segment's record count when it
	// has gaps (recordCount). A compacted segment is always walked.
	records int64
}

// recordCount returns how many records s holds: its offsets' span, or for
// a compacted segment the frames its walks counted.
func (s *segment) recordCount() int64 {
	if s.gaps {
		return s.records
	}
	return s.next - s.base
}

func openSegment(dir string, base int64, flag int) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	s := &segment{base: base, path: path, f: f, next: base, indexedAt: -1}
	s.refs.Store(1)
	if err := s.loadCompacted(dir); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// close drops the partition's reference: it seals the write path, if any,
// and closes the descriptor unless a read still holds it (then that read's
// release closes it). The partition calls it once, when the segment leaves
// its list (close, truncation, retention).
func (s *segment) close() error {
	var err error
	if s.w != nil {
		err = s.w.seal(s.size)
		s.w = nil
	}
	if cerr := s.release(); err == nil {
		err = cerr
	}
	return err
}

// acquire takes a reference for a read. The caller holds the partition
// lock, so the segment is still in the list and its count is above zero.
func (s *segment) acquire() { s.refs.Add(1) }

// release drops a reference; the last one closes the descriptor.
func (s *segment) release() error {
	if s.refs.Add(-1) == 0 {
		return s.f.Close()
	}
	return nil
}

// maybeIndex adds an index entry for the frame of offset off at pos when the
// previous entry lies interval bytes or more behind it.
func (s *segment) maybeIndex(off, pos int64, interval int) {
	if s.indexedAt < 0 || pos-s.indexedAt >= int64(interval) {
		s.index = append(s.index, indexEntry{offset: off, pos: pos})
		s.indexedAt = pos
	}
}

// dropIndexFrom removes index entries at or above offset off.
func (s *segment) dropIndexFrom(off int64) {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].offset >= off })
	s.index = s.index[:i]
	s.indexedAt = -1
	if i > 0 {
		s.indexedAt = s.index[i-1].pos
	}
}

// lookup returns the index entry at or below offset off (the segment start
// when none is).
func (s *segment) lookup(off int64) indexEntry {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].offset > off })
	if i == 0 {
		return indexEntry{offset: s.base, pos: 0}
	}
	return s.index[i-1]
}

// stopReason says why a walk over a segment's frames ended.
type stopReason int

const (
	stopEOF  stopReason = iota // the file ends exactly after a frame
	stopZero                   // a zero length prefix: the end of a ModeMmap segment (its reserved zeros)
	stopTorn                   // a header or body runs past the end of the file
	stopCRC                    // the body does not match its CRC32C
	stopBad                    // the body does not decode, or holds the wrong offset
)

// stopHalted: the visitor of walkFrames asked to stop (ScanSegment).
const stopHalted = stopBad + 1

func (r stopReason) String() string {
	return [...]string{"end of file", "zero length prefix", "length past end of file",
		"crc mismatch", "undecodable body or unexpected offset", "stopped by the caller"}[r]
}

// intact reports whether the walk ended at a clean end of log.
func (r stopReason) intact() bool { return r == stopEOF || r == stopZero }

// walkBufferBytes is the read size of a walk. Reading one header per
// syscall would cost a syscall per record; 1 MiB chunks keep a walk of a
// 64 MiB segment to 64 reads.
const walkBufferBytes = 1 << 20

// walk verifies frames from byte position s.size (offset s.next) onwards,
// advancing s.size, s.next and the index over every intact frame, and
// returns why it stopped. It never modifies the file.
// buf is reused between calls (nil allocates walkBufferBytes); the possibly
// grown buffer is returned.
func (s *segment) walk(buf []byte, interval int) (stopReason, []byte, error) {
	return s.walkFrames(buf, interval, nil)
}

// walkFrames is walk, calling visit (when not nil) with the byte position,
// CRC and body of every intact frame after it has been counted; body
// aliases buf. When visit returns false the walk stops there with
// stopHalted.
func (s *segment) walkFrames(buf []byte, interval int, visit func(pos int64, crc uint32, body []byte) bool) (stopReason, []byte, error) {
	if len(buf) == 0 {
		buf = make([]byte, walkBufferBytes)
	}
	for {
		n, err := s.f.ReadAt(buf, s.size)
		if err != nil && err != io.EOF {
			return 0, buf, fmt.Errorf("log: read segment %s at byte %d: %w", s.path, s.size, err)
		}
		atEOF := n < len(buf)
		chunk := buf[:n]
		for {
			if len(chunk) < frameHeaderBytes {
				if !atEOF {
					break // refill
				}
				if len(chunk) == 0 {
					s.next = max(s.next, s.ends) // a compacted segment ends where it did before (compacted.go)
					return stopEOF, buf, nil
				}
				if allZero(chunk) {
					return stopZero, buf, nil
				}
				return stopTorn, buf, nil
			}
			bodyLen, crc := frameHeader(chunk)
			if bodyLen == 0 {
				return stopZero, buf, nil
			}
			need := int64(padded(frameHeaderBytes + int(bodyLen)))
			if need > maxFrameBytes {
				return stopTorn, buf, nil
			}
			if int64(len(chunk)) < need {
				if atEOF {
					return stopTorn, buf, nil
				}
				if need > int64(len(buf)) {
					// The length is untrusted: it sizes nothing before it
					// is checked. It must end inside the file (a garbage
					// length of 2 GiB must not allocate 2 GiB), and a
					// frame larger than walkBufferBytes must match its
					// CRC32C, computed in walkBufferBytes pieces, before
					// the buffer grows to it: a damaged length in front
					// of a ModeMmap segment's reserved zeros must not
					// allocate their size. A real frame that large is
					// read twice.
					fi, err := s.f.Stat()
					if err != nil {
						return 0, buf, fmt.Errorf("log: stat segment %s: %w", s.path, err)
					}
					if s.size+need > fi.Size() {
						return stopTorn, buf, nil
					}
					if need > walkBufferBytes {
						scratch := buf
						if len(scratch) < walkBufferBytes {
							scratch = nil // crcAt allocates walkBufferBytes
						}
						sum, err := s.crcAt(s.size+frameHeaderBytes, int64(bodyLen), scratch)
						if err != nil {
							return 0, buf, err
						}
						if sum != crc {
							return stopCRC, buf, nil
						}
					}
					buf = make([]byte, need)
				}
				break // refill from the start of this frame
			}
			body := chunk[frameHeaderBytes : frameHeaderBytes+int(bodyLen)]
			if crcOf(body) != crc {
				return stopCRC, buf, nil
			}
			off := s.next
			if s.gaps && len(body) >= bodyFixedBytes {
				off = max(off, bodyOffset(body)) // compaction removed the records between
			}
			if !checkBody(body, off) {
				return stopBad, buf, nil
			}
			s.maybeIndex(off, s.size, interval)
			s.noteTimestamp(bodyTimestamp(body))
			s.size += need
			s.next = off + 1
			s.records++
			chunk = chunk[need:]
			if visit != nil && !visit(s.size-need, crc, body) {
				return stopHalted, buf, nil
			}
		}
		if atEOF && len(chunk) == 0 {
			s.next = max(s.next, s.ends)
			return stopEOF, buf, nil
		}
	}
}

// crcAt returns the CRC32C of the n bytes of s's file at byte position
// pos, read in pieces of len(buf) (walkBufferBytes when buf is empty), so
// that an untrusted length is checked without a buffer of its size. The
// caller has checked that the file holds them; a file cut meanwhile is an
// error.
func (s *segment) crcAt(pos, n int64, buf []byte) (uint32, error) {
	if len(buf) == 0 {
		buf = make([]byte, walkBufferBytes)
	}
	var sum uint32
	for n > 0 {
		b := buf[:min(n, int64(len(buf)))]
		if _, err := s.f.ReadAt(b, pos); err != nil {
			return 0, fmt.Errorf("log: read segment %s at byte %d: %w", s.path, pos, err)
		}
		sum = crc32.Update(sum, castagnoli, b)
		pos += int64(len(b))
		n -= int64(len(b))
	}
	return sum, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// readBuf is how one read lays out the bytes of the records it returns.
//
// By default (reuse false) a read preads into a pooled scratch buffer
// (readScratch), verifies the frames there, and copies the bytes of the
// frames it returns into one new buffer of exactly their size, which the
// records' Key, Value and headers (keys included) alias: one allocation per
// batch (two with headers: their []Header), never per record, and bytes that
// stay valid for as long as the caller keeps them.
//
// With reuse (Reader.SetReuseBytes) the records alias buf itself, which the
// next read overwrites: no copy and no allocation once buf has grown, and
// record bytes valid only until the next read. Header keys are still copied,
// into a buffer of the batch (strings must never change).
type readBuf struct {
	reuse bool
	buf   []byte   // reuse: the buffer the records alias
	used  int      // reuse: bytes of buf taken by earlier chunks of this read
	hdrs  []Header // reuse: the headers of the last batch, reused
}

// readScratch recycles the pread buffers of default (copying) reads.
var readScratch = sync.Pool{New: func() any { return new([]byte) }}

// readSlack is what a read asks for beyond maxBytes: the frames between
// the index entry it starts from and the offset it wants (the index has an
// entry every WithIndexIntervalBytes, 4 KiB by default) and the end of the
// frame that crosses the budget.
const readSlack = 64 << 10

// read appends records from offset off onwards to dst and returns the
// extended slice: at most maxBytes of frames but always at least one when
// one exists, and never reading at or beyond byte position end. e is
// s.lookup(off), taken by the caller under the partition lock (the index
// grows with appends); read itself touches only the descriptor, so it runs
// without the lock. rb says where the records' bytes live (nil: the
// default, see readBuf). Every frame returned is CRC-checked and decoded
// again here, after the walk that verified it: a frame that changed since
// is a *CorruptError.
func (s *segment) read(dst []Record, e indexEntry, off int64, maxBytes int, end int64, topic string, partition int32, rb *readBuf) ([]Record, error) {
	if rb == nil {
		rb = &readBuf{}
	}
	rb.used = 0
	if rb.reuse {
		rb.hdrs = rb.hdrs[:0]
	}
	n0 := len(dst)
	var skip Record // frames below off decode here, keys aliasing buf
	var skipHdrs []Header
	skipKeys := keyStore{alias: true}
	pos := e.pos
	want := int64(maxBytes) + readSlack
	budget := int64(maxBytes)
	for pos < end {
		n := min(want, end-pos)
		buf, scratch := rb.chunk(int(n))
		if _, err := s.f.ReadAt(buf, pos); err != nil && err != io.EOF {
			rb.done(scratch, buf)
			return dst, fmt.Errorf("log: read segment %s at byte %d: %w", s.path, pos, err)
		}
		// First pass: verify the frames and find those the batch returns,
		// [first, last) of buf, and how many headers and header key bytes
		// they hold.
		at, first, last := 0, -1, 0
		nrec, nhdr, nkey := len(dst)-n0, 0, 0
		chunkPos, chunkOff := pos, off
		full, progressed := false, false
		// fail returns the records verified before a bad frame, as a read
		// always has, with the *CorruptError of the bad one.
		fail := func() ([]Record, error) {
			err := error(&CorruptError{Topic: topic, Partition: partition, Segment: s.path,
				Position: pos, Offset: off, Reason: "frame changed after it was verified"})
			if first >= 0 {
				var derr error
				if dst, derr = rb.decode(dst, buf[first:last], nrec-(len(dst)-n0), nhdr, nkey, chunkPos, chunkOff, s.path, topic, partition); derr != nil {
					err = derr
				}
			}
			rb.done(scratch, buf)
			return dst, err
		}
		for len(buf)-at >= frameHeaderBytes {
			bodyLen, crc := frameHeader(buf[at:])
			need := padded(frameHeaderBytes + int(bodyLen))
			if bodyLen == 0 || need > len(buf)-at {
				break
			}
			body := buf[at+frameHeaderBytes : at+frameHeaderBytes+int(bodyLen)]
			if crcOf(body) != crc || len(body) < bodyFixedBytes {
				return fail()
			}
			progressed = true
			o := bodyOffset(body)
			if o < off {
				// Between the index entry and off: skipped, but checked
				// like every frame read.
				var err error
				if skipHdrs, err = decodeBodyInto(body, &skip, skipHdrs[:0], &skipKeys); err != nil {
					return fail()
				}
			} else {
				if nrec > 0 && budget < int64(need) {
					full = true
					break
				}
				h, k, ok := bodyHeaders(body)
				if !ok {
					return fail()
				}
				if first < 0 {
					first, chunkPos, chunkOff = at, pos, off
				}
				budget -= int64(need)
				nrec++
				nhdr += h
				nkey += k
				last = at + need
				off = o + 1
			}
			pos += int64(need)
			at += need
		}
		if first >= 0 {
			var err error
			dst, err = rb.decode(dst, buf[first:last], nrec-(len(dst)-n0), nhdr, nkey, chunkPos, chunkOff, s.path, topic, partition)
			if err != nil {
				rb.done(scratch, buf)
				return dst, err
			}
		}
		// The next frame's length, read before buf goes back to the pool
		// (another read may fill it at once).
		nextLen, haveNext := uint32(0), len(buf)-at >= frameHeaderBytes
		if haveNext {
			nextLen, _ = frameHeader(buf[at:])
		}
		rb.done(scratch, buf)
		if full || budget <= 0 {
			return dst, nil
		}
		if !progressed {
			if haveNext {
				bodyLen := nextLen
				want = int64(padded(frameHeaderBytes + int(bodyLen))) // one frame larger than the buffer
				if bodyLen == 0 || pos+want > end {
					return dst, &CorruptError{Topic: topic, Partition: partition, Segment: s.path,
						Position: pos, Offset: off, Reason: "frame runs past the verified end"}
				}
				continue
			}
			break
		}
		want = int64(maxBytes) + readSlack
		if len(dst) > n0 {
			want = budget
		}
	}
	return dst, nil
}

// chunk returns a buffer of n bytes to pread into: the next free part of
// rb.buf with reuse (grown when too small; the records of earlier chunks of
// this read keep the old array), a pooled scratch buffer otherwise (scratch
// is its pool entry, for done).
func (rb *readBuf) chunk(n int) (buf []byte, scratch *[]byte) {
	if rb.reuse {
		if cap(rb.buf)-rb.used < n {
			rb.buf = make([]byte, max(n, 2*cap(rb.buf)))
			rb.used = 0
		}
		buf = rb.buf[rb.used : rb.used+n]
		return buf, nil
	}
	scratch = readScratch.Get().(*[]byte)
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	return (*scratch)[:n], scratch
}

// done gives a chunk back: the scratch buffer to its pool, or with reuse
// marks the part of rb.buf the chunk's records alias as taken.
func (rb *readBuf) done(scratch *[]byte, buf []byte) {
	if scratch != nil {
		if cap(*scratch) <= 4*(1<<20+readSlack) {
			readScratch.Put(scratch)
		}
		return
	}
	rb.used += len(buf)
}

// decode appends the records of frames, verified whole frames starting with
// the one of offset off at byte position pos of the segment, to dst. nrec,
// nhdr and nkey are the records, headers and header key bytes they hold
// (bodyHeaders). By
// default it first copies frames into a buffer of their exact size, which
// the records alias, and carves their headers from one slice of nhdr; with
// reuse the records alias frames and the headers rb.hdrs. A body that does
// not decode is a *CorruptError, as in the read of a single frame.
func (rb *readBuf) decode(dst []Record, frames []byte, nrec, nhdr, nkey int, pos, off int64, path, topic string, partition int32) ([]Record, error) {
	var hdrs []Header
	var ks keyStore
	if rb.reuse {
		hdrs = rb.hdrs
		if nkey > 0 {
			ks.buf = make([]byte, 0, nkey)
		}
	} else {
		frames = append([]byte(nil), frames...)
		ks.alias = true
		if nhdr > 0 {
			hdrs = make([]Header, 0, nhdr)
		}
	}
	dst = slices.Grow(dst, nrec)
	for len(frames) > 0 {
		bodyLen, _ := frameHeader(frames)
		need := padded(frameHeaderBytes + int(bodyLen))
		body := frames[frameHeaderBytes : frameHeaderBytes+int(bodyLen)]
		dst = append(dst, Record{})
		r := &dst[len(dst)-1]
		var err error
		if hdrs, err = decodeBodyInto(body, r, hdrs, &ks); err != nil {
			dst = dst[:len(dst)-1]
			return dst, &CorruptError{Topic: topic, Partition: partition, Segment: path,
				Position: pos, Offset: off, Reason: "frame changed after it was verified"}
		}
		pos += int64(need)
		frames = frames[need:]
		if r.Offset < off {
			dst = dst[:len(dst)-1] // not reached in a verified segment: offsets are consecutive
			continue
		}
		r.Topic, r.Partition = topic, partition
		off = r.Offset + 1
	}
	if rb.reuse {
		rb.hdrs = hdrs
	}
	return dst, nil
}
