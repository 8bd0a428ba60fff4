package log

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
)

// segmentSet is a partition's segments in offset order: the files that
// hold its records, the last one the active segment (the one appended to,
// or, read-only, the one the writer may still be appending to). It owns the
// list and the walk buffer its walks reuse, and knows how a segment is
// created and given its write path; which segments to add or drop is its
// callers' decision (recovery, a roll, retention, Truncate, a read-only
// refresh).
//
// It has no lock of its own: the partition's mu guards it (read lock to look
// up, write lock to change). A segment taken out of the set stays open for
// as long as a read holds a reference to it (segment.acquire).
type segmentSet struct {
	dir      string // the partition folder
	topic    string // for errors
	id       int32  // for errors
	mode     Mode   // write path of an active segment (WithMode)
	capacity int64  // bytes a new active segment may hold (WithSegmentBytes)
	interval int    // bytes between index entries (WithIndexInterval)

	list []*segment
	// walkBuf is the read buffer of walks (recovery, refreshes, repair),
	// kept between them.
	walkBuf []byte
}

// len returns the number of segments.
func (ss *segmentSet) len() int { return len(ss.list) }

// at returns the i-th segment, oldest first.
func (ss *segmentSet) at(i int) *segment { return ss.list[i] }

// all returns the segments, oldest first; the slice is the set's own, to
// range over under the partition lock, not to keep.
func (ss *segmentSet) all() []*segment { return ss.list }

// active returns the last segment. The set must not be empty.
func (ss *segmentSet) active() *segment { return ss.list[len(ss.list)-1] }

// bounds returns the log start offset and the next offset, both 0 when the
// set is empty.
func (ss *segmentSet) bounds() (start, next int64) {
	if len(ss.list) == 0 {
		return 0, 0
	}
	return ss.list[0].base, ss.active().next
}

// end returns where the active segment's frames end, as a point; the set
// must not be empty.
func (ss *segmentSet) end() point {
	s := ss.active()
	return point{Segment: s.base, Position: s.size, Offset: s.next}
}

// find returns the index of the segment whose base is the highest at or
// below offset, -1 when offset is below the first.
func (ss *segmentSet) find(offset int64) int {
	return sort.Search(len(ss.list), func(i int) bool { return ss.list[i].base > offset }) - 1
}

// compactedThrough returns the highest mapped offset of the compacted
// segments' flags (compacted.go), 0 when no segment was compacted: a cut
// below it could remove a record that replaced one the cleaner removed.
func (ss *segmentSet) compactedThrough() int64 {
	var m int64
	for _, s := range ss.list {
		if s.gaps {
			m = max(m, s.mapped)
		}
	}
	return m
}

// bytes returns the size of every segment's frames, added up.
func (ss *segmentSet) bytes() int64 {
	total := int64(0)
	for _, s := range ss.list {
		total += s.size
	}
	return total
}

// path returns the file path of the segment of base offset base.
func (ss *segmentSet) path(base int64) string { return segmentPath(ss.dir, base) }

// push adds s after the last segment.
func (ss *segmentSet) push(s *segment) { ss.list = append(ss.list, s) }

// create creates the segment whose first offset is base, gives it its
// write path and makes it the active one. The directory is not fsynced
// here: the sealer of the roll that created it does that, and no sync of
// the new segment completes before the sealer has (groupWriter's
// syncActive), so its name is on disk before anything in it is acked as
// synced. The first segment of a partition, created with the partition, is
// synced by the caller.
func (ss *segmentSet) create(base int64) error {
	s, err := openSegment(ss.dir, base, os.O_RDWR|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: create segment: %w", ss.topic, ss.id, err)
	}
	if err := ss.activate(s); err != nil {
		s.f.Close()
		return err
	}
	ss.list = append(ss.list, s)
	return nil
}

// activate attaches the configured write path to s.
func (ss *segmentSet) activate(s *segment) error {
	capacity := max(ss.capacity, s.size)
	if ss.mode == ModeMmap {
		w, err := newMmapWriter(s.f, capacity, s.size)
		if err != nil {
			return fmt.Errorf("log: topic %s partition %d: %w", ss.topic, ss.id, err)
		}
		s.w = w
		return nil
	}
	s.w = newFileWriter(s.f, capacity)
	return nil
}

// roll seals the active segment (its write path released, a mapped file
// shrunk to its frames, its index trimmed) and creates its successor at
// the next offset, which becomes the active segment. A stale seal marker
// of the sealed segment's base (left by a Truncate that removed an earlier
// file of that name) is removed first, so that no marker describes another
// file once it has a successor. It returns the sealed segment. What makes
// the sealed segment durable is the writer's (groupWriter's sealer).
func (ss *segmentSet) roll() (*segment, error) {
	old := ss.active()
	if err := old.w.seal(old.size); err != nil {
		return nil, fmt.Errorf("log: topic %s partition %d: seal %s: %w", ss.topic, ss.id, old.path, err)
	}
	old.w = nil
	old.trimIndex()
	if err := removeSealMarker(ss.dir, old.base); err != nil {
		return nil, fmt.Errorf("log: topic %s partition %d: %w", ss.topic, ss.id, err)
	}
	if err := ss.create(old.next); err != nil {
		return nil, err
	}
	return old, nil
}

