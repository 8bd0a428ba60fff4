// Package notify shares the process's one inotify instance among the
// packages that sleep until a file or directory changes: the log's
// followers of read-only partitions and the following line sources. The
// kernel allows 128 instances per user by default
// (/proc/sys/fs/inotify/max_user_instances), so a process must not spend
// one per partition, per source or even per package. One goroutine reads
// the instance's events, through the runtime's poller, and hands each
// subscriber the events it asked for. It lives as long as the process,
// like os/signal's.
//
// inotify has one watch per inode and instance: watching a path that is
// already watched returns the same watch descriptor, and without
// IN_MASK_ADD replaces the watch's mask. So the package keeps the
// subscribers of each watch, gives the kernel the union of their masks,
// hands each subscriber only the events its own mask matches, and narrows
// the watch again when a subscriber cancels (removes it with the last one).
// Callers keep their masks and what they make of the events; this package
// knows nothing of logs or sources.
//
// Outside Linux, and where the instance cannot be created (the limit
// reached, inotify compiled out), [Watch] returns an error and callers fall
// back to looking on an interval.
package notify
