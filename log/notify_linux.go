package log

import (
	"golang.org/x/sys/unix"

	"github.com/strom-dev/strom/internal/notify"
)

// Followers of read-only partitions watch through internal/notify, the
// process's one inotify instance (the kernel allows 128 per user by
// default, so not one per partition, nor one per package): a watch on the
// partition directory with dirWatchMask, and one on the ModeMmap writer's
// waiters file with fileWatchMask. What each batch of events means for a
// partition is decided here (dirEventOf) and acted on by dirChanged.

// dirWatchMask asks for what an append or roll does to a partition
// directory: IN_MODIFY (a ModeFile pwrite to a segment, an fallocate),
// IN_CREATE and IN_MOVED_TO (a new segment, the waiters file). Not
// IN_ACCESS: followers read the segments themselves.
const dirWatchMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_ONLYDIR

// fileWatchMask asks for a ModeMmap writer's signal: its pread of the
// waiters file.
const fileWatchMask = unix.IN_ACCESS

// partWatch is one of a partition's watches (its directory's or its
// waiters file's). dirChanged tells them apart, and a watch it no longer
// holds from one it holds, by pointer.
type partWatch struct {
	cancel func() // set under crossProcess.mu, as is every use
}

// watchPath watches path for mask on behalf of x: each batch of events
// becomes one call of x.dirChanged. Its error is notify.Watch's (no
// inotify instance, or path not watchable); nothing is watched then.
func watchPath(path string, mask uint32, x *crossProcess) (*partWatch, error) {
	w := &partWatch{}
	cancel, err := notify.Watch(path, mask, func(evs []notify.Event) { x.dirChanged(w, dirEventOf(evs)) })
	if err != nil {
		return nil, err
	}
	w.cancel = cancel
	return w, nil
}

// dirEventOf turns one read's events of a watch into the strongest event
// of the batch for the partition: the watch gone, else the waiters file
// created, else modified. A queue overflow (events lost) counts as a
// change.
func dirEventOf(evs []notify.Event) dirEvent {
	ev := dirModified
	for _, e := range evs {
		switch {
		case e.Mask&unix.IN_IGNORED != 0:
			return dirWatchGone
		case e.Mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 && e.Name == waitersFileName:
			ev = dirWaitersCreated
		}
	}
	return ev
}
