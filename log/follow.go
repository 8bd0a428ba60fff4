package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cross-process follow. A follower in a process that opened the log
// ReadOnly sleeps until the partition changes, as inotify reports it
// (notify_linux.go, through internal/notify): a ModeFile append is a
// pwrite, which raises IN_MODIFY on its segment in the partition
// directory, and a roll creates a file (IN_CREATE). A ModeMmap append
// stores into a shared mapping, which raises nothing, so its writer
// signals instead, through the partition's waiters file (follow.waiters,
// 64 bytes):
//
//	byte 0  uint32  waiting flag: 1 while some follower may be asleep
//	        (the rest is reserved, zero)
//
// A follower watches the partition directory and the waiters file
// (IN_ACCESS), then raises the flag (an atomic store into its own shared
// mapping of the file), and only then looks for new records for the last
// time before it sleeps. The writer, after publishing an append (the
// frames' length prefixes stored), loads the flag and, only when it is
// raised, clears it and reads one byte of the file with pread, which
// raises IN_ACCESS for every watcher of the file. Both sides use
// sequentially consistent atomics on the same shared word, so either the
// follower's last look sees the append or the writer sees the flag: no
// wake-up is lost. Every follower woken by a signal raises the flag again
// before its next look, since the signal cleared it.
//
// The signal is a read, not a write: a pwrite would update the file's
// mtime, which on ext4 starts a journal handle and can wait behind another
// process's fsync, while a pread is a copy from the page cache (the file is
// opened O_NOATIME where the owner allows, and relatime spares the atime
// otherwise). An appender pays one atomic load per Append while nobody
// waits (BenchmarkSegmentAppend unchanged within noise), and one pread per
// follower wake-up while someone does.
//
// Both sides also keep the slower path: a follower looks every
// WithPollInterval (100 ms by default) whatever happens, which is how it
// learns of appends where inotify is missing or says nothing (network file
// systems, a waiters file it may not write, a writer of an older version).
const (
	waitersFileName  = "follow.waiters"
	waitersFileBytes = 64
)

// waitersFile is a partition's waiters file, mapped shared.
type waitersFile struct {
	f   *os.File
	mm  []byte
	one [1]byte // what signal reads
}

// openWaitersFile maps dir's waiters file. With create (the writer) it
// first makes the file when it is missing or short: at full size under a
// temporary name, renamed into place and the directory fsynced, so a reader
// never maps a short file (and one that mapped a file being replaced maps
// the new one: dirWaitersCreated). A reader needs write permission on the
// file to raise the flag.
func openWaitersFile(dir string, create bool) (*waitersFile, error) {
	path := filepath.Join(dir, waitersFileName)
	f, err := openNoFollow(path, os.O_RDWR|unix.O_NOATIME, 0)
	if errors.Is(err, fs.ErrPermission) {
		f, err = openNoFollow(path, os.O_RDWR, 0) // O_NOATIME is the owner's
	}
	short := false
	if err == nil {
		fi, serr := f.Stat()
		switch {
		case serr != nil:
			err = serr
		case fi.Size() < waitersFileBytes:
			short = true
			err = fmt.Errorf("log: %s is %d bytes, want %d", path, fi.Size(), waitersFileBytes)
		}
		if err != nil {
			f.Close()
		}
	}
	if create && (short || errors.Is(err, fs.ErrNotExist)) {
		f, err = createWaitersFile(dir, path)
	}
	if err != nil {
		return nil, err
	}
	mm, err := unix.Mmap(int(f.Fd()), 0, waitersFileBytes, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("log: mmap %s: %w", path, err)
	}
	return &waitersFile{f: f, mm: mm}, nil
}

