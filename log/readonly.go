package log

import (
	"os"
	"sort"
	"syscall"
	"time"
)

func (p *Partition) refresh() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed && p.readOnly() { // it may have become a writer since the caller looked
		p.refreshLocked()
	}
}

// refreshLocked walks frames appended since the last look by the process
// that writes this partition, and segments it created. A frame that does not
// verify yet (a ModeFile pwrite seen half done) ends the walk; the next
// refresh retries it.
//
// It resets (forgets every segment and walks them again) only when the
// epoch file shows an epoch that is new since the last load and begins below
// what this reader has walked (rewrittenLocked). The current epoch beginning
// below the end is the normal state (the writer opened there and appended),
// not a reason: resetting on it re-walked the whole active segment at every
// Read and made a replay through a read-only log 2.4 to 3.2 times slower
// than through the writer's (BenchmarkReplayReadOnly against
// BenchmarkReplayReadWrite, 2026-12, 2-core shared machine; since, the two
// are within noise of each other, 0.84 to 1.8 run by run, 1.08 on the mean).
//
// The epoch file is looked at with one stat per refresh and reread only
// when it was replaced. The stat stays on every refresh, not every poll
// interval: a Truncate followed by appends of frames of the same sizes
// would otherwise be walked for up to an interval as if it continued the
// old log, and the stat costs about a microsecond per Read, next to the
// milliseconds of a 1 MiB batch.
func (p *Partition) refreshLocked() {
	prev := p.ep.latestLocked()
	if err := p.ep.reloadLocked(); err == nil && p.segs.len() > 0 && p.ep.rewrittenLocked(prev, p.segs.active().next) {
		p.resetLocked()
	}
	if len(p.segs.walkBuf) == 0 || len(p.segs.walkBuf) == walkBufferBytes {
		// Small, and not recovery's 1 MiB: a follower reads this much per
		// look, and in a ModeMmap segment's reserved zeros that many bytes are
		// there to read (1 MiB measured 90 µs per look, 8 KiB 4 µs).
		p.segs.walkBuf = make([]byte, 8<<10)
	}
	p.noticeDeletedLocked(false)
	before := p.next.Load()
	for {
		var next int64
		if p.segs.len() > 0 {
			why, buf, err := p.segs.active().walk(p.segs.walkBuf, p.cfg.indexInterval)
			p.segs.walkBuf = buf
			if err != nil || !why.intact() {
				break
			}
			next = p.segs.active().next
			if next == p.segs.active().base {
				break // an empty segment has no successor yet; its own name is next
			}
		}
		s, err := openSegment(p.dir, next, os.O_RDONLY)
		if err != nil {
			break // no successor yet
		}
		p.segs.push(s)
	}
	if p.segs.len() > 0 && p.segs.active().next != before {
		p.publishLocked()
	}
}

// resetLocked drops a read-only partition's segments and walks them again
// from disk.
func (p *Partition) resetLocked() {
	p.segs.closeAll()
	// The recovery point before the listing, as at open; one that does not
	// parse now checks nothing (the open reported it).
	p.rp.loaded, _ = loadRecoveryPoint(p.dir)
	if bases, err := listSegments(p.dir); err == nil {
		if err := p.recoveryLocked().recoverReadOnlyLocked(bases); err != nil {
			p.segs.closeAll()
		}
	}
	p.publishLocked()
}

// deletionCheckInterval is how often a read-only partition looks whether the
// writing process deleted its leading segments (one fstat per known leading
// segment), besides every read that falls in its first segment and every
// StartOffset. A follower at the tail never reads the first segment; without
// this look it would keep the deleted files' descriptors, and their disk
// space, open for as long as it runs.
const deletionCheckInterval = time.Second

// noticeDeleted is noticeDeletedLocked(true) under the partition lock.
func (p *Partition) noticeDeleted() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.noticeDeletedLocked(true)
	}
}

// refreshForRead is refresh for a read at offset: when offset falls in the
// first segment (or below it) and that is not the last segment known, the
// one the writer appends to and so cannot have deleted unless it rolled past
// it, it also looks at once for deleted leading segments, so the read
// reports the writer's new log start offset. A follower at the tail pays no
// extra syscall per read; deletionCheckInterval bounds what it misses.
func (p *Partition) refreshForRead(offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || !p.readOnly() {
		return
	}
	p.noticeDeletedLocked(p.segs.len() > 1 && offset < p.segs.at(1).base)
	p.refreshLocked()
}

// noticeDeletedLocked drops, on a read-only partition, the leading segments
// whose files the writing process deleted (retention), closing their
// descriptors once no read holds them. Without force it looks at most every
// deletionCheckInterval. When every segment it knew is gone (the writer
// rolled past them and retention deleted them between two looks) it
// continues at the writer's oldest remaining segment.
func (p *Partition) noticeDeletedLocked(force bool) {
	if !p.readOnly() || p.segs.len() == 0 {
		return
	}
	now := time.Now()
	if !force && now.Sub(p.deletionsCheckedAt) < deletionCheckInterval {
		return
	}
	p.deletionsCheckedAt = now
	n := 0
	for n < p.segs.len() && p.segs.at(n).unlinked() {
		n++
	}
	if n == 0 {
		return
	}
	if n == p.segs.len() {
		if s := p.oldestAfter(p.segs.active().next); s != nil {
			p.segs.push(s)
		} else {
			n-- // nothing newer to go to yet: keep the last one
		}
	}
	for _, s := range p.segs.all()[:n] {
		s.close()
	}
	p.segs.dropFront(n)
	p.publishLocked()
}

// oldestAfter opens the oldest segment of the partition whose base offset is
// at least from, or returns nil.
func (p *Partition) oldestAfter(from int64) *segment {
	bases, _ := listSegments(p.dir)
	i := sort.Search(len(bases), func(i int) bool { return bases[i] >= from })
	for ; i < len(bases); i++ {
		if s, err := openSegment(p.dir, bases[i], os.O_RDONLY); err == nil {
			return s
		}
	}
	return nil
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
