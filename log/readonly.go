package log

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
	"time"
)

// refresher is a read-only partition's view of the writer in another
// process (or in this one, before this process writes the topic): it walks
// the frames and segments the writer appended since the last look, notices
// the leading segments the writer's retention deleted, and walks everything
// again when the writer rewrote what it had walked (a Truncate, a reopen
// after a loss). It works on the partition's segment set and epoch cache,
// under the partition lock (Partition.refresh), and makes what it found
// visible through its partition (refreshTarget).
type refresher struct {
	segs   *segmentSet
	ep     *epochCache
	rp     *point          // the recovery point the reset's recovery checks against (recoveryPoints.loaded)
	cuts   *atomic.Uint64  // the partition's truncation generation (Partition.cuts), moved by a reset
	report *RecoveryReport // the partition's (Partition.Recovery), which a read-only recovery leaves as it is
	cfg    *config
	dir    string
	topic  string // for errors
	id     int32
	target refreshTarget
	// run runs a look under the partition lock, unless the partition
	// closed or became a writer (Partition.refresh); recheckRead, which
	// sleeps between two looks, takes the lock through it.
	run func(look func(*refresher))
	// deletionsCheckedAt is when the refresher last looked for leading
	// segments the writer's retention deleted (noticeDeletedLocked).
	deletionsCheckedAt time.Time
	// cleanerSeen is the cleaner checkpoint file when last looked at
	// (reopenReplacedLocked), nil when there was none.
	cleanerSeen os.FileInfo
}

// refreshTarget is what the refresher needs of its partition, under the
// partition lock.
type refreshTarget interface {
	// publishLocked makes the segment set's end the high watermark and
	// wakes waiters.
	publishLocked()
}

// recoveryLocked returns a read-only recovery of the segment set, for the
// open of a read-only partition and for a reset: it changes no file and
// judges a stop that may be an append in flight (see recovery).
func (r *refresher) recoveryLocked() *recovery {
	return &recovery{segs: r.segs, cfg: r.cfg, dir: r.dir, topic: r.topic, id: r.id,
		rp: r.rp, epoch: r.ep.latestLocked(), report: r.report}
}

// refresh runs fn, one of the refresher's looks, under the partition lock,
// unless the partition is closed or is no longer read-only (it may have
// become a writer since the caller looked).
func (p *Partition) refresh(fn func(*refresher)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed.Load() && p.ro.Load() {
		fn(&p.rf)
	}
}

// recheckRead looks, after a read of a read-only partition failed with
// err, whether the writer truncated the frames the read had verified: its
// pread ran without the lock, after the walk that verified them, and the
// writer in another process cuts and appends new frames of other sizes at
// the same offsets without telling it (Truncate moves cuts only in its own
// process). A Truncate records its new epoch after it cuts, so the look is
// a refresh now (the epoch is there: the refresh resets, which moves cuts
// from gen and Partition.readInto reads again) and, when that finds no new
// epoch, one more readOnlyRecheck later (a Truncate seen between its cut
// and its epoch file). A *CorruptError is rechecked, and an
// *OffsetOutOfRangeError above the end (a reset walked a cut whose epoch was
// not written yet: the Reader steps back once it is loaded); when the
// writer began no epoch meanwhile, Partition.readInto returns the error:
// damage, or a position really beyond the end. It runs without the
// partition lock, which each look takes (run).
func (r *refresher) recheckRead(gen uint64, offset int64, err error) {
	var (
		ce *CorruptError
		oe *OffsetOutOfRangeError
	)
	// A read above the end: the writer's Truncate cut below it, and a
	// reset walked the cut before the Truncate recorded its epoch (it cuts
	// first); a Reader steps back once that epoch is loaded.
	ahead := errors.As(err, &oe) && oe.Offset > oe.NextOffset
	if !errors.As(err, &ce) && !ahead {
		return
	}
	look := func(rf *refresher) { rf.refreshForReadLocked(offset) }
	r.run(look)
	if r.cuts.Load() != gen {
		return
	}
	time.Sleep(readOnlyRecheck)
	if h := readOnlyRecheckHook.Load(); h != nil {
		(*h)()
	}
	r.run(look)
}

