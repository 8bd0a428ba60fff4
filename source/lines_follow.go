package source

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/strom-dev/strom/internal/notify"
)

// The follow mode of LinesSource (Follow): waiting at the end of the file,
// and the two rotations, rename-and-create and copy-truncate.
//
// The wait is woken by inotify: while it waits, the source watches the
// directory of its file (notifyMask, through internal/notify's one inotify
// instance per process), where every append, truncation, rename and
// creation that concerns the file shows up, the writes to a renamed old
// file included. Any event only wakes the wait,
// which then looks at the file itself: a stat of the open file and one of
// the path. The look also runs every FollowInterval, so a change inotify
// does not report (a file on NFS or FUSE, written from another machine; no
// inotify instance left) is still seen, late. It is never a busy loop.

// waitingHook, when set (by tests only), is called by wait when the watch is
// in place and nothing has changed yet: what it does to the file can only be
// seen through inotify or the interval.
var waitingHook func()

// watchDir makes wake receive (without blocking the notifier: wake must
// have room for one value) after any change in dir that notifyMask asks
// for, a queue overflow (events lost) or the watch's end (dir removed),
// until the returned stop is called. On error (no inotify: not Linux, no
// instance left; dir gone) nothing is watched and stop does nothing. A
// wake from events read just before stop may still land after it: it only
// costs the next wait one more look.
func watchDir(dir string, wake chan struct{}) (stop func(), err error) {
	return notify.Watch(dir, notifyMask, func([]notify.Event) {
		select {
		case wake <- struct{}{}:
		default: // one pending wake is enough
		}
	})
}

// wait blocks at the end of the open file until something changed: the file
// grew (return, and the caller reads on), shrank or was rewritten (the source
// starts it again from its first line), or another file appeared at the path
// (s.rotated: the caller finishes the open file, then switches). It returns
// ctx.Err() when ctx ends first, and a [*FileError] when the file cannot be
// stat'ed.
func (s *LinesSource) wait(ctx context.Context) error {
	if s.wake == nil {
		s.wake = make(chan struct{}, 1)
	}
	// Without inotify (stop is a no-op then) the timer alone wakes the wait.
	stop, _ := watchDir(filepath.Dir(s.path), s.wake)
	defer stop()
	// A change between the caller's look and the watch has no event: look
	// once more now that the watch is in place.
	if moved, err := s.poll(); err != nil || moved {
		return err
	}
	if waitingHook != nil {
		waitingHook()
	}
	t := time.NewTimer(s.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.wake:
		case <-t.C:
			t.Reset(s.cfg.interval)
		}
		moved, err := s.poll()
		if err != nil || moved {
			return err
		}
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
