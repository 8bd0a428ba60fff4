package notify

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Event is one inotify event handed to a subscriber.
type Event struct {
	// Mask is the event's bits as the kernel reported them (unix.IN_*).
	// Either some of the event bits the subscriber's mask asked for, maybe
	// with IN_ISDIR (the subject is a directory); or one of those the kernel
	// sends whatever the mask: IN_Q_OVERFLOW (the queue overflowed and
	// events were lost, on any watch: every subscriber gets it and should
	// look at what it watches), IN_UNMOUNT (the file system under the watch
	// went away; IN_IGNORED follows), and IN_IGNORED (the watch is gone: its
	// file or directory was deleted or unmounted. The subscription has
	// ended, its cancel does nothing, and watching on needs a new Watch).
	Mask uint32
	// Name is the file within a watched directory the event is about, as
	// the kernel named it (no directory part); empty for an event on the
	// watched path itself and for IN_Q_OVERFLOW and IN_IGNORED.
	Name string
}

// eventBits are the bits of a mask that ask for events, and the only ones
// matched against an event's: the rest (IN_ONLYDIR, IN_DONT_FOLLOW,
// IN_EXCL_UNLINK) are flags that say how to watch, and IN_ISDIR on an event
// says what it is about.
const eventBits = unix.IN_ALL_EVENTS

// uninvited are the events the kernel sends on a watch whatever its mask;
// every subscriber of the watch gets them.
const uninvited = unix.IN_UNMOUNT | unix.IN_IGNORED

// sharedFlags act on the whole watch, which other subscribers share: Watch
// refuses them. (IN_ONESHOT would end every subscriber's watch at the first
// event, IN_MASK_ADD is how Watch adds a mask anyway, and IN_MASK_CREATE
// fails on a path another subscriber watches.)
const sharedFlags = unix.IN_ONESHOT | unix.IN_MASK_ADD | unix.IN_MASK_CREATE

// notifier is the process's one inotify instance and what it watches.
type notifier struct {
	fd int
	f  *os.File // fd, read through the poller

	mu      sync.Mutex
	watches map[int32]*watch // by watch descriptor
}

// watch is one inotify watch (one inode) and its subscribers. Guarded by
// the notifier's mu.
type watch struct {
	wd   int32
	path string // the path it was last watched through: narrow re-adds through it
	// mask is what the kernel was given: the union of the subscribers'
	// masks, flags included, or wider when narrowing it failed.
	mask uint32
	subs []*subscriber
}

// subscriber is one Watch call.
type subscriber struct {
	mask uint32
	fn   func(evs []Event)
	w    *watch // nil once cancelled or its watch is gone; guarded by the notifier's mu
	// evs are this read's events for fn; only the notifier's goroutine uses
	// them.
	evs []Event
}

var (
	once     sync.Once
	instance *notifier
	initErr  error
)

// theNotifier starts the process's notifier on first use. When inotify is
// unavailable (inotify_init1 failed, say at the per-user instance limit)
// it returns that error for good, and callers rely on their poll interval.
func theNotifier() (*notifier, error) {
	once.Do(func() {
		fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			initErr = os.NewSyscallError("inotify_init1", err)
			return
		}
		instance = &notifier{fd: fd, f: os.NewFile(uintptr(fd), "inotify"), watches: make(map[int32]*watch)}
		go instance.run()
	})
	return instance, initErr
}