// refreshLocked walks frames appended since the last look by the process
// that writes this partition, and segments it created. A frame that does not
// verify yet (a ModeFile pwrite seen half done) ends the walk; the next
// refresh retries it.
//
// It resets (forgets every segment and walks them again) only when the
// epoch file shows an epoch that is new since the last load and begins below
// what this reader has walked (epochCache.rewrittenLocked). The current epoch
// beginning below the end is the normal state (the writer opened there and
// appended), not a reason: resetting on it re-walked the whole active segment
// at every Read and made a replay through a read-only log 2.4 to 3.2 times
// slower than through the writer's (BenchmarkReplayReadOnly against
// BenchmarkReplayReadWrite, 2026-12, 2-core shared machine; since, the two
// are within noise of each other, 0.84 to 1.8 run by run, 1.08 on the mean).
//
// The epoch file is looked at with one stat per refresh and reread only
// when it was replaced. The stat stays on every refresh, not every poll
// interval: a Truncate followed by appends of frames of the same sizes
// would otherwise be walked for up to an interval as if it continued the
// old log, and the stat costs about a microsecond per Read, next to the
// milliseconds of a 1 MiB batch.
func (r *refresher) refreshLocked() {
	prev := r.ep.latestLocked()
	if err := r.ep.reloadLocked(); err == nil && r.segs.len() > 0 && r.ep.rewrittenLocked(prev, r.segs.active().next) {
		r.resetLocked()
	}
	if len(r.segs.walkBuf) == 0 || len(r.segs.walkBuf) == walkBufferBytes {
		// Small, and not recovery's 1 MiB: a follower reads this much per
		// look, and in a ModeMmap segment's reserved zeros that many bytes are
		// there to read (1 MiB measured 90 µs per look, 8 KiB 4 µs).
		r.segs.walkBuf = make([]byte, 8<<10)
	}
	r.noticeDeletedLocked(false)
	_, before := r.segs.bounds() // the high watermark: every change of the set was published
	for {
		var next int64
		if r.segs.len() > 0 {
			why, buf, err := r.segs.active().walk(r.segs.walkBuf, r.cfg.indexInterval)
			r.segs.walkBuf = buf
			if err != nil || !why.intact() {
				break
			}
			next = r.segs.active().next
			if next == r.segs.active().base {
				break // an empty segment has no successor yet; its own name is next
			}
		}
		s, err := openSegment(r.dir, next, os.O_RDONLY)
		if err != nil {
			break // no successor yet
		}
		r.segs.push(s)
	}
	if r.segs.len() > 0 && r.segs.active().next != before {
		r.target.publishLocked()
	}
}

// resetLocked drops a read-only partition's segments and walks them again
// from disk.
func (r *refresher) resetLocked() {
	// Reads in flight without the lock read again (see readInto): the
	// writer rewrote what they may hold, as a Truncate of this process does.
	r.cuts.Add(1)
	r.segs.closeAll()
	// The recovery point before the listing, as at open; one that does not
	// parse now checks nothing (the open reported it).
	*r.rp, _ = loadRecoveryPoint(r.dir)
	if bases, err := listSegments(r.dir); err == nil {
		if err := r.recoveryLocked().recoverReadOnlyLocked(bases); err != nil {
			r.segs.closeAll()
		}
	}
	r.target.publishLocked()
}

// deletionCheckInterval is how often a read-only partition looks whether the
// writing process deleted its leading segments (one fstat per known leading
// segment), besides every read that falls in its first segment and every
// StartOffset. A follower at the tail never reads the first segment; without
// this look it would keep the deleted files' descriptors, and their disk
// space, open for as long as it runs.
const deletionCheckInterval = time.Second

// refreshForReadLocked is refreshLocked for a read at offset: when offset
// falls in the first segment (or below it) and that is not the last segment
// known, the one the writer appends to and so cannot have deleted unless it
// rolled past it, it also looks at once for deleted leading segments, so the
// read reports the writer's new log start offset. A follower at the tail
// pays no extra syscall per read; deletionCheckInterval bounds what it
// misses.
func (r *refresher) refreshForReadLocked(offset int64) {
	r.noticeDeletedLocked(r.segs.len() > 1 && offset < r.segs.at(1).base)
	r.refreshLocked()
}

