package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// A seal marker is a small sidecar file, <base>.sealed next to <base>.log,
// written when a segment is sealed at roll. It lets Open trust a sealed
// segment without walking its frames: recovery then costs a stat, one
// small read and one 8-byte pread per sealed segment instead of reading
// every byte, and the segment's index is built on its first read (see
// lazyIndex). The layout is in log/doc.go ("Seal markers").
const (
	sealedSuffix = ".sealed"
	// sealMagic is "SEAL" as little-endian bytes.
	sealMagic   = 0x4c414553
	sealVersion = 1
	// sealBytes is the marker's size: 52 bytes of fields and their CRC32C,
	// padded to 56.
	sealBytes = 56
)

// sealMarker is what a marker records about its segment.
type sealMarker struct {
	base, next, size int64
	lastPos          int64  // byte position of the last frame, -1 when the segment is empty
	lastHeader       uint64 // the last frame's 8 header bytes (length, CRC) as one little-endian word
}

func sealedName(base int64) string { return fmt.Sprintf("%020d%s", base, sealedSuffix) }

func (m *sealMarker) encode() []byte {
	b := make([]byte, 0, sealBytes)
	b = binary.LittleEndian.AppendUint32(b, sealMagic)
	b = binary.LittleEndian.AppendUint16(b, sealVersion)
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.base))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.next))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.size))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.lastPos))
	b = binary.LittleEndian.AppendUint64(b, m.lastHeader)
	b = binary.LittleEndian.AppendUint32(b, crcOf(b))
	return append(b, 0, 0, 0, 0)
}

// decodeSealMarker parses b, or returns false when it is not a marker of
// this version with a matching CRC and its reserved and padding bytes zero,
// exactly what encode writes: a marker that is anything else is not
// trusted (its segment is walked).
func decodeSealMarker(b []byte) (sealMarker, bool) {
	if len(b) != sealBytes || binary.LittleEndian.Uint32(b) != sealMagic ||
		binary.LittleEndian.Uint16(b[4:]) != sealVersion || binary.LittleEndian.Uint16(b[6:]) != 0 ||
		binary.LittleEndian.Uint32(b[48:]) != crcOf(b[:48]) || binary.LittleEndian.Uint32(b[52:]) != 0 {
		return sealMarker{}, false
	}
	return sealMarker{
		base:       int64(binary.LittleEndian.Uint64(b[8:])),
		next:       int64(binary.LittleEndian.Uint64(b[16:])),
		size:       int64(binary.LittleEndian.Uint64(b[24:])),
		lastPos:    int64(binary.LittleEndian.Uint64(b[32:])),
		lastHeader: binary.LittleEndian.Uint64(b[40:]),
	}, true
}

// trustSealed sets s.size and s.next from s's seal marker without walking
// its frames, and reports whether it did. It refuses (and recovery walks
// the segment as before) when the marker is missing, torn (CRC), of another
// version or base, or does not match the file: its size must equal the
// file's, and the 8 header bytes at the recorded last-frame position must
// be the recorded ones and end exactly at that size. The segment's index is
// then built on its first read (loadIndex).
//
// Only a segment below the last may be trusted: the last one is the active
// segment, possibly mid-append, and is always walked.
func (s *segment) trustSealed(dir string, interval int) bool {
	b, err := readRegularFile(filepath.Join(dir, sealedName(s.base)), sealBytes)
	if err != nil {
		return false
	}
	m, ok := decodeSealMarker(b)
	// Every field is checked against what can be true before it is used:
	// no frame is shorter than minFrameBytes, so a segment of size bytes
	// holds at most size/minFrameBytes records. A compacted segment is
	// always walked (its record count is not its offsets', and it is
	// usually small after cleaning).
	if s.gaps {
		return false
	}
	if !ok || m.base != s.base || m.next < m.base || m.size < 0 || (m.next == m.base) != (m.size == 0) ||
		m.next-m.base > m.size/minFrameBytes {
		return false
	}
	fi, err := s.f.Stat()
	if err != nil || fi.Size() != m.size {
		return false
	}
	if m.size > 0 {
		var h [frameHeaderBytes]byte
		if m.lastPos < 0 || m.lastPos%frameAlign != 0 {
			return false
		}
		if _, err := s.f.ReadAt(h[:], m.lastPos); err != nil {
			return false
		}
		bodyLen, _ := frameHeader(h[:])
		if binary.LittleEndian.Uint64(h[:]) != m.lastHeader || bodyLen == 0 ||
			m.lastPos+int64(padded(frameHeaderBytes+int(bodyLen))) != m.size {
			return false
		}
	}
	s.size, s.next = m.size, m.next
	s.lazy = &lazyIndex{interval: interval}
	return true
}

// writeSealMarker records in the partition folder dir that s, sealed by a
// roll whose sealer has just forced it to disk, ends at s.size bytes and
// offset s.next: the marker goes to a temporary file that is fsynced and
// renamed over <base>.sealed, and the directory is fsynced. So a marker on disk always describes a segment
// whose bytes are on disk (see sealJob).
//
// A marker only saves time at Open, so failing to write one fails nothing:
// the partial marker is removed and Open walks the segment. The roll
// removed any older marker of the same name before the segment got its
// successor, so none can be trusted for this file. It reads s.size, s.next
// and the index without the partition lock: a sealed segment's are fixed
// until a Truncate, which waits for the sealers first.
func writeSealMarker(dir string, s *segment) {
	final := filepath.Join(dir, sealedName(s.base))
	m := sealMarker{base: s.base, next: s.next, size: s.size, lastPos: -1}
	err := error(nil)
	if s.size > 0 {
		m.lastPos, m.lastHeader, err = s.lastFrame()
	}
	if err == nil {
		err = replaceFile(dir, filepath.Base(final), m.encode())
	}
	if err != nil {
		_ = os.Remove(final)
	}
}

