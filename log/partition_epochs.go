package log

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// beginEpochLocked starts a new epoch at the current end and records it
// durably before anything is appended in it. A writer does this at every
// open, not only when recovery cut a torn tail: records that were in the
// page cache but never reached the disk vanish in a machine crash without
// leaving a torn frame behind, and a consumer may have handled them. With a
// new epoch at every open, any offset reused after such a loss belongs to a
// later epoch than the one a consumer saved, and the consumer's resume sees
// it (KIP-320's divergence check).
//
// A full disk (ENOSPC, EDQUOT) does not fail the open: the new epoch is
// kept in memory only (epochUnwritten), and the first append writes the
// file before it accepts a record (writeUnwrittenEpoch), failing with the
// disk's error while there is no room. Nothing is appended in the epoch
// before then, so nothing can depend on the file meanwhile, and a log that
// filled its disk still opens for writing: to be read, truncated, or have
// its space freed by retention. Opening it used to fail on whichever
// partition's epoch file came after the others' reservations took the last
// blocks.
func (p *Partition) beginEpochLocked() error {
	e, err := readEpochs(p.dir)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	e = e.begin(p.segs.active().next)
	if err := e.write(p.dir); err != nil {
		if !diskFull(err) {
			return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
		}
		p.epochUnwritten.Store(true)
	}
	p.epochs = e
	p.epoch.Store(e.latest())
	return nil
}

// writeUnwrittenEpoch records the epoch history the open could not
// (epochUnwritten, see beginEpochLocked), before an append accepts a record
// of its latest epoch. It returns the write's error (ENOSPC while the disk
// is full) without failing the partition: no record was accepted.
func (p *Partition) writeUnwrittenEpoch() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.epochUnwritten.Load() {
		return nil
	}
	if p.closed {
		return ErrClosed
	}
	if err := p.epochs.write(p.dir); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	p.epochUnwritten.Store(false)
	return nil
}

// reloadEpochsLocked rereads the epoch file of a read-only partition when
// it changed since the last read. It costs one stat while the file is
// unchanged: the writer replaces the file by rename, so a new version is a
// new inode (an mtime alone can repeat within one clock tick).
func (p *Partition) reloadEpochsLocked() error {
	fi, err := os.Stat(filepath.Join(p.dir, epochFileName))
	if err != nil {
		return nil // not written yet: the writer has not opened this partition
	}
	if p.epochSeen != nil && os.SameFile(fi, p.epochSeen) && fi.ModTime().Equal(p.epochSeen.ModTime()) {
		return nil
	}
	e, err := readEpochs(p.dir)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	p.epochs, p.epochSeen = e, fi
	return nil
}

// rewrittenLocked reports whether the writer began, since the epochs a
// read-only partition had before (whose latest epoch was prev), an epoch
// that starts below the end this reader has walked to: it reopened after
// losing records this reader saw (a torn tail cut, a crash that dropped
// unsynced pages) or truncated below that end, so the frames this reader
// walked may be gone and their offsets reused. Epoch numbers only rise
// (epochs.begin), so the new epochs are those above prev, and the first of
// them starts lowest: a later Truncate that dropped entries from the file
// began at or below them.
func (p *Partition) rewrittenLocked(prev int32) bool {
	if p.segs.len() == 0 || p.epochs.latest() <= prev {
		return false
	}
	i := sort.Search(len(p.epochs), func(i int) bool { return p.epochs[i].epoch > prev })
	return p.epochs[i].start < p.segs.active().next
}

// Epoch returns the partition's current epoch: the epoch of the next record
// appended. It is 0 for a partition created in this process's open and rises
// by one at every later open for writing and every Truncate that removes records. On a read-only
// log it is the latest epoch the writer recorded (-1 before it recorded
// any).
func (p *Partition) Epoch() int32 {
	if p.readOnly() {
		p.refresh()
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.epochs.latest()
}

// EndOffsetForEpoch returns where epoch ended: the first offset of the next
// epoch, or HighWatermark when epoch is the current one, as Kafka's
// OffsetForLeaderEpoch answers. ok is false for an epoch older than the
// recorded history (nothing is known about it).
func (p *Partition) EndOffsetForEpoch(epoch int32) (end int64, ok bool) {
	next := p.HighWatermark() // refreshes a read-only partition
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.epochs.endOffset(epoch, next)
}

// ResumeOffset validates a saved position: offset is the next offset to
// read, epoch the epoch of the last record handled before it (-1 when
// unknown). When a later epoch began below offset, the records at offsets
// from its start to offset were appended after a recovery or truncation
// reused those offsets: the consumer never saw them, so ResumeOffset returns
// that start instead (KIP-320). An offset above the end of the current epoch
// is not stepped back but refused. It returns an
// *OffsetOutOfRangeError (ErrOffsetOutOfRange) for a result outside
// [StartOffset, HighWatermark]: a position beyond the log end is never a
// silent jump.
func (p *Partition) ResumeOffset(offset int64, epoch int32) (int64, error) {
	if p.readOnly() {
		p.refresh() // ResumeOffset runs once per resume: look at the writer's latest epochs
	}
	offset = p.stepBack(offset, epoch)
	start, next := p.StartOffset(), p.HighWatermark()
	if offset < start || offset > next {
		return offset, &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	return offset, nil
}

// stepBack returns offset, or the start of the epoch that followed epoch
// when that is lower: records from there on were appended after the
// consumer's epoch ended, at offsets it may have passed. It uses the epochs
// as last loaded; a read-only partition reloads them in every refresh.
func (p *Partition) stepBack(offset int64, epoch int32) int64 {
	if epoch < 0 {
		return offset
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if start, ok := p.epochs.divergence(epoch); ok && start < offset {
		return start
	}
	return offset
}
