package log

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// maxGatherDelay bounds how long a sync round waits for appenders to join
// it (gatherLocked): 0.5 ms. Gathering 64 appenders took about 30 µs (3
// yields) on the 2-core CI machine; the bound matters only while records
// keep arriving (AckWritten appenders writing meanwhile), and keeps the
// latency it adds below one sync of that disk (0.2 to 0.6 ms).
const maxGatherDelay = 500 * time.Microsecond

// syncRound is one group sync. Its leader gathers appenders, writes what is
// pending, syncs and closes done; every appender whose frames were written
// before the sync began is covered. Waiters block on done without holding
// the writer's mutex, so a round that covers 64 appenders releases them in
// one step rather than handing the mutex down a queue of 64.
type syncRound struct {
	done    chan struct{}
	err     error // set before done is closed
	members int   // the leader and the appenders that waited on done
}

// awaitSynced returns once a sync covering every frame below end has
// completed, leading a round when none is running, or with the error of
// the write or sync that failed. Called with w.mu held; it returns with
// w.mu released.
func (w *groupWriter) awaitSynced(end int64) error {
	for {
		if w.syncedTo >= end {
			w.mu.Unlock()
			return nil
		}
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return err
		}
		if end > w.assigned {
			err := w.truncatedLocked(end)
			w.mu.Unlock()
			return err
		}
		if w.round == nil {
			w.syncLocked()
			continue
		}
		r := w.round
		r.members++
		w.mu.Unlock()
		<-r.done
		if r.err != nil {
			return r.err
		}
		if w.syncedFast.Load() >= end {
			return nil
		}
		w.mu.Lock() // the round began before these frames were accepted
	}
}

// syncLocked leads one sync round: it gathers the appenders about to
// append, writes everything accepted (one write), syncs once, releases
// every appender the sync covers and then, when due, saves the recovery
// point. Called with w.mu held and no round running; it releases w.mu while
// it waits, writes, syncs and saves.
//
// Frames of AckSynced appenders are written here, right before the sync,
// not by each appender as it arrives: on this project's ext4 disk pwrites
// into a file during its fdatasync made that sync take 0.7 to 0.9 ms
// instead of 0.3 to 0.4 ms (BenchmarkSyncedAppend, 64 appenders, ModeFile,
// 2026-11-30), and one write per group is one syscall instead of one per
// appender.
func (w *groupWriter) syncLocked() {
	r := &syncRound{done: make(chan struct{}), members: 1}
	w.round = r
	w.gatherLocked()
	err := w.awaitWrittenLocked(w.assigned, true)
	for err == nil && w.writing || w.err == nil && errors.Is(err, ErrTruncated) {
		// Someone holds the writer role: a writer, whose frames this round
		// takes along, or a Truncate, whose cut must not be read half made.
		// A Truncate that cut below the end the round waited for is no
		// failure of the partition: the round syncs what is left, and the
		// appenders whose records were cut get ErrTruncated from
		// awaitSynced (TestGroupWriterSyncRoundOutlivesATruncateBelowItsEnd:
		// ErrTruncated used to become the partition's sticky error).
		if err == nil {
			w.maxWaitEnd = max(w.maxWaitEnd, w.assigned)
			w.wrote.Wait()
		}
		err = w.awaitWrittenLocked(w.assigned, true)
	}
	at, lowered := w.writtenAt, w.rp.lowerings()
	if err == nil {
		w.mu.Unlock()
		start := time.Now()
		err = w.syncActive()
		took := time.Since(start)
		w.syncNanos.Add(int64(took))
		w.mu.Lock()
		w.lastSync = took
	}
	w.round = nil
	w.lastMembers = r.members
	switch {
	case err != nil:
		r.err = err
		w.failLocked(err)
	case w.rp.lowerings() != lowered:
		// A Truncate cut the log while this round synced: the frames it
		// covered may be gone, and offsets above the cut will be reused.
	case at.Offset > w.syncedTo:
		w.setSyncedLocked(at)
	}
	close(r.done)
	if err == nil {
		w.mu.Unlock()
		w.rp.notePoint(at, lowered, false) // a failed save is kept for Close; the records are synced
		w.mu.Lock()
	}
}

// gatherLocked delays a sync while records keep arriving, so that it covers
// the appenders about to append (typically those the previous round just
// released, coming back with their next record) instead of leaving them to
// the next round: it yields the processor, and yields again while the
// yield let new records in, for at most half the previous sync's duration
// and never more than maxGatherDelay.
// Without it, concurrent AckSynced appenders split into two cohorts that
// alternate, each waiting for two syncs. When the last round released no
// one but its leader, there is nobody to wait for and it returns at once: a
// lone appender paid 10 to 20 µs for a yield that found nothing to run
// (the runtime wakes another processor for the yielding goroutine),
// 4 to 8% of its sync (BenchmarkSyncedAppend, 1 appender, 2026-11-30).
// Called with w.mu held; it releases it while yielding.
func (w *groupWriter) gatherLocked() {
	if w.lastMembers <= 1 {
		return // the last round released no one else: nobody to wait for
	}
	start := time.Now()
	for {
		n := w.assigned
		w.mu.Unlock()
		runtime.Gosched()
		w.mu.Lock()
		if w.assigned == n || time.Since(start) >= min(w.lastSync/2, maxGatherDelay) {
			return
		}
	}
}

