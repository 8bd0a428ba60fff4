package log

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmapWriter is the ModeMmap write path: the segment file is pre-sized to
// its capacity with fallocate (so a full disk fails at segment creation with
// ENOSPC instead of raising SIGBUS mid-append) and written through a shared
// mapping. The zero-filled tail is the end of the log: a frame becomes
// visible when its length prefix turns non-zero.
type mmapWriter struct {
	f  *os.File
	mm []byte
	// zeroedTo is where the bytes this segment has had written to it end,
	// frames or the zeros of prepare: below it the file's blocks are
	// initialised, so a sync of frames there writes data pages and no
	// metadata.
	zeroedTo int64
}

// zeroAheadBytes is how far past the last frame write keeps the segment's
// blocks written with zeros (pwrite). fallocate reserves blocks as
// "unwritten" extents, and the first sync of a frame in an unwritten block
// must also commit the extent's conversion to the file system's journal:
// on this project's ext4 disk a write of 6 KiB (a group of 60 records of
// 64 B) plus fdatasync took 0.44 to 0.46 ms into fallocated blocks and 0.24
// to 0.25 ms with zeros written 256 KiB ahead, the zeros' own writeback
// included (64 KiB ahead: 0.27 to 0.28 ms; 1 MiB: 0.26 to 0.28 ms;
// 1,500 syncs each, 2026-11-30). It is what lets grouped AckSynced appends
// reach 50 times the rate of one sync per record. It is done only for
// writes that a sync follows (prepare): the zeros cost page-cache
// bandwidth, 64 records of 1 KiB per call measured 0.41 to 0.50 M records/s
// with them against 0.56 to 0.67 M/s without (BenchmarkSegmentAppend).
const zeroAheadBytes = 256 << 10

var zeroChunk = make([]byte, zeroAheadBytes)

func newMmapWriter(f *os.File, capacity int64) (*mmapWriter, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, capacity); err != nil {
		// Some file systems (and old kernels) have no fallocate; ftruncate
		// still sizes the file, without reserving its blocks.
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("log: fallocate %s to %d bytes: %w", f.Name(), capacity, err)
		}
		if err := f.Truncate(capacity); err != nil {
			return nil, err
		}
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, int(capacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("log: mmap %s (%d bytes): %w", f.Name(), capacity, err)
	}
	return &mmapWriter{f: f, mm: mm, zeroedTo: fi.Size()}, nil
}

// write copies each frame's CRC and body first and then publishes its
// length prefix with one aligned 4-byte atomic store. A reader (in this or
// another process) that sees a non-zero length therefore also sees the body
// and CRC: the store is a release on every architecture Go supports, and the
// page is shared.
func (w *mmapWriter) write(frames []byte, pos int64) error {
	if pos+int64(len(frames)) > int64(len(w.mm)) {
		return fmt.Errorf("log: write of %d bytes at %d past mapped capacity %d of %s",
			len(frames), pos, len(w.mm), w.f.Name())
	}
	for len(frames) > 0 {
		bodyLen, _ := frameHeader(frames)
		n := padded(frameHeaderBytes + int(bodyLen))
		copy(w.mm[pos+4:pos+int64(n)], frames[4:n])
		atomic.StoreUint32((*uint32)(unsafe.Pointer(&w.mm[pos])), bodyLen)
		frames = frames[n:]
		pos += int64(n)
	}
	return nil
}

// prepare writes zeros from the end of what was written so far to
// zeroAheadBytes past end (the end of the frames), once end comes within
// half that distance of it. Only bytes past end are written, which are
// zero already: a reader sees no change.
func (w *mmapWriter) prepare(end int64) error {
	capacity := int64(len(w.mm))
	if end+zeroAheadBytes/2 <= w.zeroedTo || w.zeroedTo >= capacity {
		return nil
	}
	from, to := max(w.zeroedTo, end), min(capacity, end+zeroAheadBytes)
	if to > from {
		if _, err := w.f.WriteAt(zeroChunk[:to-from], from); err != nil {
			return fmt.Errorf("log: write zeros ahead in %s at byte %d: %w", w.f.Name(), from, err)
		}
	}
	w.zeroedTo = to
	return nil
}

// sync uses msync(MS_SYNC), which writes back the dirty pages of the mapping
// and waits for them.
func (w *mmapWriter) sync() error { return unix.Msync(w.mm, unix.MS_SYNC) }

// cut zeroes [pos, size) so the zero length prefix at pos is the end. It
// zeroes from the end backwards, 8 bytes at a time: a process killed
// midway leaves intact frames, then at most one torn one, then zeros, which
// recovery reads as a cut not yet made (or made in part). Zeroing forwards
// would leave zeros followed by intact frames, which recovery must take
// for corruption.
func (w *mmapWriter) cut(pos, size int64) error {
	end := min(size, int64(len(w.mm)))
	if a := end &^ 7; a > pos {
		clear(w.mm[a:end]) // an unaligned end (segment sizes need not be multiples of 8)
		end = a
	}
	for ; end-pos >= 8; end -= 8 {
		*(*uint64)(unsafe.Pointer(&w.mm[end-8])) = 0
	}
	clear(w.mm[pos:end])
	return nil
}

// seal unmaps the segment and shrinks the file to its intact frames, so a
// sealed segment costs no disk beyond its records.
func (w *mmapWriter) seal(size int64) error {
	err := unix.Msync(w.mm, unix.MS_SYNC)
	if uerr := unix.Munmap(w.mm); err == nil {
		err = uerr
	}
	w.mm = nil
	if terr := w.f.Truncate(size); err == nil {
		err = terr
	}
	return err
}

func (w *mmapWriter) capacity() int64 { return int64(len(w.mm)) }
