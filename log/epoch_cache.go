package log

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
)

// epochCache is a partition's epoch history and its epoch file
// (epochFileName in dir). It has no lock of its own: history and seen are
// guarded by the partition's mu, which the caller of a method named
// ...Locked holds (the read lock for latestLocked, endOffsetLocked,
// rewrittenLocked and stepBackLocked, the write lock for the others, which
// change them). epoch and pending are atomics, read without it (current,
// unwritten) and stored under the write lock.
type epochCache struct {
	topic string // for errors
	id    int32
	dir   string // the partition directory, where the epoch file is

	history epochs       // the epoch history; the last entry is the current epoch
	epoch   atomic.Int32 // history.latest(), read by appenders without the partition's mu
	seen    os.FileInfo  // read-only: the epoch file when last read
	// pending is set while history holds an epoch the epoch file does not:
	// the writer's open found the disk full (beginLocked). An append writes
	// the file before it accepts a record (writeUnwrittenLocked); a
	// Truncate's write of the file clears it too (truncateLocked).
	pending atomic.Bool
}

// current returns the epoch of the next record appended, without the
// partition's mu.
func (c *epochCache) current() int32 { return c.epoch.Load() }

// unwritten reports, without the partition's mu, whether the current epoch
// is not in the epoch file yet (see pending).
func (c *epochCache) unwritten() bool { return c.pending.Load() }

// latestLocked returns the latest epoch of the history as last loaded, -1
// when it is empty.
func (c *epochCache) latestLocked() int32 { return c.history.latest() }

// endOffsetLocked returns where epoch ended, next when it is the latest
// (epochs.endOffset).
func (c *epochCache) endOffsetLocked(epoch int32, next int64) (int64, bool) {
	return c.history.endOffset(epoch, next)
}

// beginLocked starts a new epoch at next, the current end (the active
// segment's next offset), and records it durably before anything is
// appended in it. A writer does this at every open, not only when recovery
// cut a torn tail: records that were in the page cache but never reached
// the disk vanish in a machine crash without leaving a torn frame behind,
// and a consumer may have handled them. With a new epoch at every open, any
// offset reused after such a loss belongs to a later epoch than the one a
// consumer saved, and the consumer's resume sees it (KIP-320's divergence
// check).
//
// A full disk (ENOSPC, EDQUOT) does not fail the open: the new epoch is
// kept in memory only (pending), and the first append writes the file
// before it accepts a record (Partition.AppendAck), failing with
// the disk's error while there is no room. Nothing is appended in the epoch
// before then, so nothing can depend on the file meanwhile, and a log that
// filled its disk still opens for writing: to be read, truncated, or have
// its space freed by retention. Opening it used to fail on whichever
// partition's epoch file came after the others' reservations took the last
// blocks.
func (c *epochCache) beginLocked(next int64) error {
	e, err := readEpochs(c.dir)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", c.topic, c.id, err)
	}
	e = e.begin(next)
	if err := e.write(c.dir); err != nil {
		if !diskFull(err) {
			return fmt.Errorf("log: topic %s partition %d: %w", c.topic, c.id, err)
		}
		c.pending.Store(true)
	}
	c.history = e
	c.epoch.Store(e.latest())
	return nil
}

// writeUnwrittenLocked records the epoch history the open could not
// (pending, see beginLocked). It returns the write's error (ENOSPC while
// the disk is full), leaving pending set.
func (c *epochCache) writeUnwrittenLocked() error {
	if !c.unwritten() {
		return nil // another append wrote it first
	}
	if err := c.history.write(c.dir); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", c.topic, c.id, err)
	}
	c.pending.Store(false)
	return nil
}

// truncateLocked begins the epoch of a Truncate at offset, the new end, and
// writes the history before the partition publishes that end.
func (c *epochCache) truncateLocked(offset int64) error {
	e := c.history.begin(offset)
	if err := e.write(c.dir); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", c.topic, c.id, err)
	}
	c.history = e
	c.epoch.Store(e.latest())
	c.pending.Store(false) // the file now holds every epoch
	return nil
}

// reloadLocked rereads the epoch file of a read-only partition when it
// changed since the last read. It costs one stat while the file is
// unchanged: the writer replaces the file by rename, so a new version is a
// new inode (an mtime alone can repeat within one clock tick).
func (c *epochCache) reloadLocked() error {
	fi, err := os.Stat(filepath.Join(c.dir, epochFileName))
	if err != nil {
		return nil // not written yet: the writer has not opened this partition
	}
	if c.seen != nil && os.SameFile(fi, c.seen) && fi.ModTime().Equal(c.seen.ModTime()) {
		return nil
	}
	e, err := readEpochs(c.dir)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", c.topic, c.id, err)
	}
	c.history, c.seen = e, fi
	return nil
}

// fileChangedLocked reports whether the epoch file is not the one last
// read (reloadLocked would read it), without reading it.
func (c *epochCache) fileChangedLocked() bool {
	fi, err := os.Stat(filepath.Join(c.dir, epochFileName))
	if err != nil {
		return c.seen != nil
	}
	return c.seen == nil || !os.SameFile(fi, c.seen) || !fi.ModTime().Equal(c.seen.ModTime())
}

// forgetFileLocked forgets which version of the epoch file was last read,
// so the next reloadLocked reads it whatever it is (a partition going back
// to read-only after a failed upgrade).
func (c *epochCache) forgetFileLocked() { c.seen = nil }

// rewrittenLocked reports whether the writer began, since the epochs a
// read-only partition had before (whose latest epoch was prev), an epoch
// that starts below end, the end this reader has walked to (its active
// segment's next offset; the caller has segments): it reopened after
// losing records this reader saw (a torn tail cut, a crash that dropped
// unsynced pages) or truncated below that end, so the frames this reader
// walked may be gone and their offsets reused. Epoch numbers only rise
// (epochs.begin), so the new epochs are those above prev, and the first of
// them starts lowest: a later Truncate that dropped entries from the file
// began at or below them.
func (c *epochCache) rewrittenLocked(prev int32, end int64) bool {
	if c.history.latest() <= prev {
		return false
	}
	i := sort.Search(len(c.history), func(i int) bool { return c.history[i].epoch > prev })
	return c.history[i].start < end
}

// stepBackLocked returns offset, or the start of the epoch that followed
// epoch when that is lower (see Partition.stepBack).
func (c *epochCache) stepBackLocked(offset int64, epoch int32) int64 {
	if start, ok := c.history.divergence(epoch); ok && start < offset {
		return start
	}
	return offset
}
