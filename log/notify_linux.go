package log

import (
	"encoding/binary"
	"errors"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// dirWatcher is the process's one inotify instance (the kernel allows 128
// per user by default, so not one per partition). Followers of read-only
// partitions add a watch on their partition directory while they wait;
// one goroutine reads the events, through the runtime's poller, and tells
// the partitions of each watch (dirChanged). It lives as long as the
// process, like os/signal's.
type dirWatcher struct {
	fd   int
	f    *os.File // fd, read through the poller
	mu   sync.Mutex
	byWd map[int32][]*Partition // partitions of each watch: two Logs may watch one directory
}

// dirWatchMask asks for what an append or roll does to a partition
// directory: IN_MODIFY (a ModeFile pwrite to a segment, an fallocate),
// IN_CREATE and IN_MOVED_TO (a new segment, the waiters file). Not
// IN_ACCESS: followers read the segments themselves.
const dirWatchMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// fileWatchMask asks for a ModeMmap writer's signal: its pread of the
// waiters file.
const fileWatchMask = unix.IN_ACCESS

var (
	watcherOnce sync.Once
	watcher     *dirWatcher
	watcherErr  error
)

// theWatcher starts the process's watcher on first use. When inotify is
// unavailable (InotifyInit1 failed, say at the instance limit) it returns
// the error for good and followers rely on their poll interval.
func theWatcher() (*dirWatcher, error) {
	watcherOnce.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			watcherErr = os.NewSyscallError("inotify_init1", err)
			return
		}
		watcher = &dirWatcher{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), byWd: make(map[int32][]*Partition)}
		go watcher.run()
	})
	return watcher, watcherErr
}

// watchPath watches path for mask on behalf of p and returns the watch
// descriptor.
func watchPath(path string, mask uint32, p *Partition) (int32, error) {
	w, err := theWatcher()
	if err != nil {
		return 0, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wd, err := unix.InotifyAddWatch(w.fd, path, mask)
	if err != nil {
		return 0, os.NewSyscallError("inotify_add_watch", err)
	}
	w.byWd[int32(wd)] = append(w.byWd[int32(wd)], p)
	return int32(wd), nil
}

// unwatchPath drops p from watch wd, and the watch when p was its last
// partition.
func unwatchPath(wd int32, p *Partition) {
	w, err := theWatcher()
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.byWd[wd]
	for i := range ps {
		if ps[i] == p {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) > 0 {
		w.byWd[wd] = ps
		return
	}
	delete(w.byWd, wd)
	unix.InotifyRmWatch(w.fd, uint32(wd))
}

type watchEvent struct {
	p  *Partition
	wd int32
	ev dirEvent
}

func (w *dirWatcher) run() {
	buf := make([]byte, 64<<10) // room for 4,000 events of segment-sized names
	var todo []watchEvent
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // not expected; do not spin
			continue
		}
		todo = w.decode(buf[:n], todo[:0])
		for _, e := range todo {
			e.p.dirChanged(e.wd, e.ev)
		}
	}
}

// decode turns a read of inotify events into one call per partition and
// watch: the strongest event of the batch for it (the watch gone, else the
// waiters file created, else modified). A queue overflow (events lost)
// counts as a change of every watched directory.
func (w *dirWatcher) decode(b []byte, todo []watchEvent) []watchEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := make(map[int32]dirEvent)
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b))
		mask := binary.NativeEndian.Uint32(b[4:])
		nameLen := int(binary.NativeEndian.Uint32(b[12:]))
		name := b[unix.SizeofInotifyEvent:min(len(b), unix.SizeofInotifyEvent+nameLen)]
		b = b[min(len(b), unix.SizeofInotifyEvent+nameLen):]
		switch {
		case mask&unix.IN_Q_OVERFLOW != 0:
			for wd := range w.byWd {
				seen[wd] = max(seen[wd], dirModified)
			}
		case mask&unix.IN_IGNORED != 0:
			if _, ok := w.byWd[wd]; ok {
				seen[wd] = dirWatchGone
			}
		case mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && cString(name) == waitersFileName:
			seen[wd] = max(seen[wd], dirWaitersCreated)
		default:
			seen[wd] = max(seen[wd], dirModified)
		}
	}
	for wd, ev := range seen {
		for _, p := range w.byWd[wd] {
			todo = append(todo, watchEvent{p: p, wd: wd, ev: ev})
		}
		if ev == dirWatchGone {
			delete(w.byWd, wd)
		}
	}
	return todo
}

// cString returns b up to its first NUL (inotify pads names with NULs).
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
