package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// RecoveryReport says what opening a partition cut from its end. The zero
// value means the partition reopened exactly as it was left.
type RecoveryReport struct {
	// Segment is the path of the segment that was cut, "" if none was.
	Segment string
	// Reason is why the walk stopped: "length past end of file",
	// "crc mismatch", "zero length prefix followed by non-zero bytes" (a
	// ModeMmap append whose body was written and its length not), ...
	Reason string
	// TruncatedBytes is how many bytes were cut from Segment, the torn
	// frame included, and only the torn bytes: zeros at the end of the
	// file (the space a ModeMmap segment reserved past its frames) are not
	// counted; the count runs to the last non-zero byte, rounded up to the
	// 8-byte frame alignment.
	TruncatedBytes int64
	// DroppedRecords counts the records WithRepair dropped: from the first
	// bad frame to the last intact one behind it (in the same segment or in
	// later ones), or to the recovery point when that is further. A torn
	// tail, which was never a record, is not counted.
	DroppedRecords int64
	// DeletedSegments lists segment files removed by WithRepair.
	DeletedSegments []string
}

// listSegments returns the base offsets of the segment files in dir, in
// order. An entry named like a segment that is not a regular file (a
// directory, a symbolic link, a device, ...) is ErrCorrupt naming it: the
// log writes only regular files there, skipping it would hide its records,
// and following a link would read or write outside the log directory.
func listSegments(dir string) ([]int64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []int64
	for _, e := range entries {
		base, ok := parseSegmentName(e.Name())
		if !ok {
			continue
		}
		if err := mustBeRegular(filepath.Join(dir, e.Name()), e.Type()); err != nil {
			return nil, err
		}
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	if h := listHook.Load(); h != nil {
		bases = (*h)(bases)
	}
	return bases, nil
}

// listHook, when set (tests only, SetListSegments), rewrites what
// listSegments found: a test makes a listing miss a segment, as a directory
// read that a writer's roll ran into can.
var listHook atomic.Pointer[func([]int64) []int64]

// errStaleListing says a read-only open's listing of the segments missed
// one that exists: a directory read (several getdents calls on a large
// directory, in hash order on ext4) that a writer's roll ran into can
// return a segment created during it and miss one created before that.
// It is not corruption; the open lists again. Found by a new user's trial:
// 10 of 60 `strom verify` runs beside a writer rolling 256 KiB segments
// reported a gap (2026-12-01).
var errStaleListing = errors.New("segment listing missed a segment")

// relistable reports whether a read-only open failed on a listing the
// directory moved under (a listed segment deleted by the writer's
// retention, or one created missed), so listing again may succeed.
func relistable(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, errStaleListing)
}

// segmentExists reports whether the segment of base offset base has a file
// in dir now.
func segmentExists(dir string, base int64) bool {
	_, err := os.Lstat(filepath.Join(dir, segmentName(base)))
	return err == nil
}

// recovery opens a partition's segments: it opens and walks each one
// (ahead of its decisions on several goroutines, prewalk.go), trusts a
// sealed one by its seal marker (sealed.go), and decides what ends the log:
// the end, a torn tail to cut (tail.go), corruption to fail with or, with
// WithRepair, to cut, or, read-only, an append in flight. It fills the
// partition's segment set and RecoveryReport, and lowers the recovery point
// to where a repair cuts.
//
// A recovery is made for one open (Partition.becomeWriterLocked: a
// writer's open or an upgrade; refresher.recoveryLocked: a read-only open
// or reset) and runs under the
// partition's mu, which guards everything it changes. It holds no
// *Partition: only what it needs, below.
type recovery struct {
	segs  *segmentSet // the partition's segments: filled by the walk, cut by a repair
	cfg   *config     // WithRepair, the index interval
	dir   string      // the partition folder
	topic string      // for errors
	id    int32       // for errors
	// writer is true when the open is the writer's (Partition.becomeWriterLocked):
	// segments are opened read-write, a torn tail is cut, a repair may cut
	// and delete. False: a read-only open, which changes no file and judges
	// a stop that may be an append in flight.
	writer bool
	// rp is the recovery point loaded before the segments were listed (the
	// partition's recoveryPoints.loaded): an end below it is corruption, and
	// a repair lowers it, and the file, to where it cuts (repairPointLocked).
	rp *point
	// epoch is the partition's latest epoch when the recovery was made
	// (epochs.latest): a read-only open that finds damage checks that the
	// writer began no epoch since (checkReadOnlyTailLocked).
	epoch int32
	// report is the partition's RecoveryReport (Partition.Recovery), filled
	// here.
	report *RecoveryReport
}