// noticeDeletedLocked drops the leading segments whose files the writing
// process deleted (retention), closing their descriptors once no read holds
// them. Without force it looks at most every deletionCheckInterval. When
// every segment it knew is gone (the writer rolled past them and retention
// deleted them between two looks) it continues at the writer's oldest
// remaining segment.
func (r *refresher) noticeDeletedLocked(force bool) {
	if r.segs.len() == 0 {
		return
	}
	now := time.Now()
	if !force && now.Sub(r.deletionsCheckedAt) < deletionCheckInterval {
		return
	}
	r.deletionsCheckedAt = now
	r.reopenReplacedLocked()
	n := 0
	for n < r.segs.len() && r.segs.at(n).deleted() {
		n++
	}
	if n == 0 {
		return
	}
	if n == r.segs.len() {
		if s := r.oldestAfter(r.segs.active().next); s != nil {
			r.segs.push(s)
		} else {
			n-- // nothing newer to go to yet: keep the last one
		}
	}
	for _, s := range r.segs.all()[:n] {
		s.close()
	}
	r.segs.dropFront(n)
	r.target.publishLocked()
}

// reopenReplacedLocked reopens the sealed segments whose files the
// writer's cleaner replaced with compacted copies (cleaner.go): a file with
// no name left whose name now holds a compacted copy of the same offsets.
// The leading ones are looked at every time (a replaced segment must not
// pass for one deleted by retention, see segment.deleted); the others when
// the cleaner's checkpoint changed since the last look, which a pass writes
// at its end. Until it is reopened a replaced segment is read through its
// old file, which holds the same offsets and more records and stays whole
// (the cleaner renames a new file over the name and never changes the old
// one); reopening lets the old file's disk space go. A new file that is
// not such a copy (the writer deleted the segment in a Truncate and made
// another of the same base since) is left alone: the Truncate's epoch makes
// the next refresh walk everything again (refreshLocked), never before the
// epoch is there, so a Reader always finds the epoch to step back through.
func (r *refresher) reopenReplacedLocked() {
	all := false
	if fi, err := os.Stat(filepath.Join(r.dir, cleanerCheckpointFile)); err == nil {
		all = r.cleanerSeen == nil || !os.SameFile(fi, r.cleanerSeen) || !fi.ModTime().Equal(r.cleanerSeen.ModTime())
		r.cleanerSeen = fi
	}
	for i := 0; i < r.segs.len()-1; i++ {
		old := r.segs.at(i)
		if !old.unlinked() {
			if all {
				continue
			}
			return // the leading segments come first
		}
		if r.ep.fileChangedLocked() {
			return // a new epoch: refreshLocked decides, and walks everything again if it must
		}
		s, err := openSegment(r.dir, old.base, os.O_RDONLY)
		if err != nil {
			continue // deleted: noticeDeletedLocked drops it
		}
		why, buf, err := s.walk(r.segs.walkBuf, r.cfg.indexInterval)
		r.segs.walkBuf = buf
		if err != nil || why != stopEOF || !s.gaps || s.next != old.next {
			s.close()
			continue
		}
		r.segs.list[i] = s
		old.close() // the last read in it closes the descriptor
	}
}

// oldestAfter opens the oldest segment of the partition whose base offset is
// at least from, or returns nil.
func (r *refresher) oldestAfter(from int64) *segment {
	bases, _ := listSegments(r.dir)
	i := sort.Search(len(bases), func(i int) bool { return bases[i] >= from })
	for ; i < len(bases); i++ {
		if s, err := openSegment(r.dir, bases[i], os.O_RDONLY); err == nil {
			return s
		}
	}
	return nil
}

// deleted reports whether the segment's file has no name left and no file
// took its name: the writer deleted it (retention), rather than the cleaner
// replacing it with a compacted copy (reopenReplacedLocked), which can
// happen between any two looks.
func (s *segment) deleted() bool {
	if !s.unlinked() {
		return false
	}
	_, err := os.Lstat(s.path)
	return errors.Is(err, fs.ErrNotExist)
}

// unlinked reports whether the segment's file has no name left: another
// process deleted it. Errors read as "still there".
func (s *segment) unlinked() bool {
	fi, err := s.f.Stat()
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
