package source

import "golang.org/x/sys/unix"

// notifyMask asks for everything writing, truncating or rotating a file
// does to its directory: IN_MODIFY (a write or truncate of any file in it,
// the renamed old file included), IN_CREATE and IN_MOVED_TO (a new file at
// the path), IN_MOVED_FROM and IN_DELETE (the file leaving the path). Any
// event only wakes the waiter, which then looks at the file itself.
const notifyMask = unix.IN_MODIFY | unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_DELETE | unix.IN_ONLYDIR

// committedNotifyMask asks for a file renamed into a topic's folder: how a
// sink.LogSink commits its transaction file (committed.go).
const committedNotifyMask = unix.IN_MOVED_TO | unix.IN_ONLYDIR
