package log

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// groupWriter is the write side of a partition: group commit by a single
// writer, without a goroutine of its own.
//
// Appenders encode their records into pend under mu, each taking the next
// offsets, so the order of pend is the order of offsets. An appender that
// needs its frames written (AckWritten) and finds no writer takes the
// writer role and stores everything pending with one write (one pwrite, or
// one copy into the mapping), rolling segments as they fill, then wakes the
// appenders whose frames it wrote. Appenders that arrive meanwhile wait in
// wrote; the next write takes all of them. An uncontended appender takes
// the role at once and writes its own frames: no queue, no hand-off to
// another goroutine.
//
// A writer whose own frames are written hands the role on when another
// appender waits for frames still pending (it is woken by the same
// broadcast); when only AckNone frames are left it keeps writing, at most
// maxExtraRounds more writes, and then leaves them to a goroutine started
// for the purpose (a contended case only).
//
// Syncs are grouped in rounds (syncer.go): an AckSynced appender that finds
// no round running leads one, which gathers the appenders about to append,
// writes everything pending, syncs once and releases every appender it
// covers at once.
//
// The writer holds no *Partition: it is given what it needs at start
// (writerSetup) and reaches the segments only through its frameStore,
// which the partition implements.
//
// Lock order: Partition.mu, then segMu, then mu. mu is never held during
// I/O, and nothing takes Partition.mu or segMu while holding mu. The writer
// takes the recovery points' lock (notePoint) holding none of its own.
type groupWriter struct {
	writerSetup

	mu    sync.Mutex
	wrote sync.Cond // broadcast after every write and when the writer role is released

	pend     []byte // encoded frames of offsets [written, assigned), not yet written
	spare    []byte // the buffer of the previous write, reused for pend
	pendRecs int    // frames in pend

	assigned   int64 // the offset the next accepted record gets
	written    int64 // frames below this offset are written
	writtenAt  point // where the written frames end
	writing    bool  // someone holds the writer role
	maxWaitEnd int64 // the highest end an appender waits in wrote for
	noneEnd    int64 // the end of the last AckNone append that did not wait

	syncedTo    int64         // frames below this offset are on stable storage
	syncedAt    point         // where the synced frames end
	syncedFast  atomic.Int64  // syncedTo, for waiters that do not hold mu
	round       *syncRound    // the sync round running, nil when none is
	lastSync    time.Duration // how long the last sync took; bounds gatherLocked
	lastMembers int           // how many appenders the last round released

	closed bool
	err    error // sticky: the first failed write or sync

	// sealing is the newest roll's sealer job, nil once it finished (see
	// sealJob); sealers counts the sealer goroutines running, which Close
	// waits for.
	sealing atomic.Pointer[sealJob]
	sealers sync.WaitGroup

	// segMu orders syncs against the segment changes that release a write
	// path (roll, Truncate, Close): seg is the active segment as a sync
	// sees it, and its write path stays valid while segMu is held.
	segMu sync.Mutex
	seg   *segment

	// The flusher (WithFlushPolicy with an interval): kick wakes it when
	// written frames become unsynced; stop ends it and it closes done.
	kick   chan struct{}
	kicked bool
	stop   chan struct{}
	done   chan struct{}

	writeStats // what the writer counts and times (telemetry.go)
}

// writerSetup is what a partition gives its groupWriter at start.
type writerSetup struct {
	topic string // for error messages
	id    int32
	cfg   *config
	dir   string // the partition folder (a sealer syncs it)
	store frameStore
	rp    *recoveryPoints
	// epoch returns the epoch an appender stamps on its frames, read under
	// mu right after the partition was found usable.
	epoch     func() int32
	telRecord []metric.RecordOption // the attributes of the sync duration (writeStats)
}

// frameStore is what the group writer needs of the partition's segments.
type frameStore interface {
	// writeFrames stores n encoded frames at the end of the log, rolling
	// as segments fill, and publishes them; it returns how many frames it
	// wrote and where the log now ends. forSync prepares the active segment
	// for the sync that follows (segmentWriter.prepare). It takes the
	// partition's lock: the writer calls it without mu.
	writeFrames(frames []byte, n int, forSync bool) (wrote int, at point, err error)
}

