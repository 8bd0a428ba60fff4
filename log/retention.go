package log

import (
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Retention: deleting a partition's oldest segments by size and by age
// (package doc, "Retention"). This file holds the topic options, the
// enforcement, the background check of a writable Log, and how a reader in
// another process notices that leading segments were deleted.

// RetentionPolicy is a topic's retention configuration, as stored in its
// topic.json.
type RetentionPolicy struct {
	// Bytes is the per-partition size bound in bytes (RetentionBytes); -1
	// means unlimited.
	Bytes int64
	// Age is the age bound, in whole milliseconds (Retention); -1 means
	// unlimited.
	Age time.Duration
}

// unlimited reports whether the policy never deletes anything.
func (r RetentionPolicy) unlimited() bool { return r.Bytes < 0 && r.Age < 0 }

// topicRetention is a topic's current policy, replaced by CreateTopic while
// the background check reads it.
type topicRetention struct {
	bytes atomic.Int64
	ms    atomic.Int64
	// tombstoneMs is the tombstone retention of a compacted topic in
	// milliseconds (TombstoneRetention).
	tombstoneMs atomic.Int64
}

func (r *topicRetention) store(m topicMeta) {
	b, ms := int64(-1), int64(-1)
	if m.RetentionBytes != nil && *m.RetentionBytes >= 0 {
		b = *m.RetentionBytes
	}
	if m.RetentionMs != nil && *m.RetentionMs >= 0 {
		ms = *m.RetentionMs
	}
	r.bytes.Store(b)
	r.ms.Store(ms)
	tomb := defaultTombstoneRetention.Milliseconds()
	if m.DeleteRetentionMs != nil && *m.DeleteRetentionMs >= 0 {
		tomb = *m.DeleteRetentionMs
	}
	r.tombstoneMs.Store(tomb)
}

// Retention returns the topic's retention policy. On a log opened read-only
// it is the policy stored when the topic was opened.
func (t *Topic) Retention() RetentionPolicy {
	age := time.Duration(-1)
	if ms := t.retention.ms.Load(); ms >= 0 {
		age = time.Duration(ms) * time.Millisecond
	}
	return RetentionPolicy{Bytes: t.retention.bytes.Load(), Age: age}
}

// setRetention applies CreateTopic's options to an open topic, rewriting its
// topic.json when they change it. The caller holds the Log's lock.
func (t *Topic) setRetention(opts *topicOptions) error {
	m, err := loadTopicMeta(t.name, t.dir)
	if err != nil {
		return err
	}
	if !opts.applyTo(&m) {
		return nil
	}
	if err := writeTopicMeta(t.dir, m); err != nil {
		return err
	}
	t.storeMeta(m)
	return nil
}

// RetentionReport says what one retention check deleted from a topic.
type RetentionReport struct {
	Topic string // the topic checked
	// Partitions has one entry per partition that deleted at least one
	// segment, by partition number.
	Partitions []PartitionRetention
}

// DeletedSegments returns the number of segments deleted, all partitions
// together.
func (r RetentionReport) DeletedSegments() int {
	n := 0
	for _, p := range r.Partitions {
		n += len(p.Segments)
	}
	return n
}

// DeletedBytes returns the bytes of the deleted segments, all partitions
// together.
func (r RetentionReport) DeletedBytes() int64 {
	n := int64(0)
	for _, p := range r.Partitions {
		n += p.Bytes
	}
	return n
}

// PartitionRetention says what a retention check deleted from one
// partition.
type PartitionRetention struct {
	Partition int32 // the partition number
	// Segments are the paths of the deleted segment files, oldest first.
	Segments []string
	// Records is the number of records the deleted segments held.
	Records int64
	// Bytes is the size of the deleted segments' frames.
	Bytes int64
	// StartOffset is the log start offset after the check.
	StartOffset int64
}

// EnforceRetention applies the topic's retention policy (RetentionBytes,
// Retention) once, as of now, to every partition, and reports what it
// deleted. Each partition loses whole segments, oldest first, never its
// active one: the oldest segment goes while it is older than the age bound
// or what would remain still holds the byte bound, and the check stops at the
// first segment that stays. Every deletion unlinks the file and fsyncs the
// partition's directory before the next one, so a crash never leaves a gap.
// A read in flight in a deleted segment finishes with its bytes; later reads
// below the new log start offset get an *OffsetOutOfRangeError carrying it.
//
// A topic of cleanup policy CleanupCompact is left alone, as Kafka leaves
// a topic of cleanup.policy=compact: only CleanupDelete (the default) and
// CleanupCompactDelete apply the retention bounds.
//
// A writable Log also runs it on every topic it has open every
// WithRetentionCheckInterval (5 minutes by default). A partition that fails
// (an I/O error) does not stop the others: the report holds what was
// deleted and the error joins the failures. Like every write it first takes
// the topic's writer lock (Topic.LockWriter). Errors: ErrReadOnly, ErrLocked
// (another process writes the topic), ErrClosed.
func (t *Topic) EnforceRetention(now time.Time) (RetentionReport, error) {
	rep := RetentionReport{Topic: t.name}
	if err := t.LockWriter(); err != nil {
		return rep, fmt.Errorf("log: enforce retention of topic %s: %w", t.name, err)
	}
	pol := t.Retention()
	if t.CleanupPolicy() == CleanupCompact {
		// Kafka's cleanup.policy=compact without delete: the retention
		// bounds do not apply; compaction alone bounds the topic.
		return rep, nil
	}
	var errs []error
	for _, p := range t.partitions {
		pr, err := p.ret.enforce(p, now, pol)
		if len(pr.Segments) > 0 {
			rep.Partitions = append(rep.Partitions, pr)
		}
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// retention is a partition's side of retention: one enforcement at a time,
// deleting its oldest segments through the partition (retentionTarget),
// which holds its lock only around each unlink.
type retention struct {
	// mu lets one retention check at a time run on the partition.
	mu    sync.Mutex
	dir   string // the partition folder, fsynced after each deletion
	topic string // for errors and the report
	id    int32
	// awaitSealers waits for the sealers of the rolls so far
	// (groupWriter.awaitSealers): a segment is deleted only once sealed.
	awaitSealers func() error
}

// retentionTarget is what retention needs of a partition.
type retentionTarget interface {
	// unlinkOldest deletes the oldest segment when pol wants it gone (see
	// segmentSet.unlinkOldest), under the partition lock.
	unlinkOldest(now time.Time, pol RetentionPolicy) (*segment, error)
	// StartOffset is the log start offset after the deletions.
	StartOffset() int64
}

// enforce applies pol to the partition p as of now: it deletes segments,
// oldest first, until the first that stays (Topic.EnforceRetention).
func (r *retention) enforce(p retentionTarget, now time.Time, pol RetentionPolicy) (PartitionRetention, error) {
	rep := PartitionRetention{Partition: r.id}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Segments sealed by the rolls so far become deletable once their
	// sealers finish (one later roll's are left to the next pass). A failed
	// sealer failed the partition, which its appends report.
	_ = r.awaitSealers()
	for !pol.unlimited() {
		s, err := p.unlinkOldest(now, pol)
		if err != nil || s == nil {
			rep.StartOffset = p.StartOffset()
			return rep, err
		}
		rep.Segments = append(rep.Segments, s.path)
		rep.Records += s.recordCount()
		rep.Bytes += s.size
		cerr := s.close() // the last read in it closes the descriptor
		if err := syncDir(r.dir); err != nil {
			rep.StartOffset = p.StartOffset()
			return rep, fmt.Errorf("log: retention of topic %s partition %d: %w", r.topic, r.id, err)
		}
		if cerr != nil {
			rep.StartOffset = p.StartOffset()
			return rep, fmt.Errorf("log: retention of topic %s partition %d: close %s: %w", r.topic, r.id, s.path, cerr)
		}
	}
	rep.StartOffset = p.StartOffset()
	return rep, nil
}

// unlinkOldest deletes the oldest segment if pol wants it gone and it is not
// the active one: it unlinks the file and takes the segment out of the set,
// so no new read can reach it. It returns the segment (still holding the
// set's reference, for the caller to drop) or nil when nothing is to be
// deleted. The caller holds the partition lock.
func (ss *segmentSet) unlinkOldest(now time.Time, pol RetentionPolicy) (*segment, error) {
	if len(ss.list) < 2 {
		return nil, nil // the active segment is never deleted
	}
	s := ss.list[0]
	if s.sealing.Load() {
		// Its roll's sealer is still forcing it to disk and will write its
		// seal marker: the next retention pass deletes it.
		return nil, nil
	}
	expired := false
	if pol.Age >= 0 {
		age, ok, err := s.age(now)
		if err != nil {
			return nil, fmt.Errorf("log: retention of topic %s partition %d: %w", ss.topic, ss.id, err)
		}
		// A segment without records holds nothing to keep.
		expired = !ok || age > pol.Age.Milliseconds()
	}
	if !expired && pol.Bytes >= 0 {
		expired = ss.bytes()-s.size >= pol.Bytes
	}
	if !expired {
		return nil, nil
	}
	if err := os.Remove(s.path); err != nil {
		return nil, fmt.Errorf("log: retention of topic %s partition %d: %w", ss.topic, ss.id, err)
	}
	_ = removeSealMarker(ss.dir, s.base) // best effort: Open removes orphans too
	_ = removeCompactedFlag(ss.dir, s.base)
	ss.dropFront(1)
	return s, nil
}

// age returns how old s is at now, in milliseconds, for retention by age,
// and false when s holds no record. It is now minus the newest record
// timestamp of s, unless that timestamp lies ahead of now: a timestamp from
// the future (a producer's clock ahead, or the writer's clock since stepped
// back) is not trusted, and s is aged by the time its file was last written
// (its mtime), the fallback Kafka chose. The age may be negative (the mtime
// ahead of now too: the clock was stepped back), which is younger than any
// bound. So one record stamped years ahead cannot pin its segment, or the
// segments after it, and a clock stepped backwards deletes nothing early.
func (s *segment) age(now time.Time) (int64, bool, error) {
	newest, ok, err := s.newestTimestamp()
	if err != nil || !ok {
		return 0, ok, err
	}
	nowMs := now.UnixMilli()
	if newest <= nowMs {
		return nowMs - newest, true, nil
	}
	fi, err := s.f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat %s: %w", s.path, err)
	}
	return nowMs - fi.ModTime().UnixMilli(), true, nil
}

// noteTimestamp records ts, in milliseconds, as a record timestamp of s.
func (s *segment) noteTimestamp(ts int64) {
	if !s.hasTimestamp || ts > s.maxTimestamp {
		s.maxTimestamp, s.hasTimestamp = ts, true
	}
}

// frameTimestamp returns the timestamp of an encoded frame (the body layout
// in log/doc.go; decodeBody reads the same bytes). Appends use it to keep a
// segment's newest timestamp without decoding whole records.
func frameTimestamp(frame []byte) int64 {
	return bodyTimestamp(frame[frameHeaderBytes:])
}

// newestTimestamp returns the newest record timestamp of s, in milliseconds,
// and false when s holds no record. Segments walked at open or appended in
// this process know it already; for any other it walks the segment once
// (a copy of s, so its own size, index and end are untouched) and keeps the
// answer: a sealed segment does not change. After a Truncate into s the
// answer may be newer than the newest record left, which keeps the segment
// longer, never shorter, until the next open walks it again.
func (s *segment) newestTimestamp() (int64, bool, error) {
	if s.hasTimestamp || s.next == s.base {
		return s.maxTimestamp, s.hasTimestamp, nil
	}
	t := &segment{base: s.base, path: s.path, f: s.f, next: s.base, indexedAt: -1, gaps: s.gaps}
	if _, _, err := t.walk(nil, math.MaxInt); err != nil {
		return 0, false, err
	}
	s.maxTimestamp, s.hasTimestamp = t.maxTimestamp, t.hasTimestamp
	return s.maxTimestamp, s.hasTimestamp, nil
}

// backgroundLoop runs a writable Log's periodic work in a goroutine: the
// retention check (retention.go) and the cleaner (cleaner.go).
type backgroundLoop struct {
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the goroutine has returned
	once sync.Once
}

// start runs fn every interval until halt, unless the log is read-only
// or every is 0. fn looks at stop between topics.
func (b *backgroundLoop) start(l *Log, every time.Duration, fn func(now time.Time, stop <-chan struct{})) {
	if l.cfg.readOnly || every <= 0 {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-b.stop:
				return
			case <-tick.C:
				fn(l.cfg.now(), b.stop)
			}
		}
	}()
}

