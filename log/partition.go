package log

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Partition is one ordered, append-only sequence of records, stored as
// contiguous segments. One writer appends (one process holds the topic's
// lock; in-process appends are serialised by a mutex); any number of readers
// read, also from other processes that opened the log read-only.
//
// Durability: Append returns when the log's ack policy says (WithAck;
// AckWritten by default: the frames are in the page cache, so they survive
// the death of the process but not of the machine); AppendAck chooses per
// call, AckSynced waiting for a sync shared with concurrent appenders; Sync
// forces everything to stable storage. A segment is forced to disk before
// the next one is created, so every sealed segment is durable. Concurrent
// appends are written together (see AppendAck).
type Partition struct {
	cfg   *config
	topic string
	id    int32
	dir   string

	// ro is true while the partition is read-only: always in a log opened
	// ReadOnly; in a read-write log until its topic's writer lock is taken
	// (Topic.LockWriter), when becomeWriter switches it, under mu, for good.
	// Every write checks it first (writable).
	ro atomic.Bool
	// lockWriter takes the topic's writer lock and makes every partition of
	// the topic a writer; writable calls it. nil in a ReadOnly log.
	lockWriter func() error
	// upgrading is true, under mu, while upgrade runs a writer's open of a
	// partition still read-only to every other path (ro stays true until
	// the writer is ready, so no append gets in before it).
	upgrading bool

	mu       sync.RWMutex
	segments []*segment
	walkBuf  []byte // walk buffer, reused by refreshes
	report   RecoveryReport
	closed   bool

	epochs    epochs       // the epoch history; the last entry is the current epoch
	epoch     atomic.Int32 // epochs.latest(), read by appenders without p.mu
	epochSeen os.FileInfo  // read-only: the epoch file when last read

	tsType atomic.Int32 // the topic's TimestampType, set by Topic.storeMeta (timestamp.go)

	next atomic.Int64 // high watermark, published after its bytes

	notifyMu sync.Mutex
	notify   chan struct{} // closed and replaced by the append after waitChan handed it out
	// notifyUsed says waitChan handed notify out since it was made.
	notifyUsed bool

	ret   retentionState // retention.go: enforcement, truncation count, deletion checks
	xproc crossProcess   // follow across processes (follow.go)
	w     groupWriter    // the write side: group commit, acks, flush policy (writer.go)
	rp    recoveryPoints // the recovery point file (recoverypoint.go)

	telAttrs  attribute.Set         // the attributes of its metrics (telemetry.go)
	telRecord []metric.RecordOption // telAttrs as the one option of a Record
}

// openPartition opens partition id of topic in dir: read-only (ro, see
// Partition.ro) or for writing, which recovers it (becomeWriterLocked).
func openPartition(cfg *config, topic string, id int32, dir string, ro bool) (*Partition, error) {
	p := &Partition{cfg: cfg, topic: topic, id: id, dir: dir, notify: make(chan struct{})}
	p.telAttrs = telPartitionAttrs(topic, id)
	p.telRecord = []metric.RecordOption{metric.WithAttributeSet(p.telAttrs)}
	p.ro.Store(ro)
	if !ro {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("log: topic %s partition %d: %w", topic, id, err)
		}
	}
	bases, err := listSegments(dir)
	if err != nil && !(ro && errors.Is(err, fs.ErrNotExist)) {
		return nil, fmt.Errorf("log: topic %s partition %d: %w", topic, id, err)
	}
	if !ro {
		if err := p.becomeWriterLocked(bases); err != nil {
			p.close()
			return nil, err
		}
		return p, nil
	}
	// The epochs before the walk: an epoch the writer begins after this
	// load is new to the first refresh, which then compares it with what
	// the walk saw (refreshLocked).
	if err := p.reloadEpochsLocked(); err != nil {
		return nil, err
	}
	err = p.recoverLocked(bases)
	if err != nil && errors.Is(err, fs.ErrNotExist) {
		err = p.recoverAfterDeletionLocked() // the writer's retention deleted a listed segment
	}
	if err != nil {
		p.close()
		return nil, err
	}
	p.publishLocked()
	return p, nil
}