// lockSegment keeps syncs out while the partition changes its segments in
// a way that releases the write path syncs use (roll, Truncate, Close):
// syncActive holds segMu while it syncs. Taken after Partition.mu, before
// mu; unlockSegment lets syncs in again.
func (w *groupWriter) lockSegment() { w.segMu.Lock() }

// unlockSegment ends lockSegment.
func (w *groupWriter) unlockSegment() { w.segMu.Unlock() }

// setSegmentLocked makes s the active segment as syncs see it (nil: none,
// after Close). Called between lockSegment and unlockSegment.
func (w *groupWriter) setSegmentLocked(s *segment) { w.seg = s }

// syncActive forces the active segment to stable storage, after waiting
// for the sealers of the segments before it (see sealJob), so a completed
// sync covers every written frame.
func (w *groupWriter) syncActive() error {
	w.segMu.Lock()
	defer w.segMu.Unlock()
	if err := w.awaitSealers(); err != nil {
		return err
	}
	s := w.seg
	if s == nil || s.w == nil {
		return nil
	}
	w.syncCalls.Add(1)
	start := w.syncStart()
	err := s.w.sync()
	w.syncEnd(start)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: sync %s: %w", w.topic, w.id, s.path, err)
	}
	return nil
}

// Sync forces every record accepted so far to stable storage (fdatasync
// for ModeFile, msync for ModeMmap), writing pending AckNone records
// first; it joins a sync round already gathering, as AckSynced appends do,
// and does nothing when everything is synced. Errors: ErrReadOnly,
// ErrClosed, the partition's write or sync failure, and ErrTruncated when
// a Truncate running at the same time cut records Sync was waiting for:
// they are gone; call Sync again for the records below the cut.
func (p *Partition) Sync() error {
	if p.ro.Load() {
		if p.lockWriter != nil {
			return nil // a read-write log's partition this process has not written: nothing of its to sync
		}
		return fmt.Errorf("%w: sync topic %s partition %d", ErrReadOnly, p.topic, p.id)
	}
	return p.w.sync()
}

// sync is Partition.Sync on a partition this process writes: it returns
// once every record accepted so far is on stable storage.
func (w *groupWriter) sync() error {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return err
	}
	return w.awaitSynced(w.assigned)
}

// close ends the write side for Close: new appends fail with ErrClosed,
// the flusher stops, accepted frames are written, everything is synced and
// the recovery point saved. It returns the partition's sticky error, if
// any, or the first failed save of the recovery point. The partition calls
// it only when it is not read-only.
func (w *groupWriter) close() error {
	if w.wrote.L == nil {
		return nil // never started: failed to open
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	if w.stop != nil {
		close(w.stop)
		w.mu.Unlock()
		<-w.done
		w.mu.Lock()
	}
	// Closed, nothing new is accepted: write what was (a failure drops it),
	// then sync it all.
	for w.writing || w.err == nil && len(w.pend) > 0 {
		if !w.writing {
			w.leadLocked(w.assigned, false)
			continue
		}
		w.maxWaitEnd = max(w.maxWaitEnd, w.assigned)
		w.wrote.Wait()
	}
	if w.err == nil {
		_ = w.awaitSynced(w.written) // the error is w.err, read below
		w.mu.Lock()
	}
	for w.round != nil {
		r := w.round
		w.mu.Unlock()
		<-r.done
		w.mu.Lock()
	}
	w.mu.Unlock()
	w.sealers.Wait() // their last steps take mu and save the recovery point
	w.mu.Lock()
	err, at, lowered := w.err, w.syncedAt, w.rp.lowerings()
	w.mu.Unlock()
	if err != nil {
		return err
	}
	if err := w.rp.notePoint(at, lowered, true); err != nil {
		return err
	}
	return w.rp.saveErr()
}

// flushLoop is the flusher of WithFlushPolicy's interval: woken when
// written records become unsynced, it syncs them interval later, and again
// every interval while unsynced records remain. It sleeps otherwise.
func (w *groupWriter) flushLoop() {
	defer close(w.done)
	timer := time.NewTimer(w.cfg.flushInterval)
	timer.Stop()
	for {
		select {
		case <-w.kick:
		case <-w.stop:
			return
		}
		for dirty := true; dirty; {
			timer.Reset(w.cfg.flushInterval)
			select {
			case <-timer.C:
			case <-w.stop:
				timer.Stop()
				return
			}
			dirty = w.flushOnce()
		}
	}
}

// flushOnce writes and syncs everything accepted, unless the partition is
// clean, closed or failed. It reports whether unsynced records remain
// (arrived meanwhile).
func (w *groupWriter) flushOnce() bool {
	w.mu.Lock()
	if w.closed || w.err != nil || w.written <= w.syncedTo && len(w.pend) == 0 {
		w.kicked = false
		w.mu.Unlock()
		return false
	}
	err := w.awaitSynced(w.assigned)
	w.mu.Lock()
	dirty := err == nil && !w.closed && (w.written > w.syncedTo || len(w.pend) > 0)
	if !dirty {
		w.kicked = false
	}
	w.mu.Unlock()
	return dirty
}