// halt stops the loop and waits until it has returned: work in progress
// finishes the topic it is in.
func (b *backgroundLoop) halt() {
	if b.stop == nil {
		return
	}
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// startRetention starts the background retention check, unless the log is
// read-only or the interval is 0.
func (l *Log) startRetention() {
	l.ret.start(l, l.cfg.retentionCheckInterval, l.enforceRetention)
}

// enforceRetention runs Topic.EnforceRetention on every topic open in l, in
// name order, and hands what each did to the observer.
func (l *Log) enforceRetention(now time.Time, stop <-chan struct{}) {
	l.eachWrittenTopic(stop, func(t *Topic) {
		rep, err := t.EnforceRetention(now)
		if obs := l.cfg.retentionObserver; obs != nil && (err != nil || len(rep.Partitions) > 0) {
			obs(rep, err)
		}
	})
}

// eachWrittenTopic runs fn on every topic open in l that this process
// writes (a topic only read here is its writer's to clean), in name order,
// until stop is closed: the background retention check's and cleaner's walk.
func (l *Log) eachWrittenTopic(stop <-chan struct{}, fn func(*Topic)) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	topics := make([]*Topic, 0, len(l.topics))
	for _, t := range l.topics {
		if t.locked.Load() {
			topics = append(topics, t)
		}
	}
	l.mu.Unlock()
	sort.Slice(topics, func(i, j int) bool { return topics[i].name < topics[j].name })
	for _, t := range topics {
		select {
		case <-stop:
			return
		default:
		}
		fn(t)
	}
}