// recoverLocked opens and walks every segment of a partition being opened
// for writing, and decides, segment by segment, one of:
//
//   - intact (clean end of file, or the zero tail of a reserved segment):
//     keep it;
//   - the end of the last segment: recoverTailLocked (tail.go) tells a torn
//     tail (a bad frame with nothing intact behind it, at or above the
//     recovery point: the remains of an append cut short by a crash; cut it
//     and append from there) from corruption (intact frames behind the bad
//     one, or an end below the recovery point);
//   - a bad frame in an earlier segment, or a gap between segments: the
//     segment was sealed, and forced to disk by its sealer before any sync
//     of its successor completed (a power failure before that is the one
//     way unsynced damage lands here, see roll.go); a bad frame there is
//     corruption. Fail with *CorruptError
//     unless WithRepair was given, in which case cut there, delete the later
//     segments and report what was dropped.
func (r *recovery) recoverLocked(bases []int64) error {
	flag := os.O_RDWR
	if !r.writer {
		flag = os.O_RDONLY
	}
	if len(bases) == 0 && r.writer {
		return r.recoverTailLocked(nil, stopEOF)
	}
	if len(bases) == 0 {
		return r.checkReadOnlyPointLocked(nil, stopEOF)
	}
	pw := r.startPrewalk(bases)
	defer pw.finish()
	for i, base := range bases {
		s, err := openSegment(r.dir, base, flag)
		if err != nil {
			return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
		}
		r.segs.push(s)
		if i > 0 && base != r.segs.at(i-1).next && r.segs.at(i-1).lazy != nil {
			// trusted by its seal marker, which disagrees: the frames decide
			if err := r.rewalkLocked(i - 1); err != nil {
				return err
			}
		}
		if i > 0 && base != r.segs.at(i-1).next {
			prev := r.segs.at(i - 1)
			if !r.writer && prev.next > prev.base && base > prev.next && segmentExists(r.dir, prev.next) {
				// The listing missed a segment the writer created while it
				// was read: list again (relistLocked).
				return fmt.Errorf("log: topic %s partition %d: %w: %s", r.topic, r.id, errStaleListing, r.segs.path(prev.next))
			}
			return r.corruptLocked(i-1, prev.size, fmt.Sprintf("segment ends at offset %d but the next segment starts at %d", prev.next, base))
		}
		last := i == len(bases)-1
		if pw.take(i, s) && !last {
			continue // trusted from its seal marker, or walked intact in parallel
		}
		// The last segment, even when walked in parallel, is walked here
		// (on from where that walk stopped, which costs one read then) for
		// the reason it stops: "intact" covers a zero length, which the
		// tail rules must still judge.
		var why stopReason
		if why, r.segs.walkBuf, err = s.walk(r.segs.walkBuf, r.cfg.indexInterval); err != nil {
			return err
		}
		if last && r.writer {
			return r.recoverTailLocked(s, why) // end, torn tail or corruption (tail.go)
		}
		if last {
			// Read-only: the writer may be mid-append, and refreshLocked
			// retries. But a stop, a zero length included, with intact
			// frames behind it is damage, not an append in flight: say so
			// rather than hide the records behind it.
			if err := r.checkReadOnlyTailLocked(s, why); err != nil {
				return err
			}
			return r.checkReadOnlyPointLocked(s, why)
		}
		if why.intact() {
			continue
		}
		return r.corruptLocked(i, s.size, why.String())
	}
	return nil
}

// recoverReadOnlyLocked is recoverLocked for a read-only open or reset:
// when the listing of bases proved stale (relistable: the writer's
// retention or roll moved the directory under it), it lists and opens
// again (relistLocked).
func (r *recovery) recoverReadOnlyLocked(bases []int64) error {
	err := r.recoverLocked(bases)
	if err != nil && relistable(err) {
		err = r.relistLocked()
	}
	return err
}

// relistLocked opens a read-only partition again after its listing of the
// segments proved stale: a segment it listed vanished before it could open
// it (the writer's retention deleted it in between), or one the writer
// created during the listing was missed (errStaleListing). It lists and
// opens again, a few times.
func (r *recovery) relistLocked() error {
	var err error
	for range 4 {
		r.segs.closeAll()
		*r.report = RecoveryReport{}
		var bases []int64
		bases, err = listSegments(r.dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
		}
		if err = r.recoverLocked(bases); err == nil || !relistable(err) {
			return err
		}
	}
	return err
}

