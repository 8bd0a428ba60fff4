package log

import (
	"os"

	"golang.org/x/sys/unix"
)

// fileWriter is the ModeFile write path: frames go to the file with one
// pwrite per append batch, and the file's length is the end of the log. A
// reader in another process may see a length prefix before the body of the
// same pwrite; it then fails the frame's CRC and treats it as "not yet
// written", retrying later (see Partition.refreshLocked).
type fileWriter struct {
	f        *os.File
	capBytes int64
}

func newFileWriter(f *os.File, capacity int64) *fileWriter {
	return &fileWriter{f: f, capBytes: capacity}
}

func (w *fileWriter) write(frames []byte, pos int64) error {
	_, err := w.f.WriteAt(frames, pos)
	return err
}

// sync uses fdatasync: the file's data and size, not its timestamps.
func (w *fileWriter) sync() error { return unix.Fdatasync(int(w.f.Fd())) }

func (w *fileWriter) cut(pos, _ int64) error { return w.f.Truncate(pos) }

func (w *fileWriter) seal(int64) error { return nil }

func (w *fileWriter) capacity() int64 { return w.capBytes }

// prepare does nothing: the file's length is the end of the log, so
// nothing can be written ahead of it. Every sync of a ModeFile segment
// also commits the new length to the file system's journal.
func (w *fileWriter) prepare(int64) error { return nil }