// dropFront takes the n oldest segments out of the set, without closing
// them: the caller closes them (or leaves that to the last read in them).
func (ss *segmentSet) dropFront(n int) { ss.list = slices.Delete(ss.list, 0, n) }

// dropActive takes the active segment out of the set, without closing it.
func (ss *segmentSet) dropActive() { ss.list = ss.list[:len(ss.list)-1] }

// keep keeps the first n segments and forgets the rest, without closing
// them.
func (ss *segmentSet) keep(n int) { ss.list = ss.list[:n] }

// closeAll closes every segment (each descriptor goes once no read holds
// it), empties the set and returns the errors of the closes.
func (ss *segmentSet) closeAll() error {
	var errs []error
	for _, s := range ss.list {
		errs = append(errs, s.close())
	}
	ss.list = nil
	return errors.Join(errs...)
}

// segmentPath returns the path of the segment of base offset base in the
// partition folder dir.
func segmentPath(dir string, base int64) string { return filepath.Join(dir, segmentName(base)) }

// writeSide is what writeFrames tells the group writer: the writes it made
// (for the metrics) and its rolls, which the writer sees through (segMu held
// while the sealed segment's write path is released) and seals (the sealer
// forces the sealed segment to disk). groupWriter implements it.
type writeSide interface {
	countWrite(n, size int)
	lockSegment()
	unlockSegment()
	rolledLocked(old, next *segment)
}

// writeFrames stores n encoded frames at the end of the active segment,
// rolling to a new segment when the next frame does not fit (see roll and
// groupWriter.rolledLocked: a sealer goroutine then forces the sealed
// segment to disk and writes its seal marker), and returns how many frames
// it wrote and where the log now ends. forSync prepares the segment for the
// sync that follows (segmentWriter.prepare). The caller holds the partition
// lock and publishes the new end.
func (ss *segmentSet) writeFrames(frames []byte, n int, forSync bool, w writeSide) (wrote int, at point, err error) {
	for len(frames) > 0 {
		s := ss.active()
		k, size := n-wrote, len(frames) // most groups fit whole: no walk
		if int64(size) > s.w.capacity()-s.size {
			k, size = framesThatFit(frames, s.w.capacity()-s.size)
		}
		if k > 0 {
			if err := s.appendFrames(frames[:size], k, ss.interval); err != nil {
				return wrote, ss.end(), fmt.Errorf("log: topic %s partition %d: %w", ss.topic, ss.id, err)
			}
			w.countWrite(k, size)
			frames = frames[size:]
			wrote += k
		}
		if len(frames) > 0 {
			w.lockSegment() // a sync must not use the write path the seal releases
			old, err := ss.roll()
			if err == nil {
				w.rolledLocked(old, ss.active())
			}
			w.unlockSegment()
			if err != nil {
				return wrote, ss.end(), err
			}
		}
	}
	s := ss.active()
	if forSync {
		if err := s.w.prepare(s.size); err != nil {
			return wrote, ss.end(), fmt.Errorf("log: topic %s partition %d: %w", ss.topic, ss.id, err)
		}
	}
	return wrote, ss.end(), nil
}

// appendFrames stores n encoded frames at the end of s and only then
// advances s.size, s.next and the index (an entry every interval bytes):
// the next offset is published after its bytes (readers trust everything
// below it).
func (s *segment) appendFrames(frames []byte, n int, interval int) error {
	if err := s.w.write(frames, s.size); err != nil {
		return fmt.Errorf("write %s at byte %d: %w", s.path, s.size, err)
	}
	// The walk keeps size, next and the newest timestamp in locals: stores
	// through s every frame cost a twentieth of a 64 B append (perf).
	size, next, step := s.size, s.next, int64(interval)
	newest, has := s.maxTimestamp, s.hasTimestamp
	for range n {
		bodyLen, _ := frameHeader(frames)
		fs := int64(padded(frameHeaderBytes + int(bodyLen)))
		if s.indexedAt < 0 || size-s.indexedAt >= step {
			s.maybeIndex(next, size, interval)
		}
		if ts := frameTimestamp(frames); !has || ts > newest {
			newest, has = ts, true
		}
		size += fs
		next++
		frames = frames[fs:]
	}
	s.size, s.next = size, next
	if has {
		s.noteTimestamp(newest)
	}
	return nil
}
