package log

import (
	"sync/atomic"
)

// Read returns records from offset onwards: at least one when offset is
// below HighWatermark (even if it alone exceeds maxBytes), and no more frames
// than maxBytes allows after the first (maxBytes <= 0 means 1 MiB). It
// returns nil, nil at HighWatermark, and an *OffsetOutOfRangeError (matching
// ErrOffsetOutOfRange) below the log start offset or above HighWatermark.
// Records never cross a segment: a read that reaches the end of one segment
// returns what it has.
//
// The records' bytes (Key, Value, header keys and values) alias one buffer
// allocated for this call, of the size of the frames returned, and stay
// valid for as long as the caller keeps them. A Reader reads the same way
// and can also reuse its []Record (Reader.NextInto).
func (p *Partition) Read(offset int64, maxBytes int) ([]Record, error) {
	return p.readInto(nil, offset, maxBytes, nil)
}

// readInto is Read appending to dst (see Reader.NextInto), with rb saying
// where the bytes live (nil: a buffer of the batch's own).
func (p *Partition) readInto(dst []Record, offset int64, maxBytes int, rb *readBuf) ([]Record, error) {
	if maxBytes <= 0 {
		maxBytes = 1 << 20
	}
	if p.ro.Load() {
		p.refresh(func(r *refresher) { r.refreshForReadLocked(offset) })
	}
	n0 := len(dst)
	for {
		s, e, end, ends, gen, err := p.acquire(offset)
		if err != nil && p.ro.Load() && p.cuts.Load() == gen {
			// The build of a segment's index can find the frames the writer
			// cut since its seal marker was trusted: as for a read below.
			p.rf.recheckRead(gen, offset, err)
			if p.cuts.Load() != gen {
				continue
			}
		}
		if s == nil || err != nil {
			return dst, err
		}
		beforeSegmentRead(p, s.base, offset)
		dst, err = s.read(dst, e, offset, maxBytes, end, p.topic, p.id, rb)
		s.release()
		if err != nil && p.ro.Load() && p.cuts.Load() == gen {
			p.rf.recheckRead(gen, offset, err) // a Truncate by the writer moves gen
		}
		if p.cuts.Load() == gen && err == nil && len(dst) == n0 && offset < ends {
			// A compacted segment whose records from offset to its end
			// were removed: read on from its successor.
			offset = ends
			continue
		}
		if p.cuts.Load() == gen {
			return dst, err
		}
		// Truncate cut the log while this read ran without the lock; what
		// it read may be gone or rewritten. Read again.
		clear(dst[n0:])
		dst = dst[:n0]
	}
}

// acquire finds the segment holding offset under the read lock, takes
// a reference on it and returns it with the index entry to start from, the
// end of its verified frames, the offset it ends at when it was compacted
// (segment.ends; 0 otherwise) and the truncation generation. It returns a nil
// segment at the high watermark, and an *OffsetOutOfRangeError outside
// [StartOffset, HighWatermark].
func (p *Partition) acquire(offset int64) (*segment, indexEntry, int64, int64, uint64, error) {
	for {
		var (
			s, unbuilt *segment
			e          indexEntry
			size, ends int64
			err        = ErrClosed
		)
		p.mu.RLock()
		if !p.closed.Load() {
			s, e, size, unbuilt, err = p.segs.acquire(offset)
		}
		if s != nil && s.gaps {
			ends = s.next
		}
		gen := p.cuts.Load()
		p.mu.RUnlock()
		if unbuilt == nil {
			return s, e, size, ends, gen, err
		}
		// A segment trusted by its seal marker builds its index on its
		// first read: a walk of the whole segment (about 20 ms for 64 MiB),
		// done holding only a reference, not the partition's lock, which
		// every append takes. Then look again: the segment may be gone.
		err = unbuilt.loadIndex(p.topic, p.id)
		_ = unbuilt.release()
		if err != nil {
			return nil, indexEntry{}, 0, 0, gen, err
		}
	}
}

// acquire finds the segment holding offset, takes a reference on it and
// returns it with the index entry to start from and the end of its
// verified frames. It returns a nil segment at the end of the log, and an
// *OffsetOutOfRangeError outside [start, next]. When that segment has its
// index still to build, it returns it instead, referenced, in unbuilt, for
// the caller to build it without the partition lock. The caller holds the
// partition's read lock.
func (ss *segmentSet) acquire(offset int64) (s *segment, e indexEntry, size int64, unbuilt *segment, err error) {
	start, next := ss.bounds()
	if offset < start || offset > next {
		return nil, indexEntry{}, 0, nil, &OffsetOutOfRangeError{Topic: ss.topic, Partition: ss.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	for i := ss.find(offset); offset < next && i < len(ss.list); i++ {
		s = ss.list[i]
		if offset >= s.next {
			continue // an empty segment (base == next)
		}
		s.acquire()
		if !s.indexBuilt() {
			return nil, indexEntry{}, 0, s, nil
		}
		if err := s.loadIndex(ss.topic, ss.id); err != nil { // built, with the corruption it found
			_ = s.release()
			return nil, indexEntry{}, 0, nil, err
		}
		return s, s.lookup(offset), s.size, nil, nil
	}
	return nil, indexEntry{}, 0, nil, nil
}

// beforeSegmentReadHook, set only by tests (export_test.go), runs in
// Partition.Read after the segment has been acquired and the partition lock
// released, just before the pread: a test pauses a read there while
// retention deletes the segment.
var beforeSegmentReadHook atomic.Pointer[func(p *Partition, base, offset int64)]

func beforeSegmentRead(p *Partition, base, offset int64) {
	if h := beforeSegmentReadHook.Load(); h != nil {
		(*h)(p, base, offset)
	}
}