// lastFrame returns the byte position and the 8 header bytes of the last
// frame of s, which holds at least one: it reads from the last index entry
// to the end in one pread and steps over the length prefixes.
func (s *segment) lastFrame() (int64, uint64, error) {
	e := s.lookup(s.next - 1)
	buf := make([]byte, s.size-e.pos)
	if _, err := s.f.ReadAt(buf, e.pos); err != nil && err != io.EOF {
		return 0, 0, err
	}
	at := 0
	for {
		bodyLen, _ := frameHeader(buf[at:])
		n := padded(frameHeaderBytes + int(bodyLen))
		if bodyLen == 0 || at+n > len(buf) {
			return 0, 0, fmt.Errorf("log: segment %s: no frame ends at byte %d", s.path, s.size)
		}
		if at+n == len(buf) {
			return e.pos + int64(at), binary.LittleEndian.Uint64(buf[at:]), nil
		}
		at += n
	}
}

// removeOrphanMarkers removes seal markers and compacted flags (and their
// leftover temporary files) whose segment is no longer in the set:
// segments deleted by Truncate, repair or retention; and the cleaned copies
// a cleaner pass left behind (cleaner.go). Best effort; a leftover marker is never
// trusted for another file of the same name (the roll that gives that file
// a successor removes it first, see segmentSet.roll).
func (ss *segmentSet) removeOrphanMarkers() {
	entries, err := os.ReadDir(ss.dir)
	if err != nil {
		return
	}
	live := make(map[int64]bool, len(ss.list))
	for _, s := range ss.list {
		live[s.base] = true
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") && (strings.Contains(name, sealedSuffix+".tmp-") || strings.Contains(name, compactedSuffix+".tmp-")) ||
			isCleanerLeftover(name) {
			os.Remove(filepath.Join(ss.dir, name))
			continue
		}
		stem, ok := strings.CutSuffix(name, sealedSuffix)
		if !ok {
			stem, ok = strings.CutSuffix(name, compactedSuffix)
		}
		if !ok || len(stem) != 20 {
			continue
		}
		if base, err := strconv.ParseInt(stem, 10, 64); err == nil && !live[base] {
			os.Remove(filepath.Join(ss.dir, name))
		}
	}
}

// lazyIndex defers building the sparse index of a segment trusted by its
// seal marker to the segment's first read, which walks it once (verifying
// every frame's CRC on the way). Reads run concurrently under the
// partition's read lock, so the build is guarded by mu and published by
// done.
type lazyIndex struct {
	interval int // bytes between index entries, from the partition's config

	mu   sync.Mutex
	done atomic.Bool
	err  error // a *CorruptError when the walk disagreed with the marker
}

// indexBuildHook, set only by tests (export_test.go), runs when a deferred
// index build starts, before the walk.
var indexBuildHook atomic.Pointer[func()]

// indexBuilt reports whether s's index is complete: built at open or by
// appends, or deferred and built since (see loadIndex).
func (s *segment) indexBuilt() bool { return s.lazy == nil || s.lazy.done.Load() }

// loadIndex builds s's index if it was deferred and not built yet, and
// returns the corruption that build found, if any (every later call returns
// it again). A segment whose index was built at open or by appends returns
// nil at once.
func (s *segment) loadIndex(topic string, partition int32) error {
	l := s.lazy
	if l == nil || l.done.Load() {
		if l != nil {
			return l.err
		}
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done.Load() {
		return l.err
	}
	if h := indexBuildHook.Load(); h != nil {
		(*h)()
	}
	// Walk a copy: readers look at s.size and s.next meanwhile.
	w := &segment{base: s.base, path: s.path, f: s.f, next: s.base, indexedAt: -1,
		index: newIndex(s.size, l.interval), gaps: s.gaps, ends: s.ends}
	why, _, err := w.walk(nil, l.interval)
	if err != nil {
		return err // an I/O error: not remembered, the next read retries
	}
	if why != stopEOF || w.size != s.size || w.next != s.next {
		reason := why.String()
		if why.intact() {
			reason = fmt.Sprintf("frames end at byte %d offset %d but the seal marker says byte %d offset %d",
				w.size, w.next, s.size, s.next)
		}
		l.err = &CorruptError{Topic: topic, Partition: partition, Segment: s.path,
			Position: w.size, Offset: w.next, Reason: reason}
	} else {
		s.index, s.indexedAt = w.index, w.indexedAt
	}
	l.done.Store(true)
	return l.err
}

// trimIndex drops the spare capacity appends left in s.index (up to a
// quarter of it: Go grows large slices by 1.25x), once s takes no more
// entries. A 64 MiB segment of 64 B records holds 16,132 entries (252 KiB).
func (s *segment) trimIndex() {
	if cap(s.index) > len(s.index) {
		s.index = slices.Clone(s.index)
	}
}

// newIndex returns an empty index with room for every entry of a segment
// of size bytes: entries lie at least interval bytes apart.
func newIndex(size int64, interval int) []indexEntry {
	return make([]indexEntry, 0, size/max(int64(interval), minFrameBytes)+1)
}

// errFileTooLarge is readRegularFile's error for a file larger than its
// format can be.
var errFileTooLarge = errors.New("file larger than its format allows")