// Watch calls fn with the events on path (a file, or a directory and the
// files in it) that mask asks for, from the notifier's one goroutine, until
// cancel is called or the watch is gone (an IN_IGNORED event, the last fn
// gets). mask is inotify's (unix.IN_* event bits, and flags such as
// IN_ONLYDIR); it must ask for at least one event, and must not hold
// IN_ONESHOT, IN_MASK_ADD or IN_MASK_CREATE, which would act on other
// subscribers of the same inode.
//
// fn gets, once per read of the instance, this subscriber's events of that
// read in order: a caller that only looks again at what it watches does one
// look per batch rather than one per event. evs is only valid during the
// call. fn must not block, since every subscriber waits for it; it may call
// cancel (its own or another's) and Watch.
//
// cancel may be called more than once and from any goroutine. It does not
// wait for a call of fn in progress (so it may be called under a lock fn
// takes), and so fn may still be called once with events read before
// cancel returned; fn must tolerate that.
//
// On error nothing is watched and cancel does nothing. The error is an
// *os.SyscallError from inotify_init1 when the process has no instance (the
// same one on every call), an *os.PathError from inotify_add_watch when
// path cannot be watched, or one that says what is wrong with mask; outside
// Linux Watch always fails.
func Watch(path string, mask uint32, fn func(evs []Event)) (cancel func(), err error) {
	nop := func() {}
	if mask&eventBits == 0 {
		return nop, fmt.Errorf("notify: watch %s: mask %#x asks for no event", path, mask)
	}
	if mask&sharedFlags != 0 {
		return nop, fmt.Errorf("notify: watch %s: mask %#x holds IN_ONESHOT, IN_MASK_ADD or IN_MASK_CREATE, which would act on every subscriber of the inode", path, mask)
	}
	n, err := theNotifier()
	if err != nil {
		return nop, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	// IN_MASK_ADD: a watch another subscriber holds on the inode keeps its
	// mask and gains ours; without it the kernel would replace the mask.
	wd, err := unix.InotifyAddWatch(n.fd, path, mask|unix.IN_MASK_ADD)
	if err != nil {
		return nop, &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
	}
	w := n.watches[int32(wd)]
	if w == nil {
		w = &watch{wd: int32(wd)}
		n.watches[w.wd] = w
	}
	w.path = path
	w.mask |= mask
	s := &subscriber{mask: mask, fn: fn, w: w}
	w.subs = append(w.subs, s)
	return func() { n.cancel(s) }, nil
}

// cancel drops s from its watch. The watch is removed with its last
// subscriber, and narrowed to what the others ask for otherwise.
func (n *notifier) cancel(s *subscriber) {
	n.mu.Lock()
	defer n.mu.Unlock()
	w := s.w
	if w == nil {
		return // cancelled already, or the watch went (IN_IGNORED)
	}
	s.w = nil
	w.subs = slices.DeleteFunc(w.subs, func(o *subscriber) bool { return o == s })
	if len(w.subs) > 0 {
		n.narrow(w)
		return
	}
	delete(n.watches, w.wd)
	// Fails when the watch is already gone with its file (its IN_IGNORED is
	// on the way, for a descriptor no longer known): nothing to undo.
	_, _ = unix.InotifyRmWatch(n.fd, uint32(w.wd))
}

// narrow gives the kernel the union of w's remaining subscribers' masks,
// so the goroutine is not woken for events nobody wants. A wider mask is
// never wrong (dispatch filters by each subscriber's mask), so narrow gives
// up whenever it cannot be sure of the inode.
//
// inotify sets a mask only through a path, and the path may name another
// inode by now (renamed, replaced): a plain add there would replace that
// inode's mask. So narrow first adds w's own mask with IN_MASK_ADD, which
// changes nothing on w's inode, to learn which watch the path names, and
// replaces the mask only when it is w's.
func (n *notifier) narrow(w *watch) {
	var want uint32
	for _, s := range w.subs {
		want |= s.mask
	}
	if want == w.mask {
		return
	}
	if wd, err := unix.InotifyAddWatch(n.fd, w.path, w.mask|unix.IN_MASK_ADD); err != nil || !n.isWatch(int32(wd), w, w.mask) {
		return
	}
	if wd, err := unix.InotifyAddWatch(n.fd, w.path, want); err == nil && n.isWatch(int32(wd), w, want) {
		w.mask = want
	}
}

// isWatch reports whether wd, which an add of mask through w's path
// returned, is w. When not, it undoes what the add did to the other inode:
// it removes a watch nobody asked for, and gives one of another subscriber
// the union of its mask and mask (the add left it either that or, a plain
// add, mask alone: never less than its subscribers ask for).
func (n *notifier) isWatch(wd int32, w *watch, mask uint32) bool {
	if wd == w.wd {
		return true
	}
	if o := n.watches[wd]; o != nil {
		o.mask |= mask
		_, _ = unix.InotifyAddWatch(n.fd, w.path, o.mask)
	} else {
		_, _ = unix.InotifyRmWatch(n.fd, uint32(wd))
	}
	return false
}

// run reads events until the process ends and hands them to the
// subscribers, calling each subscriber's fn without the lock (fn may
// cancel).
func (n *notifier) run() {
	buf := make([]byte, 64<<10) // room for 4,000 events of segment-sized names
	var todo []*subscriber
	for {
		got, err := n.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // not expected; do not spin
			continue
		}
		todo = n.dispatch(buf[:got], todo[:0])
		for i, s := range todo {
			s.fn(s.evs)
			clear(s.evs) // no names kept alive
			s.evs = s.evs[:0]
			todo[i] = nil
		}
	}
}

// dispatch sorts the events b into each subscriber's evs and returns the
// subscribers that got some, appended to todo. A queue overflow goes to
// every subscriber; a watch gone (IN_IGNORED) goes to its subscribers and
// ends their subscriptions.
func (n *notifier) dispatch(b []byte, todo []*subscriber) []*subscriber {
	n.mu.Lock()
	defer n.mu.Unlock()
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b))
		mask := binary.NativeEndian.Uint32(b[4:])
		nameLen := int(binary.NativeEndian.Uint32(b[12:]))
		name := b[unix.SizeofInotifyEvent:min(len(b), unix.SizeofInotifyEvent+nameLen)]
		b = b[min(len(b), unix.SizeofInotifyEvent+nameLen):]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			for _, w := range n.watches {
				for _, s := range w.subs {
					todo = s.add(todo, Event{Mask: mask})
				}
			}
			continue
		}
		w := n.watches[wd]
		if w == nil {
			continue // removed since (cancelled): its queued events are nobody's
		}
		ev, named := Event{Mask: mask}, false
		for _, s := range w.subs {
			if mask&uninvited == 0 && mask&s.mask&eventBits == 0 {
				continue
			}
			if !named {
				ev.Name, named = cString(name), true
			}
			todo = s.add(todo, ev)
		}
		if mask&unix.IN_IGNORED != 0 {
			for _, s := range w.subs {
				s.w = nil
			}
			delete(n.watches, wd)
		}
	}
	return todo
}

// add appends ev to s's events, and s to todo with its first event.
func (s *subscriber) add(todo []*subscriber, ev Event) []*subscriber {
	if len(s.evs) == 0 {
		todo = append(todo, s)
	}
	s.evs = append(s.evs, ev)
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
