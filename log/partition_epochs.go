package log

import "fmt"

// Epoch returns the partition's current epoch: the epoch of the next record
// appended. It is 0 for a partition created in this process's open and rises
// by one at every later open for writing and every Truncate that removes records. On a read-only
// log it is the latest epoch the writer recorded (-1 before it recorded
// any).
func (p *Partition) Epoch() int32 {
	if p.ro.Load() {
		p.refresh((*refresher).refreshLocked)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ep.latestLocked()
}

// EndOffsetForEpoch returns where epoch ended: the first offset of the next
// epoch, or HighWatermark when epoch is the current one, as Kafka's
// OffsetForLeaderEpoch answers. ok is false for an epoch older than the
// recorded history (nothing is known about it).
func (p *Partition) EndOffsetForEpoch(epoch int32) (end int64, ok bool) {
	next := p.HighWatermark() // refreshes a read-only partition
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.ep.endOffsetLocked(epoch, next)
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
// silent jump. On a closed partition it returns an error wrapping
// ErrClosed.
func (p *Partition) ResumeOffset(offset int64, epoch int32) (int64, error) {
	if p.closed.Load() {
		return offset, fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	if p.ro.Load() {
		p.refresh((*refresher).refreshLocked) // ResumeOffset runs once per resume: look at the writer's latest epochs
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
	return p.ep.stepBackLocked(offset, epoch)
}