const (
	// maxPendingBytes bounds the frames AckNone appenders may leave
	// waiting for the writer: beyond 4 MiB an AckNone append waits until its
	// frames are written, like AckWritten, so a producer faster than the
	// disk is slowed down instead of filling memory.
	maxPendingBytes = 4 << 20
	// maxSpareBytes is the largest write buffer kept for reuse; a bigger one
	// (a burst of large records) is left to the garbage collector.
	maxSpareBytes = 8 << 20
	// maxExtraRounds is how many writes of other appenders' AckNone frames
	// a writer does after its own before it hands them to a goroutine.
	maxExtraRounds = 4
)

// start sets the writer up at the recovered end of the partition, s being
// its active segment (called once, by the writer's open of the partition),
// and starts the flusher when WithFlushPolicy gave an interval.
func (w *groupWriter) start(setup writerSetup, s *segment) {
	w.writerSetup = setup
	w.writeStats.tel, w.writeStats.record = setup.cfg.tel, setup.telRecord
	w.wrote.L = &w.mu
	end := point{Segment: s.base, Position: s.size, Offset: s.next}
	w.assigned, w.written, w.writtenAt = end.Offset, end.Offset, end
	w.seg = s
	// Records recovered from the previous run may still sit in the page
	// cache only; those below the recovery point are known synced. The first
	// sync covers the rest.
	synced := w.rp.begin()
	if synced.Offset >= end.Offset {
		synced = end
	}
	w.setSyncedLocked(synced)
	if w.cfg.flushInterval > 0 {
		w.kick, w.stop, w.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go w.flushLoop()
	}
}

// AppendAck appends recs as consecutive offsets and returns the first one,
// once ack says so (see Ack; the zero Ack is the log's default, WithAck):
//
//   - AckNone: the records are accepted and have their offsets; they are
//     written by whichever appender holds the partition's writer role, the
//     caller itself when none does.
//   - AckWritten: their frames are in the page cache.
//   - AckSynced: a sync that covers them has completed. Concurrent
//     AckSynced appenders share syncs: one write and one sync per group.
//
// Concurrent appenders are written together, in the order their calls were
// accepted, so one call's records are contiguous. The records and the
// slices they point to are not used after AppendAck returns, whatever the
// ack.
//
// ctx is checked before the records are accepted; once accepted they are
// written whatever ctx does, and the call waits for its ack. A record whose
// frame is larger than a segment fails the whole call with a
// *RecordTooLargeError before anything is accepted, and so does a record
// whose Timestamp is more than WithMaxTimestampAhead (one hour by default)
// ahead of the writer's clock, with a *TimestampAheadError. A zero
// Timestamp is set to the writer's clock in milliseconds; in a topic of
// LogAppendTime (WithTimestampType) every record's is. An empty recs
// returns the offset the next record will get.
//
// A failed write or sync fails the partition: that call, every appender
// waiting with it, and every later append, Sync, Truncate and Close return
// the error (a sync error may mean the kernel dropped the dirty pages, so a
// retry could not be trusted); reopening the log recovers. A log reopened
// on a full disk records its new epoch at the first append instead of at
// the open, and that append fails with ENOSPC, without failing the
// partition, until there is room (see the package doc, "Epochs"). The first append
// to a topic opened without its lock takes it (Topic.LockWriter). Errors:
// ErrReadOnly, ErrLocked (another process writes the topic), ErrRecordTooLarge,
// ErrTimestampAhead, ErrClosed, an invalid ack, ctx.Err(), I/O
// errors naming the segment.
func (p *Partition) AppendAck(ctx context.Context, ack Ack, recs ...Record) (int64, error) {
	if err := p.writable("append to"); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if ack = p.cfg.ackOrDefault(ack); !ack.valid() {
		return 0, fmt.Errorf("log: append to topic %s partition %d: invalid ack policy %d", p.topic, p.id, int(ack))
	}
	now, logAppend, frameBytes, err := checkRecords(p.cfg, p.topic, p.id, TimestampType(p.tsType.Load()),
		CleanupPolicy(p.policy.Load()).Compacts(), recs)
	if err != nil {
		return 0, err
	}
	if p.ep.unwritten() && len(recs) > 0 {
		// The epoch history the open could not record (epochCache.unwritten,
		// see epochCache.beginLocked) is written before a record of its
		// latest epoch is accepted. Its error (ENOSPC while the disk is full)
		// does not fail the partition: no record was accepted.
		p.mu.Lock()
		err := ErrClosed
		if !p.closed.Load() {
			err = p.ep.writeUnwrittenLocked()
		}
		p.mu.Unlock()
		if err != nil {
			return 0, err
		}
	}
	return p.w.append(ack, recs, now, logAppend, frameBytes)
}