// becomeWriterLocked runs a writer's open of the partition over the
// segments of bases: recovery point, recovery (torn tail cut, corruption
// checks, repair), a new epoch, the waiters file, the group writer. The
// partition holds no segment when it is called, and is not read-only.
func (p *Partition) becomeWriterLocked(bases []int64) error {
	var err error
	if p.rp.loaded, err = loadRecoveryPoint(p.dir); err != nil && !p.cfg.repair {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	if err := p.recoverLocked(bases); err != nil {
		return err
	}
	if len(p.segments) == 0 {
		if err := p.createSegmentLocked(0); err != nil {
			return err
		}
		if err := syncDir(p.dir); err != nil { // the first segment's name (a roll's sealer syncs the later ones)
			return err
		}
	} else {
		p.removeOrphanMarkersLocked()
		if err := p.cutTailLocked(); err != nil {
			return err
		}
		if err := p.activateLocked(p.active()); err != nil {
			return err
		}
	}
	if err := p.beginEpochLocked(); err != nil {
		return err
	}
	p.openWaitersLocked()
	p.publishLocked()
	p.startWriter()
	return nil
}

// upgrade switches a read-only partition of a read-write log to writer
// mode in place, once its topic's writer lock is held: under the partition
// lock it drops the segments it followed, stops following, and runs the
// open of a writer (becomeWriterLocked: recovery, torn-tail cut, new epoch)
// before any append. Readers keep their *Partition: reads in flight finish
// with the segments they hold (reference counted) and then read again (the
// truncation generation moves), Readers step back through the new epoch
// like after any reopen of the writer. On failure the partition goes back to
// following read-only, and the error is returned.
func (p *Partition) upgrade() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	if !p.ro.Load() {
		return nil
	}
	p.ret.cuts.Add(1) // reads in flight without the lock read again (see readInto)
	for _, s := range p.segments {
		s.close()
	}
	p.segments, p.report = nil, RecoveryReport{}
	p.stopFollowLocked()
	p.upgrading = true
	bases, err := listSegments(p.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	} else {
		err = nil
		if merr := os.Mkdir(p.dir, 0o755); merr != nil && !errors.Is(merr, fs.ErrExist) {
			err = fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, merr)
		}
	}
	if err == nil {
		err = p.becomeWriterLocked(bases)
	}
	p.upgrading = false
	if err == nil {
		p.ro.Store(false)
		return nil
	}
	for _, s := range p.segments {
		s.close()
	}
	p.segments = nil
	p.epochSeen = nil
	p.reloadEpochsLocked()
	p.resetLocked()
	return err
}

// writable returns nil when the partition may be written, taking its
// topic's writer lock first when it has not been taken (Topic.LockWriter),
// and an error wrapping ErrReadOnly in a log opened ReadOnly.
func (p *Partition) writable(op string) error {
	if !p.ro.Load() {
		return nil
	}
	if p.lockWriter == nil {
		return fmt.Errorf("%w: %s topic %s partition %d", ErrReadOnly, op, p.topic, p.id)
	}
	return p.lockWriter()
}

// readOnly reports whether the partition is read-only now (see ro).
func (p *Partition) readOnly() bool { return p.ro.Load() }

// ownsWrites reports whether the partition is, or is becoming under mu
// (upgrade), its topic's writer: recovery and the waiters file then take
// the writer's side.
func (p *Partition) ownsWrites() bool { return !p.ro.Load() || p.upgrading }