// corruptLocked handles a bad frame at byte pos of segment i below the
// active segment.
func (r *recovery) corruptLocked(i int, pos int64, reason string) error {
	s := r.segs.at(i)
	if !r.cfg.repair || !r.writer {
		return &CorruptError{Topic: r.topic, Partition: r.id, Segment: s.path,
			Position: pos, Offset: s.next, Reason: reason}
	}
	// Count what the later segments held, as far as they walk, then drop
	// them: nothing after the first bad frame can be served contiguously.
	lost := int64(0)
	bases, err := listSegments(r.dir)
	if err != nil {
		return err
	}
	for _, base := range bases {
		if base <= s.base {
			continue
		}
		if lost == 0 && len(r.report.DeletedSegments) == 0 && base > s.next {
			lost = base - s.next // the rest of the corrupt segment, by its successor's base
		}
		path := r.segs.path(base)
		if t, err := openSegment(r.dir, base, os.O_RDONLY); err == nil {
			t.next, t.size = base, 0
			_, r.segs.walkBuf, _ = t.walk(r.segs.walkBuf, r.cfg.indexInterval)
			lost += t.next - base
			t.f.Close()
		}
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("log: repair topic %s partition %d: %w", r.topic, r.id, err)
		}
		r.report.DeletedSegments = append(r.report.DeletedSegments, path)
	}
	for _, t := range r.segs.all()[i+1:] {
		t.f.Close()
	}
	r.segs.keep(i + 1)
	if err := syncDir(r.dir); err != nil {
		return err
	}
	if err := r.repairPointLocked(point{Segment: s.base, Position: s.size, Offset: s.next}); err != nil {
		return err
	}
	r.report.Segment, r.report.Reason, r.report.DroppedRecords = s.path, reason, lost
	return nil
}

// rewalkLocked walks segment i, trusted by its seal marker, after all: the
// marker disagreed with the next segment's base. A bad frame there is
// corruption (handled like any bad frame below the active segment).
func (r *recovery) rewalkLocked(i int) error {
	s := r.segs.at(i)
	s.size, s.next, s.lazy, s.index, s.indexedAt = 0, s.base, nil, nil, -1
	why, buf, err := s.walk(r.segs.walkBuf, r.cfg.indexInterval)
	r.segs.walkBuf = buf
	if err != nil {
		return err
	}
	if !why.intact() {
		return r.corruptLocked(i, s.size, why.String())
	}
	return nil
}