// append accepts recs (checked by Partition.AppendAck: frameBytes is the
// size of their frames, now the timestamp of those without one, or of all
// of them when logAppend) as the next offsets and returns the first one,
// once ack says so (see Partition.AppendAck).
func (w *groupWriter) append(ack Ack, recs []Record, now int64, logAppend bool, frameBytes int) (int64, error) {
	w.mu.Lock()
	if err := w.usableLocked(); err != nil {
		w.mu.Unlock()
		return 0, err
	}
	first := w.assigned
	if len(recs) == 0 {
		w.mu.Unlock()
		return first, nil
	}
	epoch := w.epoch()
	w.pend = slices.Grow(w.pend, frameBytes)
	for i := range recs {
		r := &recs[i]
		if r.Timestamp == 0 || logAppend {
			rr := *r
			rr.Timestamp = now
			r = &rr
		}
		w.pend = appendFrame(w.pend, r, w.assigned, epoch)
		w.assigned++
	}
	w.pendRecs += len(recs)
	end := w.assigned
	switch {
	case ack == AckSynced:
		return first, w.awaitSynced(end) // the round's leader writes the frames
	case ack == AckNone && w.writing && len(w.pend) <= maxPendingBytes:
		w.noneEnd = end // the writer writes it, or leaves it to drainPending
		w.mu.Unlock()
		return first, nil
	}
	err := w.awaitWrittenLocked(end, w.cfg.flushRecords > 0 || w.cfg.flushInterval > 0)
	if err == nil && w.cfg.flushRecords > 0 && w.round == nil &&
		w.written-w.syncedTo >= int64(w.cfg.flushRecords) {
		return first, w.awaitSynced(w.written)
	}
	w.mu.Unlock()
	return first, err
}

// truncatedLocked is the error of an append whose records, below end,
// a Truncate removed before they were written or synced.
func (w *groupWriter) truncatedLocked(end int64) error {
	return fmt.Errorf("%w: topic %s partition %d: the log was truncated to offset %d, below the append's end %d",
		ErrTruncated, w.topic, w.id, w.assigned, end)
}

// usableLocked returns the error an operation on a closed or failed
// partition gets.
func (w *groupWriter) usableLocked() error {
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return fmt.Errorf("log: topic %s partition %d: an earlier write or sync failed, reopen to recover: %w", w.topic, w.id, w.err)
	}
	return nil
}

// awaitWrittenLocked returns once every frame below end is written, taking
// the writer role when no one holds it, or with the error of the write that
// failed; forSync says a sync will follow (see segmentWriter.prepare).
// Called with w.mu held; it may release it meanwhile.
func (w *groupWriter) awaitWrittenLocked(end int64, forSync bool) error {
	for w.written < end {
		if w.err != nil {
			return w.err
		}
		if end > w.assigned {
			return w.truncatedLocked(end)
		}
		if !w.writing {
			w.leadLocked(end, forSync)
			continue
		}
		w.maxWaitEnd = max(w.maxWaitEnd, end)
		w.wrote.Wait()
	}
	return nil
}

// leadLocked holds the writer role: it writes everything pending, group by
// group, until the frames below end are written and either nothing is
// pending or another appender waits to take over; forSync says a sync
// follows. Called with w.mu held and the role free; it releases w.mu during
// each write.
func (w *groupWriter) leadLocked(end int64, forSync bool) {
	w.writing = true
	extra := 0
	for len(w.pend) > 0 {
		if w.written >= end {
			if w.maxWaitEnd > w.written || extra == maxExtraRounds {
				break // a waiter takes over, or a goroutine below does
			}
			extra++
		}
		frames, n := w.pend, w.pendRecs
		w.pend, w.pendRecs = w.spare[:0], 0
		w.spare = nil
		w.mu.Unlock()
		w.writeCalls.Add(1)
		wrote, at, err := w.store.writeFrames(frames, n, forSync)
		w.mu.Lock()
		if cap(frames) <= maxSpareBytes {
			w.spare = frames[:0]
		}
		w.written += int64(wrote)
		w.writtenAt = at
		if err != nil {
			w.failLocked(err)
			break
		}
		if w.kick != nil && !w.kicked && w.written > w.syncedTo {
			w.kicked = true
			select {
			case w.kick <- struct{}{}:
			default:
			}
		}
		w.wrote.Broadcast()
	}
	w.writing = false
	w.wrote.Broadcast()
	if w.noneEnd > w.written && w.maxWaitEnd <= w.written {
		go w.drainPending() // AckNone frames are left and no one waits to write them
	}
}

