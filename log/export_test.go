package log

import (
	"os"
	"time"
)

// SyncCalls returns how many syncs p's writer has run (AckSynced, Sync,
// the flush policy, Close; not the syncs of segment rolls): the seam the
// flush-policy tests observe.
func SyncCalls(p *Partition) int64 { return p.w.syncCalls.Load() }

// SyncTime returns the time p's writer spent in those syncs.
func SyncTime(p *Partition) time.Duration { return time.Duration(p.w.syncNanos.Load()) }

// WriteCalls returns how many group writes p's writer has made.
func WriteCalls(p *Partition) int64 { return p.w.writeCalls.Load() }

// RecoveryPointFile is the name of a partition's recovery point file.
const RecoveryPointFile = recoveryPointFile

// SetBeforeSegmentRead installs f to run in every Partition.Read after the
// segment holding the offset has been acquired and the partition lock
// released, just before the segment is read (beforeSegmentReadHook). It
// returns a function that removes f. Tests use it to pause a read inside a
// segment that retention deletes.
func SetBeforeSegmentRead(f func(p *Partition, base, offset int64)) (restore func()) {
	beforeSegmentReadHook.Store(&f)
	return func() { beforeSegmentReadHook.Store(nil) }
}

// FrameBytes returns the bytes r takes in a segment: header, body and
// padding.
func FrameBytes(r Record) int64 { return int64(frameSize(&r)) }

// SetReadOnlyRecheck installs f to run when a read-only open, having found
// a stop in the last segment with intact frames behind it, has waited and
// is about to read the stop again, and when a read-only Read, having found
// frames changed after they were verified and no new epoch, has waited and
// is about to look at the epochs again (readOnlyRecheckHook). It returns a
// function that removes f. Tests use it to finish a write or a Truncate
// "in flight".
func SetReadOnlyRecheck(f func()) (restore func()) {
	readOnlyRecheckHook.Store(&f)
	return func() { readOnlyRecheckHook.Store(nil) }
}

// WithClock replaces the clock of the writer (the time that zero
// timestamps and log append time store, and that WithMaxTimestampAhead
// bounds against) and of the background retention check: the seam tests
// step the clock with.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) { c.now = now })
}

// SetIndexBuild installs f to run when the first read of a segment trusted
// by its seal marker starts building its index (indexBuildHook). It returns
// a function that removes f. Tests use it to hold a first read mid-walk.
func SetIndexBuild(f func()) (restore func()) {
	indexBuildHook.Store(&f)
	return func() { indexBuildHook.Store(nil) }
}

// SetListSegments installs f to rewrite every listing of a partition's
// segment files (listHook). It returns a function that removes f. Tests use
// it to make a listing miss a segment a writer created during it.
func SetListSegments(f func(bases []int64) []int64) (restore func()) {
	listHook.Store(&f)
	return func() { listHook.Store(nil) }
}

// LockFile returns the writer lock file t holds, nil when it holds none.
// Tests duplicate its descriptor to stand for the copy a child process
// holds between its fork and its exec.
func LockFile(t *Topic) *os.File { return t.lock }

// SetCleanerHook makes f run before each file operation of a cleaner pass,
// with the operation's name (cleanerHook). It returns a function that
// removes f. The crash test kills the process from f.
func SetCleanerHook(f func(op string)) func() {
	cleanerHook.Store(&f)
	return func() { cleanerHook.Store(nil) }
}
