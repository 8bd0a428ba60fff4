package log

// Inspection: what the strom command's topics list, topics describe, dump
// and verify read. Everything here reads; nothing creates a directory, takes
// a lock or changes a file, so it runs beside a writer in another process.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Topics returns the names of the topics in the log directory, sorted: every
// folder named by a valid topic name (see ValidateTopicName) that holds a
// topic.json. Other files and folders are left out. It reads the directory
// at each call, so it also lists topics other processes created. Errors: a
// missing log directory wraps fs.ErrNotExist and names it; other I/O errors
// name the directory.
func (l *Log) Topics() ([]string, error) { return ListTopics(l.dir) }

// ListTopics is Log.Topics for the log directory dir, without opening it.
func ListTopics(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("log: list topics of log directory %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() || ValidateTopicName(e.Name()) != nil {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name(), topicMetaFile))
		if err == nil && fi.Mode().IsRegular() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// Write paths as SegmentInfo.WritePath names them.
const (
	WritePathMmap   = "mmap"   // the active segment, reserved in steps, written through a mapping
	WritePathFile   = "file"   // the active segment, written with pwrite
	WritePathSealed = "sealed" // a segment with a successor: it takes no more records
)

// SegmentInfo describes one segment file of a partition.
type SegmentInfo struct {
	Path       string // the segment file's path
	BaseOffset int64  // offset of its first record (its name)
	NextOffset int64  // one past its last record
	// Records is how many records it holds: NextOffset - BaseOffset, unless
	// the cleaner removed some (Compacted).
	Records int64
	// Bytes is the size in bytes of its intact frames: the data, not what
	// is reserved. A ModeMmap active segment's file is longer (its zero
	// tail); a sealed segment's file is exactly this long.
	Bytes int64
	// DiskBytes is the space the file takes on disk, in bytes (st_blocks
	// * 512): a reserved ModeMmap segment reserves more than its data, a
	// sparse one may take less than its length.
	DiskBytes int64
	// FileBytes is the file's length in bytes (st_size).
	FileBytes int64
	// Sealed reports that the segment has a successor: it was forced to
	// disk and takes no more records.
	Sealed bool
	// SealMarker reports that its seal marker (<base>.sealed) exists, which
	// lets Open trust it without walking it. A sealed segment without one
	// (a failed marker write, or markers removed) is walked at open.
	SealMarker bool
	// Compacted reports that the cleaner rewrote the segment (its
	// compacted flag, <base>.compacted): its offsets skip the records
	// removed, and it ends at NextOffset even when its last ones were.
	Compacted bool
	// WritePath is WritePathMmap or WritePathFile for the active segment,
	// WritePathSealed for a sealed one. Through a partition this process
	// does not write (a ReadOnly log, or a topic not locked yet), the
	// active segment counts as WritePathMmap when its file goes on in
	// zeros past its frames and any bytes torn after them (the reserved
	// tail of a ModeMmap segment), else as WritePathFile (see writePathOf
	// for the two rare cases that read wrong).
	WritePath string
	ModTime   time.Time // last write: the file's modification time
}

// Segments describes the partition's segments, oldest first, as the
// partition knows them (on a partition this process does not write, after
// looking for the writer's new records and segments, as HighWatermark does).
// Bytes and offsets come from the partition; DiskBytes, FileBytes and
// ModTime from a stat of each file. A segment deleted by retention between
// the two is left out. Errors: ErrClosed; a failed stat, naming the file.
func (p *Partition) Segments() ([]SegmentInfo, error) {
	if p.ro.Load() {
		p.refresh((*refresher).refreshLocked)
	} else {
		_ = p.w.awaitSealers() // so that every sealed segment shows its marker; a failure shows as none
	}
	p.mu.RLock()
	if p.closed.Load() {
		p.mu.RUnlock()
		return nil, fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	infos := make([]SegmentInfo, p.segs.len())
	for i, s := range p.segs.all() {
		infos[i] = SegmentInfo{Path: s.path, BaseOffset: s.base, NextOffset: s.next,
			Records: s.recordCount(), Bytes: s.size, Sealed: i < p.segs.len()-1, Compacted: s.gaps}
		switch s.w.(type) {
		case *mmapWriter:
			infos[i].WritePath = WritePathMmap
		case *fileWriter:
			infos[i].WritePath = WritePathFile
		}
		if infos[i].Sealed {
			infos[i].WritePath = WritePathSealed
		}
	}
	p.mu.RUnlock()

	out := infos[:0]
	for _, in := range infos {
		fi, err := os.Stat(in.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted by retention since
		}
		if err != nil {
			return nil, fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
		}
		in.FileBytes, in.ModTime = fi.Size(), fi.ModTime()
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			in.DiskBytes = st.Blocks * 512
		}
		if in.WritePath == "" {
			in.WritePath = writePathOf(in.Path, in.Bytes, in.FileBytes)
		}
		_, err = os.Stat(filepath.Join(filepath.Dir(in.Path), sealedName(in.BaseOffset)))
		in.SealMarker = err == nil
		out = append(out, in)
	}
	return out, nil
}

// writePathOf tells the write path of the active segment at path, whose
// intact frames end at byte frames of a file of size bytes, from the file
// alone: a partition this process does not write has no writer to ask, and
// the write mode is stored nowhere (it is an option of each Log, WithMode).
// A ModeMmap writer reserves the file ahead of its frames and leaves zeros
// there; a ModeFile writer writes nothing past its last frame, torn or not.
// So a file that goes on, in zeros, past the 8-byte aligned end of its last
// non-zero byte is WritePathMmap, any other WritePathFile: a file exactly
// as long as its frames, and one that ends in a torn frame, whose bytes were
// taken for a reserved tail before (describe said "mmap" of a ModeFile
// segment with a torn tail). Two cases read wrong and are rare: a ModeMmap
// segment its writer closed, shrunk to its frames, reads as file (its
// bytes are a ModeFile segment's), and a ModeFile frame torn inside a run
// of 8 or more zero bytes of its value reads as mmap. An unreadable file
// reads as file.
func writePathOf(path string, frames, size int64) string {
	if size <= frames {
		return WritePathFile
	}
	f, err := os.Open(path)
	if err != nil {
		return WritePathFile
	}
	defer f.Close()
	nz, err := lastNonZero(f, frames, size)
	if err != nil || int64(padded(int(nz-frames)))+frames >= size {
		return WritePathFile
	}
	return WritePathMmap
}

// Frame is one frame of a segment file as ScanSegment reads it.
type Frame struct {
	Position int64  // byte position of the frame in the file
	Length   uint32 // body length L in bytes, from the length prefix (0 when the prefix itself is cut short)
	CRC      uint32 // the stored CRC32C
	CRCOK    bool   // the body's CRC32C matches CRC
	// Record is the decoded record (Offset, Epoch, Timestamp, Key, Value,
	// Headers) when the body decodes, also for a frame whose CRC does not
	// match; the zero Record otherwise. Topic and Partition are not set.
	// Its Key, Value and header values alias ScanSegment's buffer: they are
	// valid only until fn returns (copy what you keep).
	Record Record
	// Err is nil for an intact frame; else a *FrameError saying why it is
	// not (length past the end of the file, CRC mismatch, a body that does
	// not decode or holds another offset than the one expected).
	Err error
}

// FrameError says why a frame ScanSegment read is not intact. Whether that
// is a torn tail or corruption depends on where the frame is (see Verify);
// a torn frame matches io.ErrUnexpectedEOF.
type FrameError struct {
	Segment  string // path of the segment file
	Position int64  // byte position of the frame
	Offset   int64  // offset the frame should hold: the segment's base plus the intact frames before it
	Reason   string // what failed, with the numbers: "crc mismatch: ...", "length past end of file: ...", ...
	Torn     bool   // the frame runs past the end of the file
	// IntactAt is the byte position of the first intact frame behind this
	// one that holds Offset or a later offset (at an 8-byte boundary, as
	// recovery and Verify look for it), 0 when there is none. Non-zero, the
	// bad frame is damage, not a torn tail: records follow it.
	IntactAt     int64
	IntactOffset int64 // the offset the frame at IntactAt holds
}

// Error names the segment, the position and the expected offset.
func (e *FrameError) Error() string {
	return fmt.Sprintf("log: segment %s: bad frame at byte %d (offset %d): %s", e.Segment, e.Position, e.Offset, e.Reason)
}

// Unwrap returns io.ErrUnexpectedEOF for a torn frame, nil otherwise.
func (e *FrameError) Unwrap() error {
	if e.Torn {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// ScanSegment reads the segment file at path frame by frame and calls fn
// for each, in order, until the end of the data (the end of the file, or a
// zero length prefix with no intact frame behind it: the zero tail of a
// reserved segment), the first frame that is not intact (passed to fn with
// Err set, a *FrameError whose IntactAt says whether an intact frame lies
// behind it; a zero length prefix with one behind it is passed so too, with
// Length 0; ScanSegment then returns nil: it reports, it does not judge), or
// fn returns false.
//
// A frame is intact when its length fits in the file, its CRC32C matches
// and its body decodes holding the expected offset: the base offset in the
// file's name (a 20-digit segment name), and one more for each frame after
// it; for a file named otherwise, the offset the first frame holds.
//
// It opens the file read-only and takes no lock, so it works beside a
// writer (in this process or another): it sees the frames written when it
// reads them. It reads like recovery, in 1 MiB chunks, checking a length
// against the bytes left in the file before sizing any buffer by it. The
// records' bytes alias its buffer (see Frame.Record). Errors: opening or
// reading the file (an *os.PathError naming it).
func ScanSegment(path string, fn func(Frame) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("log: scan segment: %w", err)
	}
	defer f.Close()
	base, ok := parseSegmentName(filepath.Base(path))
	if !ok {
		base = firstFrameOffset(f)
	}
	s := &segment{base: base, path: path, f: f, next: base, indexedAt: -1}
	if err := s.loadCompacted(filepath.Dir(path)); err != nil {
		return err
	}
	visit := func(pos int64, crc uint32, body []byte) bool {
		fr := Frame{Position: pos, Length: uint32(len(body)), CRC: crc, CRCOK: true}
		fr.Err = decodeBody(body, &fr.Record) // nil: walkFrames checked the body
		return fn(fr)
	}
	var buf []byte
	zeroAt := int64(-1) // where a zero length prefix was read once
	for {
		var why stopReason
		why, buf, err = s.walkFrames(buf, math.MaxInt, visit)
		if err != nil || why == stopEOF || why == stopHalted {
			return err
		}
		var fr Frame
		if why == stopZero {
			// The end of the data, unless an intact frame lies behind the
			// zero length, still when walked once more: a ModeMmap writer
			// stores a frame's length after its body.
			_, _, found, err := s.findFrameAfter(s.size, s.next)
			if err != nil {
				return fmt.Errorf("log: scan segment: %w", err)
			}
			if !found {
				return nil
			}
			if zeroAt != s.size {
				zeroAt = s.size
				continue
			}
			fr = s.zeroFrame()
		} else if fr, err = s.badFrame(why); err != nil {
			return err
		}
		if fe, ok := fr.Err.(*FrameError); ok {
			at, off, found, err := s.findFrameAfter(s.size, s.next)
			if err != nil {
				return fmt.Errorf("log: scan segment: %w", err)
			}
			if found {
				fe.IntactAt, fe.IntactOffset = at, off
			}
		}
		if !fn(fr) || fr.Err != nil {
			return nil
		}
		// Intact when read again (a writer finished it after the walk saw
		// it half done): go on after it.
		s.size += int64(padded(frameHeaderBytes + int(fr.Length)))
		s.next++
	}
}

// zeroFrame is the frame at s.size, whose length prefix is zero, as a bad
// frame.
func (s *segment) zeroFrame() Frame {
	var h [frameHeaderBytes]byte
	_, _ = s.f.ReadAt(h[:], s.size)
	_, crc := frameHeader(h[:])
	return Frame{Position: s.size, CRC: crc, Err: &FrameError{Segment: s.path, Position: s.size, Offset: s.next,
		Reason: "zero length prefix"}}
}

// firstFrameOffset returns the offset the first frame of f claims, or 0
// when it has none that long.
func firstFrameOffset(f *os.File) int64 {
	var b [frameHeaderBytes + bodyFixedBytes]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return 0
	}
	return bodyOffset(b[frameHeaderBytes:])
}

// badFrame describes the frame at s.size, where a walk stopped for why (a
// reason that is not intact): its header, and for a CRC mismatch or a bad
// body, the body decoded as far as it goes. It reads the file again, at
// most the body length, which the walk found inside the file; a body past
// walkBufferBytes only once its CRC32C, computed in pieces, matches.
func (s *segment) badFrame(why stopReason) (Frame, error) {
	fr := Frame{Position: s.size}
	fe := &FrameError{Segment: s.path, Position: s.size, Offset: s.next, Reason: why.String()}
	fr.Err = fe
	fi, err := s.f.Stat()
	if err != nil {
		return fr, fmt.Errorf("log: scan segment: %w", err)
	}
	left := fi.Size() - s.size
	var h [frameHeaderBytes]byte
	if n, err := s.f.ReadAt(h[:], s.size); n < len(h) {
		if err != nil && err != io.EOF {
			return fr, fmt.Errorf("log: read segment %s at byte %d: %w", s.path, s.size, err)
		}
		fe.Torn = true
		fe.Reason = fmt.Sprintf("frame header past end of file: %d of %d bytes left", max(left, 0), frameHeaderBytes)
		return fr, nil
	}
	fr.Length, fr.CRC = frameHeader(h[:])
	need := int64(padded(frameHeaderBytes + int(fr.Length)))
	if why == stopTorn || frameHeaderBytes+int64(fr.Length) > left {
		fe.Torn = true
		fe.Reason = fmt.Sprintf("length past end of file: the frame needs %d bytes, %d are left", need, left)
		return fr, nil
	}
	if fr.Length > walkBufferBytes {
		// The length is untrusted: a body larger than a walk's buffer is
		// checked against its CRC32C in pieces before a buffer of its size
		// is made (a damaged length in a reserved segment ends inside
		// the file).
		sum, err := s.crcAt(s.size+frameHeaderBytes, int64(fr.Length), nil)
		if err != nil {
			return fr, err
		}
		if sum != fr.CRC {
			fe.Reason = fmt.Sprintf("crc mismatch: stored %08x, computed %08x", fr.CRC, sum)
			return fr, nil
		}
	}
	body := make([]byte, fr.Length) // inside the file, checked above
	if _, err := s.f.ReadAt(body, s.size+frameHeaderBytes); err != nil {
		return fr, fmt.Errorf("log: read segment %s at byte %d: %w", s.path, s.size, err)
	}
	sum := crcOf(body)
	fr.CRCOK = sum == fr.CRC
	decoded := decodeBody(body, &fr.Record) == nil
	if !decoded {
		fr.Record = Record{}
	}
	switch {
	case !fr.CRCOK:
		fe.Reason = fmt.Sprintf("crc mismatch: stored %08x, computed %08x", fr.CRC, sum)
	case !decoded:
		fe.Reason = "undecodable body"
	case fr.Record.Offset != s.next:
		fe.Reason = fmt.Sprintf("unexpected offset %d, want %d", fr.Record.Offset, s.next)
	default:
		fr.Err = nil // intact now: a writer finished it after the walk saw it half done
	}
	return fr, nil
}

// VerifyReport is what Verify read and found.
type VerifyReport struct {
	Topics     int   // topics verified
	Partitions int   // partitions verified
	Segments   int   // segment files read
	Records    int64 // intact records read
	Bytes      int64 // bytes of intact frames read
	// Problems lists every place where a frame that should be intact is
	// not, in the order found, each naming topic, partition, segment,
	// byte position and the offset the frame should hold (see Verify for
	// the rules). A metadata file that does not parse is a problem too: its
	// Segment is then that file's path, and Position and Offset are -1
	// (Partition too, for a topic's topic.json).
	Problems []*CorruptError
	// TornTails lists the partitions whose last segment ends in a torn
	// tail, which the writer's next open cuts: not corruption.
	TornTails []TornTail
}

// TornTail is the remains of an append cut short at the end of a
// partition: a bad frame in its last segment with nothing intact behind it,
// at or above its recovery point. The writer's next open cuts it and says
// so in Partition.Recovery. Beside a running writer, a frame seen half
// written at the end of a ModeFile segment twice, 20 ms apart, is reported
// as one too.
type TornTail struct {
	Topic     string
	Partition int32
	Segment   string // path of the partition's last segment
	Position  int64  // byte position of the torn frame: where the cut goes
	Offset    int64  // the offset the torn frame would have held: the next append's
	// Bytes is what the cut removes, in bytes: from Position to the last
	// non-zero byte of the file, rounded up to the 8-byte frame alignment
	// (a reserved segment's reserved zeros are not counted).
	Bytes  int64
	Reason string // why the frame is not intact: "length past end of file", "crc mismatch", ...
}

// OK reports whether the log verified without problems (torn tails are not
// problems).
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Verify reads every frame of every segment of every topic of the log
// directory dir (or of the topics named), checking each CRC32C, body and
// offset and that segments are contiguous, and reports counts and every
// problem. It opens files read-only and takes no lock, so it runs beside a
// writer, in this or another process; it never changes a file.
//
// It applies the rules of recovery (see the package doc, "Recovery"):
//
//   - a bad frame (CRC mismatch, length past the end of the file, a body
//     that does not decode or holds another offset) in a sealed segment is
//     corruption: sealed segments were forced to disk;
//   - so is a bad frame or a zero length prefix with an intact frame of the
//     expected offset or a later one behind it, in any segment, and a gap
//     between a segment's end and the next segment's base;
//   - so is an end of a partition below its recovery point (records known
//     to have been on disk are gone), wherever the point lies, in the last
//     segment or in a later one that is gone; unless the point file, read
//     again, is lower now (a Truncate or repair ran meanwhile);
//   - a bad frame in the last segment of a partition with nothing intact
//     behind it, at or above the recovery point, is a torn tail, reported
//     in TornTails: Open cuts it.
//
// After a problem in a segment the walk goes on from the next intact frame
// behind it, if any, so every problem is reported. In a partition's last
// segment a bad frame is read again, at once and once more 20 ms later,
// before it is judged: a writer's append may be in flight there.
//
// Errors (the report is then partial): dir missing (wrapping
// fs.ErrNotExist, naming it) or not a directory; a named topic that is
// invalid (ErrInvalidTopic) or does not exist (ErrUnknownTopic); I/O errors
// naming the file. Damage is never an error: it is in Problems.
func Verify(dir string, topics ...string) (VerifyReport, error) {
	var rep VerifyReport
	fi, err := os.Stat(dir)
	if err != nil {
		return rep, fmt.Errorf("log: verify log directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return rep, fmt.Errorf("log: verify log directory %s: not a directory", dir)
	}
	named := len(topics) > 0
	if !named {
		if topics, err = ListTopics(dir); err != nil {
			return rep, err
		}
	}
	for _, name := range topics {
		if err := ValidateTopicName(name); err != nil {
			return rep, err
		}
		tdir := filepath.Join(dir, name)
		m, err := loadTopicMeta(name, tdir)
		switch {
		case errors.Is(err, ErrUnknownTopic) && !named:
			continue // removed since the listing
		case errors.Is(err, ErrCorruptMetadata):
			rep.Problems = append(rep.Problems, &CorruptError{Topic: name, Partition: -1,
				Segment: filepath.Join(tdir, topicMetaFile), Position: -1, Offset: -1, Reason: err.Error()})
			continue
		case err != nil:
			return rep, err
		}
		rep.Topics++
		var buf []byte
		for id := range m.Partitions {
			pv := &partitionVerify{rep: &rep, topic: name, id: int32(id),
				dir: filepath.Join(tdir, strconv.Itoa(id)), buf: buf, rechecks: verifyRechecks}
			if err := pv.run(); err != nil {
				return rep, err
			}
			buf = pv.buf
		}
	}
	return rep, nil
}

// verifyRechecks is how many times, per partition, Verify waits
// readOnlyRecheck to read a bad frame at the end of a partition again.
const verifyRechecks = 1

// partitionVerify is Verify's walk over one partition.
type partitionVerify struct {
	rep      *VerifyReport
	topic    string
	id       int32
	dir      string
	rp       point  // the recovery point, read before anything else
	buf      []byte // the walk buffer, shared by the partitions of a topic
	rechecks int    // waits left (verifyRechecks)
}

func (pv *partitionVerify) problem(path string, pos, off int64, reason string) {
	pv.rep.Problems = append(pv.rep.Problems, &CorruptError{Topic: pv.topic, Partition: pv.id,
		Segment: path, Position: pos, Offset: off, Reason: reason})
}

// run verifies the partition's segments in order. The recovery point is
// read first: a writer only ever raises it past frames already on disk, so
// everything below it must be found by the walks that follow.
func (pv *partitionVerify) run() error {
	pv.rep.Partitions++
	var err error
	if pv.rp, err = loadRecoveryPoint(pv.dir); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
		}
		pv.problem(filepath.Join(pv.dir, recoveryPointFile), -1, -1, err.Error())
		pv.rp = point{}
	}
	bases, err := listSegments(pv.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) { // no folder: never written
		return fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
	}
	if len(bases) == 0 {
		if pv.rp.Offset > 0 {
			pv.problem(filepath.Join(pv.dir, segmentName(pv.rp.Segment)), 0, 0,
				fmt.Sprintf("no segment, but the recovery point says offsets below %d are on disk", pv.rp.Offset))
		}
		return nil
	}
	var prev struct {
		path             string
		base, size, next int64
		known            bool // the previous segment's end is where its records end
	}
	for i := 0; i < len(bases); i++ {
		if prev.known && prev.next > prev.base && bases[i] > prev.next && segmentExists(pv.dir, prev.next) {
			// The listing missed a segment a writer created while it was
			// read (see errStaleListing): a gap that is not there. (Not
			// an empty segment: the file of its end offset is itself.)
			bases = slices.Insert(bases, i, prev.next)
		}
		s, err := openSegment(pv.dir, bases[i], os.O_RDONLY)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted by the writer's retention since the listing
		}
		if err != nil {
			return fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
		}
		pv.rep.Segments++
		known, more, err := pv.segment(s, i == len(bases)-1)
		s.f.Close()
		if err != nil {
			return err
		}
		bases = append(bases, more...)
		if prev.known && s.base != prev.next {
			pv.problem(prev.path, prev.size, prev.next,
				fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", prev.next, s.base))
		}
		prev.path, prev.base, prev.size, prev.next, prev.known = s.path, s.base, s.size, s.next, known
	}
	return nil
}

// walk goes on walking s from where it stopped, counting what it reads.
func (pv *partitionVerify) walk(s *segment) (stopReason, error) {
	size, records := s.size, s.recordCount()
	why, buf, err := s.walk(pv.buf, math.MaxInt)
	pv.buf = buf
	pv.rep.Records += s.recordCount() - records
	pv.rep.Bytes += s.size - size
	if err != nil {
		return why, fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
	}
	return why, nil
}

// successors returns the bases of the segments after s: a writer rolled
// while s, the last one listed, was read.
func (pv *partitionVerify) successors(s *segment) ([]int64, error) {
	bases, err := listSegments(pv.dir)
	if err != nil {
		return nil, fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
	}
	i, _ := slices.BinarySearch(bases, s.base+1)
	return bases[i:], nil
}

// segment walks s and judges where it stops: by the rules of a sealed
// segment, or with last (s was the last segment listed) and no successor
// found since, by the rules of the end of a partition. It returns whether
// s.next is where s's records end (false after damage with nothing intact
// behind it) and the bases of successors that appeared meanwhile.
func (pv *partitionVerify) segment(s *segment, last bool) (known bool, more []int64, err error) {
	why, err := pv.walk(s)
	if err != nil {
		return false, nil, err
	}
	if last {
		// A writer may have rolled meanwhile: then s is complete now
		// (sealed) and the walk goes on to its end, also from the end of
		// the file: in ModeFile the writer may have appended to s after
		// the walk reached its end and before it rolled.
		if more, err = pv.successors(s); err != nil {
			return false, nil, err
		}
		if len(more) > 0 {
			if why, err = pv.walk(s); err != nil {
				return false, nil, err
			}
		}
		if len(more) == 0 {
			if more, why, err = pv.tail(s, why); err != nil || len(more) == 0 {
				return true, more, err
			}
		}
	}
	known, err = pv.sealed(s, why)
	return known, more, err
}

// sealed judges s, a segment with a successor, whose walk stopped for why.
// Every stop but the end of the file and a zero tail is corruption; after a
// bad frame the walk goes on from the next intact frame (findFrameAfter),
// so every damaged place is reported.
func (pv *partitionVerify) sealed(s *segment, why stopReason) (bool, error) {
	for why != stopEOF {
		at, off, found, err := s.findFrameAfter(s.size, s.next)
		if err != nil {
			return false, fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
		}
		if !found {
			if why.intact() {
				return true, nil // a zero tail: the next segment's base decides, as at Open
			}
			pv.problem(s.path, s.size, s.next, why.String())
			return false, nil
		}
		pv.problem(s.path, s.size, s.next, fmt.Sprintf("%s, followed by an intact frame of offset %d at byte %d", why, off, at))
		s.size, s.next = at, off
		if why, err = pv.walk(s); err != nil {
			return false, err
		}
	}
	return true, nil
}

// tail judges the end of s, the last segment of the partition, where its
// walk stopped for why: the end of the log, a torn tail, or corruption (an
// intact frame behind the stop, or an end below the recovery point). A
// stop that is not the end of the file is read again before it is judged,
// at once and, while pv.rechecks lasts, readOnlyRecheck later: a writer
// may be appending there. When a successor appears meanwhile, tail returns
// its bases, and the stop s has reached then, for sealed to judge.
func (pv *partitionVerify) tail(s *segment, why stopReason) ([]int64, stopReason, error) {
	for why != stopEOF {
		at, off, found, err := s.findFrameAfter(s.size, s.next)
		if err != nil {
			return nil, why, fmt.Errorf("log: verify topic %s partition %d: %w", pv.topic, pv.id, err)
		}
		if !found && why.intact() {
			break // the end of the log
		}
		moved, more, w, err := pv.again(s)
		if err != nil || len(more) > 0 {
			return more, w, err
		}
		if why = w; moved {
			continue // it was an append in flight
		}
		if !found {
			if pv.rp.Offset > s.next {
				break // the recovery point check below says it
			}
			pv.rep.TornTails = append(pv.rep.TornTails, TornTail{Topic: pv.topic, Partition: pv.id,
				Segment: s.path, Position: s.size, Offset: s.next, Bytes: pv.tornBytes(s), Reason: why.String()})
			return nil, why, nil
		}
		pv.problem(s.path, s.size, s.next, fmt.Sprintf("%s, followed by an intact frame of offset %d at byte %d", why, off, at))
		s.size, s.next = at, off
		if why, err = pv.walk(s); err != nil {
			return nil, why, err
		}
	}
	if pv.rp.Offset > s.next && !pv.pointLowered() {
		// Wherever the point lies: in s, or in a later segment that is gone
		// (the point's segment is read before the listing, so it existed).
		pv.problem(s.path, s.size, s.next, why.String()+"; "+belowRecoveryPoint(pv.rp))
	}
	return nil, why, nil
}

// pointLowered reports whether the partition's recovery point is lower now
// than when pv read it: a Truncate or repair, which lower it before they
// cut, ran meanwhile, and an end below the old point is theirs, not damage
// (as a read-only open judges, checkReadOnlyPointLocked).
func (pv *partitionVerify) pointLowered() bool {
	now, err := loadRecoveryPoint(pv.dir)
	return err == nil && now.Offset < pv.rp.Offset
}

// again walks s once more from where it stopped, at once and, if that
// moves nothing and pv.rechecks allows, after readOnlyRecheck; it reports
// whether the walk moved, and the bases of successors that appeared
// meanwhile (s is then complete: walked to its end).
func (pv *partitionVerify) again(s *segment) (moved bool, more []int64, why stopReason, err error) {
	size := s.size
	for try := 0; ; try++ {
		if try == 1 {
			if pv.rechecks == 0 {
				return false, nil, why, nil
			}
			pv.rechecks--
			time.Sleep(readOnlyRecheck)
		}
		if why, err = pv.walk(s); err != nil {
			return false, nil, why, err
		}
		if more, err = pv.successors(s); err != nil || len(more) > 0 {
			if err == nil && why != stopEOF {
				why, err = pv.walk(s)
			}
			return true, more, why, err
		}
		if s.size != size {
			return true, nil, why, nil
		}
		if try == 1 {
			return false, nil, why, nil
		}
	}
}

// tornBytes returns what cutting s at s.size removes: the bytes from there
// to the last non-zero byte of the file, rounded up to the frame alignment,
// read in chunks of the walk buffer.
func (pv *partitionVerify) tornBytes(s *segment) int64 {
	fi, err := s.f.Stat()
	if err != nil {
		return 0
	}
	last := s.size // one past the last non-zero byte
	for pos := s.size; pos < fi.Size(); {
		n, err := s.f.ReadAt(pv.buf[:min(int64(len(pv.buf)), fi.Size()-pos)], pos)
		for j := n - 1; j >= 0; j-- {
			if pv.buf[j] != 0 {
				last = pos + int64(j) + 1
				break
			}
		}
		if n == 0 || err != nil {
			break
		}
		pos += int64(n)
	}
	return int64(padded(int(last - s.size)))
}
