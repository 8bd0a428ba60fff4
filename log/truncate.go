package log

import (
	"fmt"
	"os"
)

// Truncate removes every record at offset and above; the next append
// reuses offset. Records accepted by earlier appends are written first;
// appends of removed records still waiting for their sync fail with
// ErrTruncated. The recovery point is lowered to offset first, segments
// above it are deleted (directory fsynced) and the cut is forced to disk.
// Like every write it first takes the topic's writer lock
// (Topic.LockWriter), and it waits for a cleaner pass or a retention check
// in progress on the partition. Errors: ErrReadOnly, ErrLocked, ErrClosed,
// ErrOffsetOutOfRange for an offset outside [StartOffset, HighWatermark],
// a *CompactedError (ErrCompacted) for an offset below what a cleaner pass
// relied on (see "Compaction" in the package doc), the partition's write or
// sync failure.
func (p *Partition) Truncate(offset int64) error {
	if err := p.writable("truncate"); err != nil {
		return err
	}
	// No retention check or cleaner pass runs meanwhile: a pass swaps
	// segments a Truncate may cut (cleaner.go).
	p.ret.mu.Lock()
	defer p.ret.mu.Unlock()
	if err := p.w.acquireWriter(); err != nil {
		return err
	}
	// No roll starts while the writer role is held: wait for the sealers of
	// the earlier ones, which read the segments this may cut and write
	// their seal markers.
	if err := p.w.awaitSealers(); err != nil {
		p.w.releaseWriter(nil)
		return err
	}
	p.mu.Lock()
	defer func() {
		end := p.segs.end()
		p.mu.Unlock()
		p.w.releaseWriter(&end)
	}()
	if p.closed.Load() {
		return ErrClosed
	}
	start, next := p.segs.bounds()
	if offset < start || offset > next {
		return &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	if offset == next {
		return nil
	}
	if mapped := p.segs.compactedThrough(); offset < mapped {
		return &CompactedError{Topic: p.topic, Partition: p.id, Offset: offset, CompactedThrough: mapped}
	}
	p.cuts.Add(1) // reads in flight without the lock retry (see Read)
	i := p.segs.find(offset)
	s := p.segs.at(i)
	pos, err := s.positionOf(offset, p.topic, p.id)
	if err != nil {
		return err
	}
	if err := p.rp.lowerPoint(point{Segment: s.base, Position: pos, Offset: offset}); err != nil {
		return err
	}
	p.w.lockSegment()
	defer p.w.unlockSegment()
	for p.segs.len()-1 > i {
		s := p.segs.active()
		if err := s.close(); err != nil {
			return err
		}
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
		if err := removeSealMarker(p.dir, s.base); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
		if err := removeCompactedFlag(p.dir, s.base); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
		p.segs.dropActive()
	}
	if s.w == nil {
		// A sealed segment becomes the active one again: its marker will
		// describe another length.
		if err := removeSealMarker(p.dir, s.base); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
	}

	if err := syncDir(p.dir); err != nil {
		return err
	}
	if s.w == nil {
		if err := p.segs.activate(s); err != nil {
			return err
		}
	}
	p.w.setSegmentLocked(s)
	if err := s.w.cut(pos, s.size); err != nil {
		return fmt.Errorf("log: truncate %s at byte %d: %w", s.path, pos, err)
	}
	if err := s.w.sync(); err != nil {
		return fmt.Errorf("log: sync %s: %w", s.path, err)
	}
	s.size, s.next = pos, offset
	s.dropIndexFrom(offset)
	if err := p.ep.truncateLocked(offset); err != nil {
		return err
	}
	p.publishLocked()
	return nil
}

// positionOf returns the byte position of the frame of offset off.
func (s *segment) positionOf(off int64, topic string, partition int32) (int64, error) {
	if err := s.loadIndex(topic, partition); err != nil {
		return 0, err
	}
	if off == s.base {
		return 0, nil
	}
	// Step frame by frame from the index entry at or below off, reading
	// each frame's offset (a compacted segment skips offsets) up to the
	// first at or above off.
	e := s.lookup(off)
	pos := e.pos
	buf := make([]byte, frameHeaderBytes+16) // the header and the body's offset
	for pos < s.size {
		if _, err := s.f.ReadAt(buf, pos); err != nil {
			return 0, fmt.Errorf("log: read %s at byte %d: %w", s.path, pos, err)
		}
		bodyLen, _ := frameHeader(buf)
		if bodyLen < bodyFixedBytes {
			return 0, &CorruptError{Topic: topic, Partition: partition, Segment: s.path, Position: pos, Offset: off, Reason: "bad length inside the verified log"}
		}
		if bodyOffset(buf[frameHeaderBytes:]) >= off {
			break
		}
		pos += int64(padded(frameHeaderBytes + int(bodyLen)))
	}
	return pos, nil
}
