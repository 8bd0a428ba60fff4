package log

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
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

	mu     sync.RWMutex
	segs   segmentSet // the segments, guarded by mu (segments.go)
	report RecoveryReport
	// closed is set under mu by close; it is atomic so that a waiting
	// reader (wait) and Topic look without the lock.
	closed atomic.Bool

	ep epochCache // the epoch history and its file (epoch_cache.go)

	tsType atomic.Int32 // the topic's TimestampType, set by Topic.storeMeta (timestamp.go)
	policy atomic.Int32 // the topic's CleanupPolicy, set by Topic.storeMeta (cleanup_policy.go)

	next atomic.Int64 // high watermark, published after its bytes

	waits waiters // in-process wake-ups of readers waiting for appends (wait.go)

	ret retention // retention.go: one enforcement at a time
	cl  cleaner   // cleaner.go: compaction passes
	// cuts counts truncations. A read compares it before and after its
	// pread, which runs without the partition lock, and reads again when a
	// truncation came in between (readInto).
	cuts  atomic.Uint64
	rf    refresher      // a read-only partition's looks at the writer's files (readonly.go)
	xproc crossProcess   // follow across processes (follow.go)
	w     groupWriter    // the write side: group commit, acks, flush policy (writer.go)
	rp    recoveryPoints // the recovery point file (recoverypoint.go)

	telAttrs  attribute.Set         // the attributes of its metrics (telemetry.go)
	telRecord []metric.RecordOption // telAttrs as the one option of a Record
}

// openPartition opens partition id of topic in dir: read-only (ro, see
// Partition.ro) or for writing, which recovers it (becomeWriterLocked).
func openPartition(cfg *config, topic string, id int32, dir string, ro bool) (*Partition, error) {
	p := &Partition{cfg: cfg, topic: topic, id: id, dir: dir, waits: waiters{ch: make(chan struct{})},
		rp:    recoveryPoints{dir: dir},
		ep:    epochCache{topic: topic, id: id, dir: dir},
		xproc: crossProcess{dir: dir, mmap: cfg.mode == ModeMmap, pollInterval: cfg.pollInterval}}
	p.segs = segmentSet{dir: dir, topic: topic, id: id, mode: cfg.mode, capacity: cfg.segmentBytes, interval: cfg.indexInterval}
	p.ret = retention{dir: dir, topic: topic, id: id, awaitSealers: p.w.awaitSealers}
	p.cl = cleaner{dir: dir, id: id, interval: cfg.indexInterval, passMu: &p.ret.mu, awaitSealers: p.w.awaitSealers, target: p}
	p.rf = refresher{segs: &p.segs, ep: &p.ep, rp: &p.rp.loaded, cuts: &p.cuts, cfg: cfg, dir: dir, topic: topic, id: id,
		report: &p.report, target: p, run: p.refresh}
	p.xproc.readOnly = p.ro.Load
	p.xproc.onChange = func() {
		p.refresh((*refresher).refreshLocked)
		p.waits.wake()
	}
	p.telAttrs = telPartitionAttrs(topic, id)
	p.telRecord = []metric.RecordOption{metric.WithAttributeSet(p.telAttrs)}
	p.ro.Store(ro)
	if !ro {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("log: topic %s partition %d: %w", topic, id, err)
		}
	}
	if ro {
		// The recovery point before the listing: the writer raises it only
		// past frames already in the files, so every frame below it must be
		// found by the walk that follows (recovery.checkReadOnlyPointLocked).
		var err error
		if p.rp.loaded, err = loadRecoveryPoint(dir); err != nil {
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
	if err := p.ep.reloadLocked(); err != nil {
		return nil, err
	}
	if err := p.rf.recoveryLocked().recoverReadOnlyLocked(bases); err != nil {
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
	// The writer's recovery, also while upgrade runs it on a partition
	// still read-only to every other path.
	rec := &recovery{segs: &p.segs, cfg: p.cfg, dir: p.dir, topic: p.topic, id: p.id,
		writer: true, rp: &p.rp.loaded, epoch: p.ep.latestLocked(), report: &p.report}
	if err := rec.recoverLocked(bases); err != nil {
		return err
	}
	if p.segs.len() == 0 {
		if err := p.segs.create(0); err != nil {
			return err
		}
		if err := syncDir(p.dir); err != nil { // the first segment's name (a roll's sealer syncs the later ones)
			return err
		}
	} else {
		p.segs.removeOrphanMarkers()
		if err := rec.cutTailLocked(); err != nil {
			return err
		}
		if err := p.segs.activate(p.segs.active()); err != nil {
			return err
		}
	}
	if err := p.ep.beginLocked(p.segs.active().next); err != nil {
		return err
	}
	p.xproc.openWaitersLocked(true) // a writer's open: the partition is, or is becoming (upgrade), the writer
	p.publishLocked()
	p.w.start(writerSetup{topic: p.topic, id: p.id, cfg: p.cfg, dir: p.dir, store: p, rp: &p.rp,
		epoch: p.ep.current, telRecord: p.telRecord}, p.segs.active())
	return nil
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

// StartOffset returns the log start offset: the lowest offset still
// stored. It rises when retention deletes segments; on a log opened
// read-only it first looks whether the writing process deleted any.
func (p *Partition) StartOffset() int64 {
	if p.ro.Load() {
		p.refresh(func(r *refresher) { r.noticeDeletedLocked(true) })
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	start, _ := p.segs.bounds()
	return start
}

// HighWatermark returns the high watermark (the next offset): one past the
// last record appended, 0 for an empty partition. It is the end a replay
// stops at and the figure lag is measured from. On a log opened read-only
// it first looks for records appended by the writing process.
func (p *Partition) HighWatermark() int64 {
	if p.ro.Load() {
		p.refresh((*refresher).refreshLocked)
	}
	return p.next.Load()
}

// NextOffset returns the high watermark, as [Partition.HighWatermark] does.
//
// Deprecated: use HighWatermark.
func (p *Partition) NextOffset() int64 { return p.HighWatermark() }

// close writes and syncs what was accepted (groupWriter.close) and closes
// the segments. Appends in flight finish first.
func (p *Partition) close() error {
	var werr error
	if !p.ro.Load() { // read-only: the writer never started
		werr = p.w.close()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil
	}
	p.closed.Store(true)
	errs := []error{werr}
	p.w.lockSegment()
	errs = append(errs, p.segs.closeAll())
	errs = append(errs, p.xproc.closeFollowLocked())
	p.w.setSegmentLocked(nil)
	p.w.unlockSegment()
	p.publishLocked()
	return errors.Join(errs...)
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
	if p.closed.Load() {
		return fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	if !p.ro.Load() {
		return nil
	}
	p.cuts.Add(1) // reads in flight without the lock read again (see readInto)
	p.segs.closeAll()
	p.report = RecoveryReport{}
	p.xproc.stopFollowLocked()
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
		// ro stays true until the writer is ready, so no append gets in
		// before it; the open itself is the writer's.
		err = p.becomeWriterLocked(bases)
	}
	if err == nil {
		p.ro.Store(false)
		return nil
	}
	p.segs.closeAll()
	p.ep.forgetFileLocked()
	p.ep.reloadLocked()
	p.rf.resetLocked()
	return err
}

// unlinkOldest is segmentSet.unlinkOldest under the partition lock, for
// retention (retentionTarget).
func (p *Partition) unlinkOldest(now time.Time, pol RetentionPolicy) (*segment, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
	}
	return p.segs.unlinkOldest(now, pol)
}
