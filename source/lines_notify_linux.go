package source

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// dirNotifier is the process's one inotify instance for following line
// sources (the kernel allows 128 instances per user by default, so not one
// per source; the log package keeps its own for its partitions). A waiting
// Read watches the directory of its file, and one goroutine reads the
// events, through the runtime's poller, and wakes the waiters of each
// watched directory. It lives as long as the process, like os/signal's.
type dirNotifier struct {
	fd int
	f  *os.File // fd, read through the poller

	mu     sync.Mutex
	byWd   map[int32]map[chan struct{}]struct{} // the waiters of each watch
	byPath map[string]int32                     // the watch of each directory
}

// notifyMask asks for everything writing, truncating or rotating a file
// does to its directory: IN_MODIFY (a write or truncate of any file in it,
// the renamed old file included), IN_CREATE and IN_MOVED_TO (a new file at
// the path), IN_MOVED_FROM and IN_DELETE (the file leaving the path). Any
// event only wakes the waiter, which then looks at the file itself.
const notifyMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_DELETE | unix.IN_ONLYDIR

var (
	notifierOnce sync.Once
	notifier     *dirNotifier
	notifierErr  error
)

// theNotifier starts the process's notifier on first use. When inotify is
// unavailable it returns the error for good, and sources rely on their
// FollowInterval.
func theNotifier() (*dirNotifier, error) {
	notifierOnce.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			notifierErr = os.NewSyscallError("inotify_init1", err)
			return
		}
		notifier = &dirNotifier{fd: fd, f: os.NewFile(uintptr(fd), "inotify"),
			byWd: make(map[int32]map[chan struct{}]struct{}), byPath: make(map[string]int32)}
		go notifier.run()
	})
	return notifier, notifierErr
}

// watchDir makes wake receive (without blocking the notifier: wake must
// have room for one value) after any change in dir, until the returned stop
// is called. On error nothing is watched and stop does nothing.
func watchDir(dir string, wake chan struct{}) (stop func(), err error) {
	n, err := theNotifier()
	if err != nil {
		return func() {}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	wd, ok := n.byPath[dir]
	if !ok {
		w, err := unix.InotifyAddWatch(n.fd, dir, notifyMask)
		if err != nil {
			return func() {}, os.NewSyscallError("inotify_add_watch", err)
		}
		wd = int32(w)
		n.byPath[dir] = wd
		if n.byWd[wd] == nil {
			n.byWd[wd] = make(map[chan struct{}]struct{})
		}
	}
	n.byWd[wd][wake] = struct{}{}
	return func() { n.unwatch(dir, wd, wake) }, nil
}

// unwatch drops wake from the watch wd of dir, and the watch when wake was
// its last waiter.
func (n *dirNotifier) unwatch(dir string, wd int32, wake chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	waiters, ok := n.byWd[wd]
	if !ok {
		return // the watch went (IN_IGNORED) while wake waited
	}
	delete(waiters, wake)
	if len(waiters) > 0 {
		return
	}
	delete(n.byWd, wd)
	if n.byPath[dir] == wd {
		delete(n.byPath, dir)
	}
	_, _ = unix.InotifyRmWatch(n.fd, uint32(wd)) // already gone with its directory: nothing to undo
}

// run reads events until the process ends and wakes the waiters of each.
func (n *dirNotifier) run() {
	buf := make([]byte, 64<<10)
	for {
		got, err := n.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // not expected; do not spin
			continue
		}
		n.dispatch(buf[:got])
	}
}

// dispatch wakes the waiters of every watch named in the events b. A queue
// overflow (events lost) wakes every waiter; a watch gone (its directory
// removed) wakes its waiters and is forgotten.
func (n *dirNotifier) dispatch(b []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b))
		mask := binary.NativeEndian.Uint32(b[4:])
		nameLen := int(binary.NativeEndian.Uint32(b[12:]))
		b = b[min(len(b), unix.SizeofInotifyEvent+nameLen):]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			for _, waiters := range n.byWd {
				wakeAll(waiters)
			}
			continue
		}
		wakeAll(n.byWd[wd])
		if mask&unix.IN_IGNORED != 0 {
			delete(n.byWd, wd)
			for dir, w := range n.byPath {
				if w == wd {
					delete(n.byPath, dir)
				}
			}
		}
	}
}

// wakeAll wakes each waiter without blocking: one pending wake is enough.
func wakeAll(waiters map[chan struct{}]struct{}) {
	for c := range waiters {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}
