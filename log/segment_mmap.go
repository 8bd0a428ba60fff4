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
}

func newMmapWriter(f *os.File, capacity int64) (*mmapWriter, error) {
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
	return &mmapWriter{f: f, mm: mm}, nil
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

// sync uses msync(MS_SYNC), which writes back the dirty pages of the mapping
// and waits for them.
func (w *mmapWriter) sync() error { return unix.Msync(w.mm, unix.MS_SYNC) }

// cut zeroes [pos, size) so the zero length prefix at pos is the end.
func (w *mmapWriter) cut(pos, size int64) error {
	clear(w.mm[pos:min(size, int64(len(w.mm)))])
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
