package log

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmapWriter is the ModeMmap write path: the segment is written through a
// shared mapping of its whole capacity (writes of pwriteMinBytes or more
// through the descriptor into the same pages), but the file itself grows
// in steps
// (reserve): every byte is reserved with fallocate, which extends the file,
// before a store through the mapping touches it. A full disk therefore
// fails the append that needed the space with ENOSPC instead of raising
// SIGBUS mid-store, and an idle partition holds one first step
// (firstReserveBytes) of disk, not a whole segment. The zero-filled tail
// past the frames is the end of the log: a frame becomes visible when its
// length prefix turns non-zero. Readers, in this process or another, pread
// the file and never read past its current size.
type mmapWriter struct {
	f *os.File
	// mm maps the segment's whole capacity; only mm[:reserved] is backed
	// by the file, and nothing at or past reserved is ever touched (a load
	// or store past the end of the file raises SIGBUS).
	mm []byte
	// reserved is the file's size as this writer made it: the bytes
	// reserved with fallocate (or sized with ftruncate where fallocate is
	// not supported), or written by a pwrite that extended the file.
	reserved int64
	// zeroedTo is where the bytes this segment has had written to it end,
	// frames or the zeros of prepare: below it the file's blocks are
	// initialised, so a sync of frames there writes data pages and no
	// metadata.
	zeroedTo int64
}

// firstReserveBytes is the first step a mapped segment reserves; the
// second reserves the rest of its capacity. A new or nearly empty
// partition therefore holds at most 1 MiB of disk, and one that passed it
// holds what it did before steps existed. Why not more, smaller steps:
// growing the file of a live mapping costs far more than the fallocate
// call, and with doubling steps (1, 2, 4, 8, 16 MiB, then 16 MiB at a
// time) BenchmarkSegmentAppend (mmap, 64 B, no sync) was 25 to 40% slower
// than with one reservation of the whole segment, 640 to 680 ns/op against
// 455 to 515 at 1,024 records per call (interleaved runs, 2026-12-01);
// with 1 MiB and then the rest it measured as before (465 to 515).
const firstReserveBytes = 1 << 20

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

// pwriteMinBytes is the size from which one write of frames goes through
// the descriptor (pwrite into the file, whose pages the mapping shares)
// instead of stores through the mapping. A store into a page the mapping
// has not touched yet takes a page fault, and on this project's machine (a
// VM, ext4) faults made mapped copies of 1 KiB records run at 0.4 to 0.5x
// the pwrite loop of BenchmarkBaselineFramedPwrite even with the faults
// taken ahead (MADV_POPULATE_WRITE, 1 MiB ahead, in the writer or a second
// goroutine: 0.45 to 0.5x); the kernel's copy into the page cache has no
// such cost. A write of a page or more always reaches a page not yet
// touched, so from a page on the syscall pays: 64 records of 64 B per call
// (6.6 KiB) took 177 to 189 ns each with this at 4 KiB against 248 to
// 346 at 16 KiB (interleaved, 2026-12-01). A smaller write, a few records,
// stays a copy and a store: it mostly lands in the page the last one
// touched, and a syscall costs more than the copy.
const pwriteMinBytes = 4 << 10

// newMmapWriter maps f, whose intact frames end at end, for writes of up
// to capacity bytes, and reserves the first step past end.
func newMmapWriter(f *os.File, capacity, end int64) (*mmapWriter, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, int(capacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("log: mmap %s (%d bytes): %w", f.Name(), capacity, err)
	}
	w := &mmapWriter{f: f, mm: mm, reserved: min(fi.Size(), capacity), zeroedTo: fi.Size()}
	if to := min(capacity, end+firstReserveBytes); to > w.reserved {
		// A full disk does not fail the open (the partition can still be
		// read, and its space freed by retention): the first append that
		// needs the space reports it.
		if err := w.grow(to); err != nil && !diskFull(err) {
			_ = unix.Munmap(mm)
			return nil, err
		}
	}
	return w, nil
}

// reserve makes sure the file holds at least end bytes, growing it by the
// next step (see firstReserveBytes) or to end when that is further, never
// past the capacity. The new bytes are reserved with fallocate, so a full
// disk is an error wrapping ENOSPC here; where the file system has no
// fallocate, ftruncate sizes the file without reserving its blocks. When a
// whole step does not fit on the disk, it reserves just end.
func (w *mmapWriter) reserve(end int64) error {
	if end <= w.reserved {
		return nil
	}
	capacity := int64(len(w.mm))
	if end > capacity {
		return fmt.Errorf("log: reserve %d bytes of %s past mapped capacity %d", end, w.f.Name(), capacity)
	}
	to := capacity // past the first step: the rest at once (see firstReserveBytes)
	if w.reserved < firstReserveBytes {
		to = min(capacity, max(end, firstReserveBytes))
	}
	err := w.grow(to)
	if diskFull(err) && to > end {
		// The disk may still hold what this write needs, if not a whole step.
		err = w.grow(end)
	}
	return err
}

