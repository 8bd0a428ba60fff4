package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"time"
)

// The follow mode of LinesSource (Follow): waiting at the end of the file,
// and the two rotations, rename-and-create and copy-truncate.
//
// The wait polls: every FollowInterval it stats the open file and the path.
// Polling needs no inotify instance (the kernel allows 128 per user, and the
// log's watcher is the log's) and sees every case the same way, including a
// path on a filesystem without inotify (NFS, FUSE). A poll is a timer wake
// and two stat calls, never a busy loop.

// wait blocks at the end of the open file until something changed: the file
// grew (return, and the caller reads on), shrank or was rewritten (the source
// starts it again from its first line), or another file appeared at the path
// (s.rotated: the caller finishes the open file, then switches). It returns
// ctx.Err() when ctx ends first, and a [*FileError] when the file cannot be
// stat'ed.
func (s *LinesSource) wait(ctx context.Context) error {
	t := time.NewTimer(s.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		moved, err := s.poll()
		if err != nil || moved {
			return err
		}
		t.Reset(s.cfg.interval)
	}
}

// poll looks once at the open file and the path, and reports whether the
// caller has something to read.
func (s *LinesSource) poll() (bool, error) {
	info, err := s.f.Stat()
	if err != nil {
		return false, &FileError{Path: s.path, Err: err}
	}
	switch size := info.Size(); {
	case size < s.read:
		return true, s.restart(FileTruncated, info)
	case size > s.read:
		// Grown, unless what grew is a new content: a truncation followed
		// by writes past the read position before this poll saw it.
		head, err := readHead(s.f, len(s.head))
		if err != nil {
			return false, &FileError{Path: s.path, Err: err}
		}
		if !bytes.Equal(head, s.head) {
			return true, s.restart(FileRewritten, info)
		}
		return true, nil
	}
	at, err := os.Stat(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil // renamed away, the new file not yet created
	}
	if err != nil {
		return false, &FileError{Path: s.path, Err: err}
	}
	if !os.SameFile(at, info) {
		s.rotated = true
		return true, nil
	}
	return false, nil
}

// restart reads the open file again from its first line, as a new
// generation whose offsets continue at s.next, after a copy-truncate or a
// rewrite seen while following. The unterminated line read so far is
// dropped: the file no longer holds it.
func (s *LinesSource) restart(change FileChange, info fs.FileInfo) error {
	old, _ := s.identity()
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	e := &FileChangedError{Path: s.path, Change: change, Saved: old, Position: s.next, Line: s.next - s.base}
	s.setFile(s.f)
	if head, err := readHead(s.f, old.FingerprintLen); err == nil {
		e.Found = identityOf(info, head)
	}
	s.gen, s.base, s.savedLen = s.newGen(), s.next, -1
	s.report(e)
	return nil
}

// switchFile closes the finished file and opens the one now at the path, as
// a new generation whose offsets continue at s.next. When the path is gone
// again, it goes back to waiting on the old file.
func (s *LinesSource) switchFile() error {
	f, err := os.Open(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.rotated, s.switching = false, false
		return nil
	}
	if err != nil {
		return &FileError{Path: s.path, Err: err}
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return &FileError{Path: s.path, Err: err}
	}
	old, _ := s.identity()
	e := &FileChangedError{Path: s.path, Change: FileReplaced, Saved: old, Position: s.next, Line: s.next - s.base,
		Found: identityOf(info, nil)}
	_ = s.f.Close() // read-only: a close error loses nothing
	s.setFile(f)
	s.gen, s.base, s.savedLen = s.newGen(), s.next, -1
	s.report(e)
	return nil
}