func createWaitersFile(dir, path string) (*os.File, error) {
	tmp := filepath.Join(dir, "."+waitersFileName+".tmp")
	f, err := openNoFollow(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC|unix.O_NOATIME, 0o644)
	if err != nil {
		return nil, err
	}
	if err = f.Truncate(waitersFileBytes); err == nil {
		if err = os.Rename(tmp, path); err == nil {
			err = syncDir(dir)
		}
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

func (w *waitersFile) flag() *uint32 { return (*uint32)(unsafe.Pointer(&w.mm[0])) }

// raise tells the writer that a follower may be about to sleep.
func (w *waitersFile) raise() { atomic.StoreUint32(w.flag(), 1) }

// signal wakes the followers of every process when the flag is raised.
// It must be called after the appended frames' length prefixes are stored.
// A failed read leaves the followers to their poll interval.
func (w *waitersFile) signal() {
	if atomic.LoadUint32(w.flag()) == 0 || atomic.SwapUint32(w.flag(), 0) == 0 {
		return
	}
	w.f.ReadAt(w.one[:], 0) // the read is the signal: IN_ACCESS
}

func (w *waitersFile) close() error {
	err := unix.Munmap(w.mm)
	w.mm = nil
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// crossProcess is a partition's side of cross-process follow. On a
// read-write partition only waiters is used: mapped at open in ModeMmap,
// signalled and closed under the partition's mu. On a read-only one every
// field below mu is guarded by mu. It does not hold its partition: what it
// needs of it is set at open (the fields above mu) and read-only after.
// Methods named ...Locked are called with the partition's mu held; mu comes
// after it in the lock order.
type crossProcess struct {
	dir          string        // the partition directory
	mmap         bool          // the log writes ModeMmap: its writer maps the waiters file
	pollInterval time.Duration // WithPollInterval: bounds the retry of a failed watch or map
	readOnly     func() bool   // whether the partition is read-only now (Partition.readOnly)
	// onChange runs when a watch reports a change while followers wait:
	// the partition refreshes, then wakes its waiters. Called without mu.
	onChange func()

	mu        sync.Mutex
	waiters   *waitersFile
	dirWatch  *partWatch // inotify watch on the partition directory; nil when none
	fileWatch *partWatch // inotify watch on the waiters file; nil when none
	followers int        // goroutines inside wait
	idleSince time.Time  // when followers last dropped to 0
	closed    bool
	// After a failure to watch or to map, when to try again: the poll
	// interval later, at most retryMax (an event that may fix it, the
	// waiters file appearing, clears mapAt).
	watchAt, mapAt time.Time
}

// retryMax bounds the wait before a follower retries a failed watch or
// map (an open or inotify_add_watch per try).
const retryMax = time.Second

// unwatchAfter is how long a partition keeps its watches with no follower
// waiting: a follower busy with the records it was just handed comes back
// within it, and re-watching each time would cost two syscalls per wake-up.
const unwatchAfter = time.Second

// openWaitersLocked maps the waiters file of a read-write ModeMmap
// partition (writer: the partition is, or is becoming under upgrade, its
// topic's writer). Failure only costs followers in other
// processes their poll interval, so it is not an error.
func (x *crossProcess) openWaitersLocked(writer bool) {
	if !writer || !x.mmap {
		return
	}
	if w, err := openWaitersFile(x.dir, true); err == nil {
		x.waiters = w
	}
}

// signalFollowersLocked wakes followers in other processes when one waits
// (see waitersFile). ModeFile needs nothing: its pwrite is the signal.
func (x *crossProcess) signalFollowersLocked() {
	if !x.readOnly() && x.waiters != nil {
		x.waiters.signal()
	}
}

// enterWait counts a follower of a read-only partition in; the returned
// function counts it out.
func (x *crossProcess) enterWait() func() {
	x.mu.Lock()
	x.followers++
	x.mu.Unlock()
	return func() {
		x.mu.Lock()
		x.followers--
		if x.followers == 0 {
			x.idleSince = time.Now()
		}
		x.mu.Unlock()
	}
}

// armFollow prepares a follower of a read-only partition to sleep: it
// watches the partition directory (one watch, shared by the partition's
// followers), maps and watches the waiters file, and then raises the
// waiters flag. The caller looks for new records only after it returns. A
// failed watch or map is retried later (see crossProcess); meanwhile the
// poll is the follower's only wake-up for what it would have caught.
func (x *crossProcess) armFollow() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed || !x.readOnly() {
		return
	}
	if x.dirWatch == nil || x.fileWatch == nil {
		now := time.Now()
		retry := now.Add(min(x.pollInterval, retryMax))
		if x.dirWatch == nil && !now.Before(x.watchAt) {
			if w, err := watchPath(x.dir, dirWatchMask, x); err == nil {
				x.dirWatch = w
			} else {
				x.watchAt = retry
			}
		}
		if x.waiters == nil && !now.Before(x.mapAt) {
			// Missing until a ModeMmap writer has opened the partition; a
			// ModeFile writer needs none (its pwrite is the signal).
			if w, err := openWaitersFile(x.dir, false); err == nil {
				x.waiters = w
			} else {
				x.mapAt = retry
			}
		}
		if x.waiters != nil && x.fileWatch == nil && !now.Before(x.mapAt) {
			if w, err := watchPath(x.waiters.f.Name(), fileWatchMask, x); err == nil {
				x.fileWatch = w
			} else {
				x.mapAt = retry
			}
		}
	}
	if x.fileWatch != nil {
		x.waiters.raise()
	}
}

// dirEvent is what the directory watcher tells a partition.
type dirEvent int

const (
	dirModified       dirEvent = iota // a file in the directory was written or created
	dirWaitersCreated                 // the waiters file appeared (renamed into place)
	dirWatchGone                      // the watch ended: the directory was deleted or unmounted
)

// dirChanged is called from internal/notify's goroutine for watch w of x
// (the directory's or the waiters file's; one it dropped, for events read
// before it did), once per batch of events. With followers waiting it has
// the partition look for new records and wake them (onChange) whether or
// not there were some: a signal cleared the waiters flag, so each of them
// must raise it again before its next look (and watch again, when a watch
// is gone). When no follower has waited for unwatchAfter it drops the
// watches, so a partition nobody follows costs no wake-ups.
func (x *crossProcess) dirChanged(w *partWatch, ev dirEvent) {
	x.mu.Lock()
	if ev == dirWatchGone {
		if x.dirWatch == w {
			x.dirWatch, x.watchAt = nil, time.Time{}
		}
		if x.fileWatch == w {
			x.fileWatch, x.mapAt = nil, time.Time{}
		}
	}
	if ev == dirWaitersCreated {
		// A new file: the one mapped, if any, no longer reaches the writer.
		if x.fileWatch != nil {
			x.fileWatch.cancel()
			x.fileWatch = nil
		}
		if x.waiters != nil {
			x.waiters.close()
			x.waiters = nil
		}
		x.mapAt = time.Time{}
	}
	following := x.followers > 0
	if !following && time.Since(x.idleSince) > unwatchAfter {
		x.unwatchLocked()
	}
	x.mu.Unlock()
	if following {
		x.onChange()
	}
}

// unwatchLocked drops x's watches; x.mu is held.
func (x *crossProcess) unwatchLocked() {
	if x.dirWatch != nil {
		x.dirWatch.cancel()
		x.dirWatch = nil
	}
	if x.fileWatch != nil {
		x.fileWatch.cancel()
		x.fileWatch = nil
	}
}

// stopFollowLocked releases a read-only partition's watches and its
// mapping of the waiters file when it becomes a writer (Partition.upgrade);
// the writer maps the file again for itself.
func (x *crossProcess) stopFollowLocked() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unwatchLocked()
	if x.waiters != nil {
		x.waiters.close()
		x.waiters = nil
	}
}

// closeFollowLocked releases the watches and the waiters file.
func (x *crossProcess) closeFollowLocked() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.closed = true
	x.unwatchLocked()
	var err error
	if x.waiters != nil {
		err = x.waiters.close()
		x.waiters = nil
	}
	return err
}