// drainPending writes frames left pending with nobody waiting for them.
func (w *groupWriter) drainPending() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.writing && w.noneEnd > w.written && w.err == nil {
		w.leadLocked(w.noneEnd, false)
	}
}

// failLocked makes err the partition's sticky error: frames still pending
// are dropped (their offsets follow frames that were not written), and every
// waiter is woken to return it.
func (w *groupWriter) failLocked(err error) {
	if w.err == nil {
		w.err = err
	}
	w.pend, w.pendRecs = w.pend[:0], 0
	w.assigned = w.written
	w.wrote.Broadcast()
}

// setSyncedLocked records that the frames below at are on stable storage.
func (w *groupWriter) setSyncedLocked(at point) {
	w.syncedTo, w.syncedAt = at.Offset, at
	w.syncedFast.Store(at.Offset)
}

// writeFrames stores n encoded frames at the end of the partition, rolling
// to a new segment when the next frame does not fit, and publishes the new
// high watermark. It returns how many frames it wrote and where the log now
// ends. forSync prepares the segment for the sync that follows
// (segmentWriter.prepare). It is the partition's side of the group writer
// (frameStore), called by the writer role without the writer's mutex.
func (p *Partition) writeFrames(frames []byte, n int, forSync bool) (wrote int, at point, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return 0, at, ErrClosed // not reached: Close waits for the writer role
	}
	defer p.publishLocked()
	return p.segs.writeFrames(frames, n, forSync, &p.w)
}

// framesThatFit returns how many of the encoded frames, and how many bytes
// of them, fit in room bytes.
func framesThatFit(frames []byte, room int64) (n int, size int) {
	for size < len(frames) {
		bodyLen, _ := frameHeader(frames[size:])
		fs := padded(frameHeaderBytes + int(bodyLen))
		if int64(size+fs) > room {
			break
		}
		size += fs
		n++
	}
	return n, size
}

// acquireWriter waits until every accepted frame is written and takes the
// writer role, so nothing is written until releaseWriter: Truncate holds
// it while it cuts.
func (w *groupWriter) acquireWriter() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for {
		if err := w.usableLocked(); err != nil {
			return err
		}
		if !w.writing {
			if len(w.pend) == 0 {
				w.writing = true
				return nil
			}
			w.leadLocked(w.assigned, false)
			continue
		}
		w.maxWaitEnd = max(w.maxWaitEnd, w.assigned)
		w.wrote.Wait()
	}
}

// releaseWriter gives the writer role back; when the log now ends
// elsewhere (Truncate), end says where.
//
// Appenders go on accepting records while the role is held: their frames
// wait in pend, numbered from the end the holder took the role at (written:
// nothing is written while it is held). When the log was cut below that end
// those numbers are wrong, and the frames are dropped: their appenders get
// ErrTruncated (end above assigned), as records of a Truncate's range do.
// Kept, they were written after the cut's next records at offsets that did
// not follow them, a log every reader then took for corruption
// (TestGroupWriterDropsFramesAcceptedWhileATruncateHeldTheWriterRole).
func (w *groupWriter) releaseWriter(end *point) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end != nil && end.Offset != w.written {
		w.pend, w.pendRecs = w.pend[:0], 0
		w.assigned, w.written, w.writtenAt = end.Offset, end.Offset, *end
		if w.syncedTo > end.Offset {
			w.setSyncedLocked(*end)
		}
		w.maxWaitEnd = min(w.maxWaitEnd, end.Offset)
		w.noneEnd = min(w.noneEnd, end.Offset)
	}
	w.writing = false
	w.wrote.Broadcast()
}

// Append appends recs as consecutive offsets and returns the first one,
// with the log's ack policy (WithAck; AckWritten by default: it returns once
// the frames are in the page cache, see Sync). It is AppendAck with the zero
// Ack, which documents the rest: grouping with concurrent appenders, record
// sizes, timestamps, errors.
func (p *Partition) Append(ctx context.Context, recs ...Record) (int64, error) {
	return p.AppendAck(ctx, 0, recs...)
}
