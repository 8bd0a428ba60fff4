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
	WritePathMmap   = "mmap"   // the active segment, pre-sized, written through a mapping
	WritePathFile   = "file"   // the active segment, written with pwrite
	WritePathSealed = "sealed" // a segment with a successor: it takes no more records
)

// SegmentInfo describes one segment file of a partition.
type SegmentInfo struct {
	Path       string // the segment file's path
	BaseOffset int64  // offset of its first record (its name)
	NextOffset int64  // one past its last record
	Records    int64  // NextOffset - BaseOffset
	// Bytes is the size in bytes of its intact frames: the data, not what
	// is reserved. A ModeMmap active segment's file is longer (its zero
	// tail); a sealed segment's file is exactly this long.
	Bytes int64
	// DiskBytes is the space the file takes on disk, in bytes (st_blocks
	// * 512): a pre-sized ModeMmap segment reserves more than its data, a
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
	// WritePath is WritePathMmap or WritePathFile for the active segment,
	// WritePathSealed for a sealed one. Through a partition this process
	// does not write (a ReadOnly log, or a topic not locked yet), the
	// active segment counts as WritePathMmap when its file is longer than
	// its frames (the zero tail of a pre-sized segment).
	WritePath string
	ModTime   time.Time // last write: the file's modification time
}

// Segments describes the partition's segments, oldest first, as the
// partition knows them (on a partition this process does not write, after
// looking for the writer's new records and segments, as NextOffset does).
// Bytes and offsets come from the partition; DiskBytes, FileBytes and
// ModTime from a stat of each file. A segment deleted by retention between
// the two is left out. Errors: ErrClosed; a failed stat, naming the file.
func (p *Partition) Segments() ([]SegmentInfo, error) {
	if p.readOnly() {
		p.refresh()
	}
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return nil, fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	infos := make([]SegmentInfo, len(p.segments))
	for i, s := range p.segments {
		infos[i] = SegmentInfo{Path: s.path, BaseOffset: s.base, NextOffset: s.next,
			Records: s.next - s.base, Bytes: s.size, Sealed: i < len(p.segments)-1}
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
			in.WritePath = WritePathFile
			if in.FileBytes > in.Bytes {
				in.WritePath = WritePathMmap
			}
		}
		_, err = os.Stat(filepath.Join(filepath.Dir(in.Path), sealedName(in.BaseOffset)))
		in.SealMarker = err == nil
		out = append(out, in)
	}
	return out, nil
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
// zero length prefix: the zero tail of a pre-sized segment), the first frame
// that is not intact (passed to fn with Err set; ScanSegment then returns
// nil: it reports, it does not judge), or fn returns false.
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
	visit := func(pos int64, crc uint32, body []byte) bool {
		fr := Frame{Position: pos, Length: uint32(len(body)), CRC: crc, CRCOK: true}
		fr.Err = decodeBody(body, &fr.Record) // nil: walkFrames checked the body
		return fn(fr)
	}
	var buf []byte
	for {
		var why stopReason
		why, buf, err = s.walkFrames(buf, math.MaxInt, visit)
		if err != nil || why.intact() || why == stopHalted {
			return err
		}
		fr, err := s.badFrame(why)
		if err != nil {
			return err
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
// most the body length, which the walk found inside the file.
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