// beginEpochLocked starts a new epoch at the current end and records it
// durably before anything is appended in it. A writer does this at every
// open, not only when recovery cut a torn tail: records that were in the
// page cache but never reached the disk vanish in a machine crash without
// leaving a torn frame behind, and a consumer may have handled them. With a
// new epoch at every open, any offset reused after such a loss belongs to a
// later epoch than the one a consumer saved, and the consumer's resume sees
// it (KIP-320's divergence check).
func (p *Partition) beginEpochLocked() error {
	e, err := readEpochs(p.dir)
	if err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	e = e.begin(p.active().next)
	if err := e.write(p.dir); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	p.epochs = e
	p.epoch.Store(e.latest())
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
	if len(p.segments) == 0 || p.epochs.latest() <= prev {
		return false
	}
	i := sort.Search(len(p.epochs), func(i int) bool { return p.epochs[i].epoch > prev })
	return p.epochs[i].start < p.active().next
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
// epoch, or NextOffset when epoch is the current one, as Kafka's
// OffsetForLeaderEpoch answers. ok is false for an epoch older than the
// recorded history (nothing is known about it).
func (p *Partition) EndOffsetForEpoch(epoch int32) (end int64, ok bool) {
	next := p.NextOffset() // refreshes a read-only partition
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
// [StartOffset, NextOffset]: a position beyond the log end is never a
// silent jump.
func (p *Partition) ResumeOffset(offset int64, epoch int32) (int64, error) {
	if p.readOnly() {
		p.refresh() // ResumeOffset runs once per resume: look at the writer's latest epochs
	}
	offset = p.stepBack(offset, epoch)
	start, next := p.StartOffset(), p.NextOffset()
	if offset < start || offset > next {
		return offset, &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	return offset, nil
}

func (p *Partition) segPath(base int64) string { return filepath.Join(p.dir, segmentName(base)) }

func (p *Partition) active() *segment { return p.segments[len(p.segments)-1] }

// publishLocked makes the current end visible to readers and wakes them.
func (p *Partition) publishLocked() {
	n := int64(0)
	if len(p.segments) > 0 {
		n = p.active().next
	}
	p.next.Store(n)
	p.signalFollowersLocked()
	p.wakeWaiters()
}

// wakeWaiters closes the channel waitChan handed out, if it handed it out
// since the last wake-up, and makes a new one. Without a waiter it does
// nothing: a new channel per append was an allocation and 60 ns of a
// one-record append (BenchmarkSegmentAppend, mmap, 64 B, 2026-12-01).
func (p *Partition) wakeWaiters() {
	p.notifyMu.Lock()
	if p.notifyUsed {
		close(p.notify)
		p.notify, p.notifyUsed = make(chan struct{}), false
	}
	p.notifyMu.Unlock()
}

// activateLocked attaches the configured write path to s.
func (p *Partition) activateLocked(s *segment) error {
	capacity := max(p.cfg.segmentBytes, s.size)
	if p.cfg.mode == ModeMmap {
		w, err := newMmapWriter(s.f, capacity, s.size)
		if err != nil {
			return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
		}
		s.w = w
		return nil
	}
	s.w = newFileWriter(s.f, capacity)
	return nil
}

// Topic returns the name of the partition's topic.
func (p *Partition) Topic() string { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int32 { return p.id }

// Recovery reports what this process's open of the partition for writing
// cut from its end: a torn tail, or with WithRepair, corruption. A
// partition is opened for writing when CreateTopic creates it, and in a
// topic found on disk at its first write or Topic.LockWriter (see upgrade).
// Until then, and always in a log opened ReadOnly, Recovery returns the
// zero RecoveryReport: a read-only partition cuts nothing, and neither its
// refreshes nor its reloads (a reset after the writer rewrote the log, a
// reopen after retention deleted a segment) are reported here.
func (p *Partition) Recovery() RecoveryReport {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.report
}

// Append appends recs as consecutive offsets and returns the first one,
// with the log's ack policy (WithAck; AckWritten by default: it returns once
// the frames are in the page cache, see Sync). It is AppendAck with the zero
// Ack, which documents the rest: grouping with concurrent appenders, record
// sizes, timestamps, errors.
func (p *Partition) Append(ctx context.Context, recs ...Record) (int64, error) {
	return p.AppendAck(ctx, 0, recs...)
}

// writeLocked stores n encoded frames at the end of s and only then
// advances s.size, s.next and the index: nextOffset is published after its
// bytes (readers trust everything below it).
func (p *Partition) writeLocked(s *segment, frames []byte, n int) error {
	if err := s.w.write(frames, s.size); err != nil {
		return fmt.Errorf("log: topic %s partition %d: write %s at byte %d: %w", p.topic, p.id, s.path, s.size, err)
	}
	p.w.appended.Add(int64(n)) // for the metrics (telemetry.go): one add per write, not per record
	p.w.appendedBytes.Add(int64(len(frames)))
	for range n {
		bodyLen, _ := frameHeader(frames)
		fs := int64(padded(frameHeaderBytes + int(bodyLen)))
		s.maybeIndex(s.next, s.size, p.cfg.indexInterval)
		s.noteTimestamp(frameTimestamp(frames))
		s.size += fs
		s.next++
		frames = frames[fs:]
	}
	return nil
}

// StartOffset returns the log start offset: the lowest offset still
// stored. It rises when retention deletes segments; on a log opened
// read-only it first looks whether the writing process deleted any.
func (p *Partition) StartOffset() int64 {
	if p.readOnly() {
		p.noticeDeleted()
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if len(p.segments) == 0 {
		return 0
	}
	return p.segments[0].base
}

// NextOffset returns the high watermark: one past the last record
// appended. On a log opened read-only it first looks for records appended
// by the writing process.
func (p *Partition) NextOffset() int64 {
	if p.readOnly() {
		p.refresh()
	}
	return p.next.Load()
}

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
	prev := p.epochs.latest()
	if err := p.reloadEpochsLocked(); err == nil && p.rewrittenLocked(prev) {
		p.resetLocked()
	}
	if len(p.walkBuf) == 0 || len(p.walkBuf) == walkBufferBytes {
		// Small, and not recovery's 1 MiB: a follower reads this much per
		// look, and in a ModeMmap segment's reserved zeros that many bytes are
		// there to read (1 MiB measured 90 µs per look, 8 KiB 4 µs).
		p.walkBuf = make([]byte, 8<<10)
	}
	p.noticeDeletedLocked(false)
	before := p.next.Load()
	for {
		var next int64
		if len(p.segments) > 0 {
			why, buf, err := p.active().walk(p.walkBuf, p.cfg.indexInterval)
			p.walkBuf = buf
			if err != nil || !why.intact() {
				break
			}
			next = p.active().next
			if next == p.active().base {
				break // an empty segment has no successor yet; its own name is next
			}
		}
		s, err := openSegment(p.dir, next, os.O_RDONLY)
		if err != nil {
			break // no successor yet
		}
		p.segments = append(p.segments, s)
	}
	if len(p.segments) > 0 && p.active().next != before {
		p.publishLocked()
	}
}

// Read returns records from offset onwards: at least one when offset is
// below NextOffset (even if it alone exceeds maxBytes), and no more frames
// than maxBytes allows after the first (maxBytes <= 0 means 1 MiB). It
// returns nil, nil at NextOffset, and an *OffsetOutOfRangeError (matching
// ErrOffsetOutOfRange) below the log start offset or above NextOffset.
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
	if p.readOnly() {
		p.refreshForRead(offset)
	}
	n0 := len(dst)
	for {
		s, e, end, gen, err := p.acquireForRead(offset)
		if s == nil || err != nil {
			return dst, err
		}
		beforeSegmentRead(p, s.base, offset)
		dst, err = s.read(dst, e, offset, maxBytes, end, p.topic, p.id, rb)
		s.release()
		if p.ret.cuts.Load() == gen {
			return dst, err
		}
		// Truncate cut the log while this read ran without the lock; what
		// it read may be gone or rewritten. Read again.
		clear(dst[n0:])
		dst = dst[:n0]
	}
}

// acquireForRead finds the segment holding offset under the read lock, takes
// a reference on it and returns it with the index entry to start from, the
// end of its verified frames and the truncation generation. It returns a nil
// segment at the high watermark, and an *OffsetOutOfRangeError outside
// [StartOffset, NextOffset].
func (p *Partition) acquireForRead(offset int64) (*segment, indexEntry, int64, uint64, error) {
	for {
		s, e, size, gen, unbuilt, err := p.acquireBuiltForRead(offset)
		if unbuilt == nil {
			return s, e, size, gen, err
		}
		// A segment trusted by its seal marker builds its index on its
		// first read: a walk of the whole segment (about 20 ms for 64 MiB),
		// done holding only a reference, not the partition's lock, which
		// every append takes. Then look again: the segment may be gone.
		err = unbuilt.loadIndex(p.topic, p.id)
		_ = unbuilt.release()
		if err != nil {
			return nil, indexEntry{}, 0, 0, err
		}
	}
}

// acquireBuiltForRead is acquireForRead's look under the read lock. When
// the segment holding offset has its index still to build, it returns that
// segment instead (referenced, in unbuilt) for the caller to build it
// without the lock.
func (p *Partition) acquireBuiltForRead(offset int64) (s *segment, e indexEntry, size int64, gen uint64, unbuilt *segment, err error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return nil, indexEntry{}, 0, 0, nil, ErrClosed
	}
	start, next := int64(0), int64(0)
	if len(p.segments) > 0 {
		start, next = p.segments[0].base, p.active().next
	}
	if offset < start || offset > next {
		return nil, indexEntry{}, 0, 0, nil, &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	i := sort.Search(len(p.segments), func(i int) bool { return p.segments[i].base > offset }) - 1
	for ; offset < next && i < len(p.segments); i++ {
		s = p.segments[i]
		if offset >= s.next {
			continue // an empty segment (base == next)
		}
		s.acquire()
		if !s.indexBuilt() {
			return nil, indexEntry{}, 0, 0, s, nil
		}
		if err := s.loadIndex(p.topic, p.id); err != nil { // built, with the corruption it found
			_ = s.release()
			return nil, indexEntry{}, 0, 0, nil, err
		}
		return s, s.lookup(offset), s.size, p.ret.cuts.Load(), nil, nil
	}
	return nil, indexEntry{}, 0, 0, nil, nil
}

// Truncate removes every record at offset and above; the next append
// reuses offset. Records accepted by earlier appends are written first;
// appends of removed records still waiting for their sync fail with
// ErrTruncated. The recovery point is lowered to offset first, segments
// above it are deleted (directory fsynced) and the cut is forced to disk.
// Like every write it first takes the topic's writer lock
// (Topic.LockWriter). Errors: ErrReadOnly, ErrLocked, ErrClosed,
// ErrOffsetOutOfRange for an offset outside
// [StartOffset, NextOffset], the partition's write or sync failure.
func (p *Partition) Truncate(offset int64) error {
	if err := p.writable("truncate"); err != nil {
		return err
	}
	if err := p.acquireWriter(); err != nil {
		return err
	}
	// No roll starts while the writer role is held: wait for the sealers of
	// the earlier ones, which read the segments this may cut and write
	// their seal markers.
	if err := p.awaitSealers(); err != nil {
		p.releaseWriter(nil)
		return err
	}
	p.mu.Lock()
	defer func() {
		s := p.active()
		end := point{Segment: s.base, Position: s.size, Offset: s.next}
		p.mu.Unlock()
		p.releaseWriter(&end)
	}()
	if p.closed {
		return ErrClosed
	}
	start, next := p.segments[0].base, p.active().next
	if offset < start || offset > next {
		return &OffsetOutOfRangeError{Topic: p.topic, Partition: p.id, Offset: offset, StartOffset: start, NextOffset: next}
	}
	if offset == next {
		return nil
	}
	p.ret.cuts.Add(1) // reads in flight without the lock retry (see Read)
	i := sort.Search(len(p.segments), func(i int) bool { return p.segments[i].base > offset }) - 1
	s := p.segments[i]
	pos, err := s.positionOf(offset, p.topic, p.id)
	if err != nil {
		return err
	}
	if err := p.lowerPoint(point{Segment: s.base, Position: pos, Offset: offset}); err != nil {
		return err
	}
	p.w.segMu.Lock()
	defer p.w.segMu.Unlock()
	for len(p.segments)-1 > i {
		s := p.active()
		if err := s.close(); err != nil {
			return err
		}
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
		if err := removeSealMarker(p.dir, s.base); err != nil {
			return fmt.Errorf("log: truncate topic %s partition %d: %w", p.topic, p.id, err)
		}
		p.segments = p.segments[:len(p.segments)-1]
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
		if err := p.activateLocked(s); err != nil {
			return err
		}
	}
	p.w.seg = s
	if err := s.w.cut(pos, s.size); err != nil {
		return fmt.Errorf("log: truncate %s at byte %d: %w", s.path, pos, err)
	}
	if err := s.w.sync(); err != nil {
		return fmt.Errorf("log: sync %s: %w", s.path, err)
	}
	s.size, s.next = pos, offset
	s.dropIndexFrom(offset)
	e := p.epochs.begin(offset)
	if err := e.write(p.dir); err != nil {
		return fmt.Errorf("log: topic %s partition %d: %w", p.topic, p.id, err)
	}
	p.epochs = e
	p.epoch.Store(e.latest())
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
	// Step frame by frame from the index entry at or below off.
	e := s.lookup(off)
	pos := e.pos
	buf := make([]byte, frameHeaderBytes)
	for o := e.offset; o < off; o++ {
		if _, err := s.f.ReadAt(buf, pos); err != nil {
			return 0, fmt.Errorf("log: read %s at byte %d: %w", s.path, pos, err)
		}
		bodyLen, _ := frameHeader(buf)
		if bodyLen == 0 {
			return 0, &CorruptError{Topic: topic, Partition: partition, Segment: s.path, Position: pos, Offset: o, Reason: "zero length inside the verified log"}
		}
		pos += int64(padded(frameHeaderBytes + int(bodyLen)))
	}
	return pos, nil
}

// waitChan returns a channel closed by the next append.
func (p *Partition) waitChan() <-chan struct{} {
	p.notifyMu.Lock()
	defer p.notifyMu.Unlock()
	p.notifyUsed = true
	return p.notify
}

// wait blocks until NextOffset is above offset or ctx ends. In-process
// appends wake it at once; on a read-only log another process's appends
// wake it through inotify (see follow.go), and it also looks every poll
// interval.
func (p *Partition) wait(ctx context.Context, offset int64) error {
	var tick *time.Ticker
	if p.readOnly() {
		tick = time.NewTicker(p.cfg.pollInterval)
		defer tick.Stop()
		defer p.enterWait()()
	}
	for {
		ch := p.waitChan() // taken before the check, so no wake-up is lost
		if p.NextOffset() > offset {
			return nil
		}
		if p.isClosed() {
			return fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
		}
		if tick != nil && p.readOnly() {
			p.armFollow() // watch, raise the flag, look again: likewise (follow.go)
			if p.NextOffset() > offset {
				return nil
			}
		}
		if tick == nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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

// resetLocked drops a read-only partition's segments and walks them again
// from disk.
func (p *Partition) resetLocked() {
	for _, s := range p.segments {
		s.close()
	}
	p.segments = nil
	if bases, err := listSegments(p.dir); err == nil {
		if err := p.recoverLocked(bases); err != nil {
			for _, s := range p.segments {
				s.close()
			}
			p.segments = nil
		}
	}
	p.publishLocked()
}

func (p *Partition) isClosed() bool {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.closed
}

// close writes and syncs what was accepted (closeWriter) and closes the
// segments. Appends in flight finish first.
func (p *Partition) close() error {
	werr := p.closeWriter()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	errs := []error{werr}
	p.w.segMu.Lock()
	for _, s := range p.segments {
		errs = append(errs, s.close())
	}
	errs = append(errs, p.closeFollowLocked())
	p.w.seg = nil
	p.w.segMu.Unlock()
	p.publishLocked()
	return errors.Join(errs...)
}