// cutTailLocked truncates the active segment's file to its intact frames,
// recording what was cut, and forces the cut to disk before any append can
// reuse the space.
func (r *recovery) cutTailLocked() error {
	s := r.segs.active()
	fi, err := s.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() <= s.size {
		return nil
	}
	if r.report.Segment == s.path {
		// Zeros at the end of the file are not cut data: in a ModeMmap
		// segment they are the reserved space past the frames (at most one
		// reservation step, see firstReserveBytes). Count to the last
		// non-zero byte, rounded up to the 8-byte frame alignment.
		nz, err := lastNonZero(s.f, s.size, fi.Size())
		if err != nil {
			return fmt.Errorf("log: read torn tail of %s: %w", s.path, err)
		}
		r.report.TruncatedBytes = min(int64(padded(int(nz-s.size))), fi.Size()-s.size)
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("log: truncate torn tail of %s at byte %d: %w", s.path, s.size, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("log: fsync %s: %w", s.path, err)
	}
	return nil
}

// lastNonZero returns the position just past the last non-zero byte of f
// in [from, to), or from when all are zero. Regions the file system
// reports as holes (SEEK_HOLE: after a crash, the unwritten blocks a
// ModeMmap segment reserved) are skipped unread; the rest is read
// backwards in 64 KiB pieces, so the cost follows the torn bytes and the
// zeros written ahead of the frames (zeroAheadBytes), not the reservation.
func lastNonZero(f *os.File, from, to int64) (int64, error) {
	to = min(to, dataEnd(f, from, to))
	if to <= from {
		return from, nil
	}
	buf := make([]byte, min(to-from, 64<<10))
	for to > from {
		n := min(int64(len(buf)), to-from)
		b := buf[:n]
		if _, err := f.ReadAt(b, to-n); err != nil {
			return 0, err
		}
		for j := len(b) - 1; j >= 0; j-- {
			if b[j] != 0 {
				return to - n + int64(j) + 1, nil
			}
		}
		to -= n
	}
	return from, nil
}

// dataEnd returns the end of the last region of f in [from, to) that the
// file system reports as data (SEEK_DATA, SEEK_HOLE), from when there is
// none, or to where the file system cannot tell.
func dataEnd(f *os.File, from, to int64) int64 {
	fd, end := int(f.Fd()), from
	for pos := from; pos < to; {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return end // only a hole from pos on
		}
		if err != nil {
			return to
		}
		if d >= to {
			return end
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil || h <= d {
			return to
		}
		end, pos = min(h, to), h
	}
	return end
}

// readOnlyRecheck is how long a read-only open waits before it looks again
// at a stop that has intact frames behind it: a pread racing the writer's
// pwrite of a group can copy an earlier page before the writer filled it
// and a later one after, and a pread racing a ModeMmap group write can read
// one frame's length before the writer stored it and the lengths of later
// frames of the group after (the writer publishes them in order, but the
// reader's copy runs alongside); a writer finishes a group write in
// microseconds.
const readOnlyRecheck = 20 * time.Millisecond

// readOnlyRecheckHook, set only by tests (export_test.go), runs in
// checkReadOnlyTailLocked after the wait, before the stop is read again,
// and in recheckRead after the wait, before the epochs are looked at
// again: tests finish a write or a Truncate "in flight" there.
var readOnlyRecheckHook atomic.Pointer[func()]

// checkReadOnlyTailLocked is the read-only arm for the last segment s whose
// walk stopped for why. Whatever the stop (a zero length, a length past the
// end of the file, a CRC mismatch, a body that does not decode), an intact
// frame of the expected offset or a later one behind it (findFrameAfter, as
// recovery and Verify scan) is damage, a *CorruptError, when it is still so
// readOnlyRecheck later: the walk, read again from the stop, does not move,
// and the writer began no epoch meanwhile (a Truncate rewrites the tail
// after it records its epoch, and the next refresh starts over). Anything
// else is the end as far as this reader can tell: a clean end of file, the
// zero tail of a reserved segment, a torn tail or an append in flight with
// nothing intact behind it, which refreshLocked retries.
func (r *recovery) checkReadOnlyTailLocked(s *segment, why stopReason) error {
	if why == stopEOF {
		return nil
	}
	if _, _, found, err := s.findFrameAfter(s.size, s.next); err != nil || !found {
		return nil
	}
	epoch, pos := r.epoch, s.size
	time.Sleep(readOnlyRecheck)
	if h := readOnlyRecheckHook.Load(); h != nil {
		(*h)()
	}
	why, buf, err := s.walk(r.segs.walkBuf, r.cfg.indexInterval)
	r.segs.walkBuf = buf
	if err != nil {
		return err
	}
	if why == stopEOF || s.size != pos {
		return nil // it was a write in flight: the frame verifies now
	}
	if e, err := readEpochs(r.dir); err != nil || e.latest() != epoch {
		return nil // the writer truncated or reopened meanwhile: refreshLocked starts over
	}
	at, off, found, err := s.findFrameAfter(s.size, s.next)
	if err != nil || !found {
		return nil
	}
	return &CorruptError{Topic: r.topic, Partition: r.id, Segment: s.path, Position: s.size, Offset: s.next,
		Reason: fmt.Sprintf("%s, followed by an intact frame of offset %d at byte %d", why, off, at)}
}

// checkReadOnlyPointLocked is the read-only arm of the recovery point rule
// (the writer's is in recoverTailLocked): an end of the partition below the
// recovery point, r.rp, is corruption, reported with the same
// *CorruptError a writer's open returns. s is the last segment, whose walk
// stopped for why (nil when the partition has no segment).
//
// The point was read before the segments were listed, and a writer raises
// it only past frames already in the files, so every frame below it must be
// found by the walk, with a writer running in another process too; the two
// ways frames below it leave legitimately, Truncate and repair, lower the
// point before they cut. So an end below it is judged after two looks: the
// listing again (a segment the first one missed, or one created since, is
// errStaleListing: list and walk again) and the point file again (lower
// now: the writer cut there, not damage).
func (r *recovery) checkReadOnlyPointLocked(s *segment, why stopReason) error {
	rp := *r.rp
	var base, pos, end int64
	path := r.segs.path(rp.Segment)
	if s != nil {
		base, pos, end, path = s.base, s.size, s.next, s.path
	}
	if rp.Offset <= end {
		return nil
	}
	bases, err := listSegments(r.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("log: topic %s partition %d: %w", r.topic, r.id, err)
	}
	if n := len(bases); n > 0 && (s == nil || bases[n-1] > base) {
		return fmt.Errorf("log: topic %s partition %d: %w: %s", r.topic, r.id, errStaleListing, r.segs.path(bases[n-1]))
	}
	if now, err := loadRecoveryPoint(r.dir); err != nil || now.Offset < rp.Offset {
		return nil // lowered since: a Truncate or a repair cut there
	}
	reason := belowRecoveryPoint(rp)
	if s == nil {
		reason = fmt.Sprintf("no segment, but the recovery point says offsets below %d are on disk", rp.Offset)
	} else {
		reason = why.String() + "; " + reason
	}
	return &CorruptError{Topic: r.topic, Partition: r.id, Segment: path, Position: pos, Offset: end, Reason: reason}
}