// diskFull reports whether err says the file system (ENOSPC) or the
// user's quota (EDQUOT) has no room.
func diskFull(err error) bool { return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) }

// grow extends the file from w.reserved to to bytes, reserving them (see
// reserve).
func (w *mmapWriter) grow(to int64) error {
	if err := unix.Fallocate(int(w.f.Fd()), 0, w.reserved, to-w.reserved); err != nil {
		if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("log: fallocate %s from byte %d to %d: %w", w.f.Name(), w.reserved, to, err)
		}
		if err := w.f.Truncate(to); err != nil {
			return fmt.Errorf("log: grow %s to %d bytes: %w", w.f.Name(), to, err)
		}
	}
	w.reserved = to
	return nil
}

// write copies each frame's CRC and body first and then publishes its
// length prefix with one aligned 4-byte atomic store. A reader (in this or
// another process) that sees a non-zero length therefore also sees the body
// and CRC: the store is a release on every architecture Go supports, and the
// page is shared. A write of pwriteMinBytes or more goes through the
// descriptor in one pwrite. The
// bytes are reserved first (reserve): a full disk fails the write with an
// error wrapping ENOSPC before anything is stored.
func (w *mmapWriter) write(frames []byte, pos int64) error {
	end := pos + int64(len(frames))
	if len(frames) >= pwriteMinBytes && end > w.reserved {
		// A pwrite past the reserved bytes extends the file itself, so a
		// full disk is its ENOSPC (no store touches the pages): no
		// fallocate first. Blocks fallocate reserved are "unwritten"
		// extents, and writing into them costs the kernel a conversion at
		// writeback that pwrite into new blocks does not: 64 B records
		// 1,024 per call took 108 to 118 ns each into fallocated blocks
		// and 90 to 100 without (BenchmarkSegmentAppend, interleaved,
		// 2026-12-01), as fast as ModeFile.
		if end > int64(len(w.mm)) {
			return fmt.Errorf("log: write %d bytes of %s past mapped capacity %d", end, w.f.Name(), len(w.mm))
		}
		_, err := w.f.WriteAt(frames, pos)
		if err == nil {
			w.reserved, w.zeroedTo = end, max(w.zeroedTo, end)
		}
		return err
	}
	if err := w.reserve(end); err != nil {
		return err
	}
	if len(frames) >= pwriteMinBytes {
		// One pwrite of the frames as they are, lengths included. The
		// kernel copies them forwards and a kill stops it between pages, so
		// what a crash leaves is intact frames, at most one torn one and
		// the zeros after: a torn tail, as in a ModeFile segment. (Holding
		// the first length back to publish the group last left intact
		// frames behind a zero length when a kill came before it, which
		// recovery must take for corruption.) A reader in another process
		// may meanwhile see a length whose body is not all copied yet: its
		// CRC fails and it takes the frame for an append in flight, as it
		// does in a ModeFile segment.
		_, err := w.f.WriteAt(frames, pos)
		return err
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
// zero already: a reader sees no change. It first tries to reserve that
// far; where the disk is full it zeroes only what is reserved (the write
// that needs more space reports the error).
func (w *mmapWriter) prepare(end int64) error {
	if end+zeroAheadBytes/2 <= w.zeroedTo || w.zeroedTo >= int64(len(w.mm)) {
		return nil
	}
	_ = w.reserve(min(int64(len(w.mm)), end+zeroAheadBytes))
	if end+zeroAheadBytes/2 <= w.zeroedTo || w.zeroedTo >= w.reserved {
		return nil
	}
	from, to := max(w.zeroedTo, end), min(w.reserved, end+zeroAheadBytes)
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
// Only the reserved part of the mapping is synced.
func (w *mmapWriter) sync() error { return unix.Msync(w.mm[:w.reserved], unix.MS_SYNC) }

// cut zeroes [pos, size) so the zero length prefix at pos is the end. It
// zeroes from the end backwards, 8 bytes at a time: a process killed
// midway leaves intact frames, then at most one torn one, then zeros, which
// recovery reads as a cut not yet made (or made in part). Zeroing forwards
// would leave zeros followed by intact frames, which recovery must take
// for corruption.
func (w *mmapWriter) cut(pos, size int64) error {
	end := min(size, w.reserved)
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
// sealed segment costs no disk beyond its records. It does not msync: the
// dirty pages stay in the page cache after munmap, and whoever claims them
// durable syncs the file (a roll's sealer, see sealJob; Close syncs before
// it seals). An msync(MS_SYNC) here wrote the whole segment out on the
// append path, and held mapped appends of 1,024 records of 1 KiB per call
// to 0.3 to 0.5 M records/s against 0.8 M/s without it (2026-12-01).
func (w *mmapWriter) seal(size int64) error {
	err := unix.Munmap(w.mm)
	w.mm = nil
	if terr := w.f.Truncate(size); err == nil {
		err = terr
	}
	return err
}

func (w *mmapWriter) capacity() int64 { return int64(len(w.mm)) }
