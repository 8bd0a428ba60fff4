package log

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/strom-dev/strom/internal/topicid"
)

// Topic is a named set of partitions, fixed in number at creation. It is
// safe for concurrent use.
type Topic struct {
	log         *Log
	name        string
	dir         string
	partitions  []*Partition
	partitioner Partitioner
	retention   topicRetention          // retention.go
	id          atomic.Pointer[TopicID] // from topic.json (storeMeta); nil until stored

	lockMu sync.Mutex  // serialises LockWriter and close
	lock   *os.File    // the writer lock; nil until taken (LockWriter)
	locked atomic.Bool // lock is held and every partition is a writer
}

// topicMetaFile holds the topic's name, partition count and ID, written at
// creation, and its retention policy, rewritten when CreateTopic changes it
// (temporary file, fsync, rename, directory fsync).
const topicMetaFile = "topic.json"

// topicMetaMaxBytes bounds what loadTopicMeta reads: a topic.json is one
// JSON line of a few hundred bytes (the name is at most 249).
const topicMetaMaxBytes = 64 << 10

type topicMeta struct {
	Version    int    `json:"version"`
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// RetentionBytes and RetentionMs are the retention policy (Kafka's
	// retention.bytes and retention.ms); absent or negative means
	// unlimited. Only a topic with a bound writes them.
	RetentionBytes *int64 `json:"retentionBytes,omitempty"`
	RetentionMs    *int64 `json:"retentionMs,omitempty"`
	// TimestampType is "LogAppendTime" for a topic of log append time
	// (WithTimestampType); absent (empty) means CreateTime, so a topic of
	// create time keeps the topic.json of versions before the field.
	TimestampType string `json:"timestampType,omitempty"`
	// CleanupPolicy is "compact" or "compact,delete" for a compacted topic
	// (WithCleanupPolicy); absent (empty) means delete, so a topic that
	// never compacted keeps the topic.json of versions before the field
	// ("delete", written by hand, is read as delete too).
	CleanupPolicy string `json:"cleanupPolicy,omitempty"`
	// DeleteRetentionMs is how long a compacted topic keeps a tombstone
	// after the cleaner pass that first kept it (Kafka's
	// delete.retention.ms, TombstoneRetention); absent means the default,
	// 24 hours.
	DeleteRetentionMs *int64 `json:"deleteRetentionMs,omitempty"`
	// ID is the topic's identity (Topic.ID), written at creation; absent
	// (zero) in a topic created by a version before IDs, until a writer
	// opens it (assignID).
	ID TopicID `json:"id,omitzero"`
}

// TopicID is a topic's identity, Kafka's topic ID (KIP-516): 16 random
// bytes (a version 4 UUID) drawn when the topic is created and kept in its
// topic.json ("id", 22 characters of unpadded URL-safe base64, as Kafka
// prints topic IDs: String). A topic deleted and created again under the
// same name gets another ID, so a position saved against the old topic
// (checkpoint.Position.TopicID, the same type) is told apart from one of
// the new, whose offsets count other records. The zero TopicID (IsZero)
// means unknown.
type TopicID = topicid.ID

// ParseTopicID parses the text of a TopicID (what its String returns, 22
// characters of unpadded URL-safe base64; "" is the zero ID). Other text is
// an error quoting it.
func ParseTopicID(s string) (TopicID, error) { return topicid.Parse(s) }

// ID returns the topic's identity (see TopicID), stored in its topic.json
// when it was created. A topic created by a version of strom before topic
// IDs has none until a process opens it for writing (LockWriter,
// CreateTopic, WriteTopic), which draws one and stores it; until then, and
// in a process that opened it for reading before that, ID returns the zero
// TopicID: unknown. It never changes otherwise while the topic is open.
func (t *Topic) ID() TopicID {
	if id := t.id.Load(); id != nil {
		return *id
	}
	return TopicID{}
}

// assignID gives a topic that has no ID (created by a version before topic
// IDs) a new one and rewrites its topic.json, so positions saved from now
// on carry it. The caller holds the topic's writer lock. Versions of strom
// before topic IDs refuse a topic.json with an ID (ErrCorruptMetadata: an
// unknown field), as they refuse one with a retention bound.
func assignID(tdir string, m *topicMeta) error {
	if !m.ID.IsZero() {
		return nil
	}
	m.ID = topicid.New()
	return writeTopicMeta(tdir, *m)
}

func readTopicMeta(name, tdir string) (int, error) {
	m, err := loadTopicMeta(name, tdir)
	return m.Partitions, err
}

func loadTopicMeta(name, tdir string) (topicMeta, error) {
	path := filepath.Join(tdir, topicMetaFile)
	b, err := readRegularFile(path, topicMetaMaxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return topicMeta{}, fmt.Errorf("%w: %s (no %s)", ErrUnknownTopic, name, path)
	}
	if errors.Is(err, errFileTooLarge) {
		return topicMeta{}, fmt.Errorf("%w: topic %s: metadata file %s: %w", ErrCorruptMetadata, name, path, err)
	}
	if err != nil {
		return topicMeta{}, fmt.Errorf("log: topic %s: %w", name, err)
	}
	var m topicMeta
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	why := ""
	switch err := dec.Decode(&m); {
	case err != nil:
		why = err.Error()
	case len(bytes.TrimSpace(b[dec.InputOffset():])) != 0:
		why = "unexpected bytes after the JSON object"
	case m.Version != 1:
		why = fmt.Sprintf("version %d, want 1", m.Version)
	case m.Name != name:
		why = fmt.Sprintf("name %q, want %q", m.Name, name)
	case m.Partitions < 1 || m.Partitions > MaxPartitions:
		why = fmt.Sprintf("%d partitions, want 1 to %d", m.Partitions, MaxPartitions)
	case m.TimestampType != "" && m.TimestampType != LogAppendTime.String():
		why = fmt.Sprintf("timestamp type %q, want %q or none", m.TimestampType, LogAppendTime.String())
	case m.CleanupPolicy != "" && m.CleanupPolicy != CleanupDelete.String() && m.CleanupPolicy != CleanupCompact.String() && m.CleanupPolicy != CleanupCompactDelete.String():
		why = fmt.Sprintf("cleanup policy %q, want %q, %q, %q or none", m.CleanupPolicy, CleanupDelete.String(), CleanupCompact.String(), CleanupCompactDelete.String())
	case m.DeleteRetentionMs != nil && *m.DeleteRetentionMs < 0:
		why = fmt.Sprintf("tombstone retention %d ms, want 0 or more", *m.DeleteRetentionMs)
	}
	if why != "" {
		return topicMeta{}, fmt.Errorf("%w: topic %s: metadata file %s: %s", ErrCorruptMetadata, name, path, why)
	}
	// A partition folder beyond the count means the count was edited down:
	// opening would silently ignore that partition's records.
	entries, err := os.ReadDir(tdir)
	if err != nil {
		return topicMeta{}, fmt.Errorf("log: topic %s: %w", name, err)
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil && e.IsDir() && n >= m.Partitions {
			return topicMeta{}, fmt.Errorf("%w: topic %s: metadata file %s says %d partitions but folder %s exists",
				ErrCorruptMetadata, name, path, m.Partitions, filepath.Join(tdir, e.Name()))
		}
	}
	return m, nil
}

func writeTopicMeta(tdir string, m topicMeta) error {
	name := m.Name
	b, _ := json.Marshal(m)
	if err := replaceFile(tdir, topicMetaFile, append(b, '\n')); err != nil {
		return fmt.Errorf("log: topic %s: write metadata: %w", name, err)
	}
	return nil
}

// openTopic opens every partition, in parallel: with lock (the topic's
// writer lock, held) for writing, recovering them (recovery walks each
// partition's last segment, and partitions share nothing); without, read-only,
// following the writer, until LockWriter.
func openTopic(l *Log, name, tdir string, n int, lock *os.File) (*Topic, error) {
	t := &Topic{log: l, name: name, dir: tdir, lock: lock, partitioner: l.cfg.partitioner,
		partitions: make([]*Partition, n)}
	if t.partitioner == nil {
		t.partitioner = &KafkaPartitioner{}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			t.partitions[i], errs[i] = openPartition(&l.cfg, name, int32(i), filepath.Join(tdir, strconv.Itoa(i)), lock == nil)
			if errs[i] == nil && !l.cfg.readOnly {
				t.partitions[i].lockWriter = t.LockWriter
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.close()
		return nil, err
	}
	if lock != nil {
		if err := syncDir(tdir); err != nil {
			t.close()
			return nil, err
		}
		t.locked.Store(true)
	}
	return t, nil
}

// LockWriter makes this process the topic's writer: it takes the topic's
// writer lock (writer.lock, flock) and switches every partition from
// following to writing, in place, running the recovery a writer's open runs
// (torn tail cut, recovery point checks, a new epoch) before any append, and
// reads the topic's options (retention, timestamp type) from its topic.json
// again, since the writer before may have changed them. *Topic and
// *Partition handles, and Readers on them, stay valid.
//
// In a read-write Log a topic opened by Log.Topic is read, not written,
// until then: it follows another process's appends like a topic of a
// ReadOnly log. The first write (Append, AppendAck, AppendBatch,
// AppendBatchAck, EnforceRetention, CreateTopic, and Partition.Append,
// AppendAck and Truncate) calls LockWriter itself; call it, or open the topic
// with Log.WriteTopic, to take the lock and learn of recovery and
// corruption before the first write. It returns nil at once when the lock
// is already held by this Topic.
//
// Errors: a *LockedError (ErrLocked) naming the holder's pid when another
// process (or another Log of this process) holds the lock: nothing changes
// and the topic goes on being read; ErrReadOnly in a ReadOnly log;
// ErrClosed; the recovery errors of opening a partition for writing
// (ErrCorrupt, I/O errors naming the segment), after which the lock stays
// held and the failed partitions go on being read, to be retried by the
// next write.
func (t *Topic) LockWriter() error {
	if t.locked.Load() {
		return nil
	}
	if t.log.cfg.readOnly {
		return fmt.Errorf("%w: topic %s", ErrReadOnly, t.name)
	}
	t.lockMu.Lock()
	defer t.lockMu.Unlock()
	if t.locked.Load() {
		return nil
	}
	if t.lock == nil {
		if t.partitions[0].closed.Load() {
			return fmt.Errorf("%w: topic %s", ErrClosed, t.name)
		}
		lock, err := lockTopic(t.name, t.dir)
		if err != nil {
			return err
		}
		t.lock = lock
		// The writer before may have changed the options (retention,
		// timestamp type) since the topic was opened for reading.
		m, err := loadTopicMeta(t.name, t.dir)
		if err == nil {
			err = assignID(t.dir, &m)
		}
		if err != nil {
			return err
		}
		t.storeMeta(m)
	}
	errs := make([]error, len(t.partitions))
	var wg sync.WaitGroup
	for i, p := range t.partitions {
		wg.Go(func() { errs[i] = p.upgrade() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := syncDir(t.dir); err != nil {
		return err
	}
	t.locked.Store(true)
	return nil
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

// Dir returns the topic's folder: the log directory joined with the
// topic's name. It holds topic.json, writer.lock and one folder per
// partition (named by its number), which is all the log reads there; a
// file of another name beside them (a sink's transaction file) is left
// alone.
func (t *Topic) Dir() string { return t.dir }

// Partitions returns the partition count fixed at creation.
func (t *Topic) Partitions() int { return len(t.partitions) }

// Partition returns partition p. Errors: ErrPartitionOutOfRange for p
// outside 0..Partitions()-1.
func (t *Topic) Partition(p int32) (*Partition, error) {
	if p < 0 || int(p) >= len(t.partitions) {
		return nil, fmt.Errorf("%w: topic %s has partitions 0 to %d, asked for %d",
			ErrPartitionOutOfRange, t.name, len(t.partitions)-1, p)
	}
	return t.partitions[p], nil
}

// Append appends r to the partition its key picks (see KafkaPartitioner:
// murmur2 for keys, round-robin for nil) and returns that partition and the
// record's offset. Like Partition.Append it returns when the log's ack
// policy says (WithAck; AckWritten by default: once the record is in the
// page cache).
func (t *Topic) Append(ctx context.Context, r Record) (partition int32, offset int64, err error) {
	return t.AppendAck(ctx, 0, r)
}

// AppendAck is Append with the ack policy of this call (see
// Partition.AppendAck; the zero Ack is the log's default).
func (t *Topic) AppendAck(ctx context.Context, ack Ack, r Record) (partition int32, offset int64, err error) {
	if err := t.LockWriter(); err != nil {
		return 0, 0, fmt.Errorf("log: append to topic %s: %w", t.name, err)
	}
	partition = t.partitioner.Partition(r.Key, len(t.partitions))
	offset, err = t.partitions[partition].AppendAck(ctx, ack, r)
	return partition, offset, err
}

// AppendBatch appends recs to the partitions their keys pick, as Append
// would one by one (Kafka's murmur2 for keys; round-robin for nil keys, the
// counter moving once per nil-key record in the order of recs), but with one
// Partition.Append per partition: the records of each partition keep their
// order in recs and get consecutive offsets, written together (one encoding
// pass, one write, as the group-commit writer takes several records). It
// returns when the log's ack policy says (WithAck); AppendBatchAck chooses.
// It is AppendBatchAck with the zero Ack, which documents the rest.
func (t *Topic) AppendBatch(ctx context.Context, recs []Record) error {
	return t.AppendBatchAck(ctx, 0, recs)
}

// batchScratch is the per-call working memory of AppendBatchAck, recycled:
// a batch groups its records without allocating once the pool is warm.
type batchScratch struct {
	order []uint64 // partition<<32 | index in recs, sorted
	recs  []Record // recs grouped by partition, each group in recs' order
}

var batchScratches = sync.Pool{New: func() any { return new(batchScratch) }}

// AppendBatchAck is AppendBatch with the ack policy of this call (see
// Partition.AppendAck; the zero Ack is the log's default). Partitions are
// appended one after the other, in increasing partition number, each
// returning when ack says: with AckSynced every partition written is synced
// (a sync shared with that partition's concurrent appenders) before it
// returns.
//
// Before appending anything it checks every record's size: a record whose
// frame is larger than a segment fails the whole call with a
// *RecordTooLargeError (ErrRecordTooLarge) naming its partition, and
// nothing is appended; so does a record whose timestamp is more than
// WithMaxTimestampAhead ahead of the writer's clock in a topic of
// CreateTime, with a *TimestampAheadError (ErrTimestampAhead). A later
// failure (an I/O error, ErrClosed, ctx ending before a partition's records
// were accepted) stops at that partition: the
// partitions before it stay appended, those after it are not, and the error
// names the topic, the partition and how many of recs it carried. A retry of
// the whole batch appends the first ones again (at-least-once). An empty
// recs appends nothing. The records and the slices they point to are not
// used after it returns. Errors: ErrReadOnly, ErrRecordTooLarge,
// ErrTimestampAhead, ErrClosed, an invalid ack, ctx.Err(), I/O errors naming
// the segment.
func (t *Topic) AppendBatchAck(ctx context.Context, ack Ack, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	if err := t.LockWriter(); err != nil {
		return fmt.Errorf("log: append to topic %s: %w", t.name, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(recs) > math.MaxUint32 {
		return fmt.Errorf("log: append batch to topic %s: %d records, at most %d per call", t.name, len(recs), uint64(math.MaxUint32))
	}
	sc := batchScratches.Get().(*batchScratch)
	defer func() {
		clear(sc.recs) // keep no caller's bytes alive in the pool
		sc.order, sc.recs = sc.order[:0], sc.recs[:0]
		batchScratches.Put(sc)
	}()
	n := len(t.partitions)
	for i := range recs {
		part := t.partitioner.Partition(recs[i].Key, n)
		sc.order = append(sc.order, uint64(part)<<32|uint64(i))
	}
	segmentBytes := t.log.cfg.segmentBytes
	createTime := t.TimestampType() == CreateTime
	now := int64(0)
	for _, o := range sc.order {
		if fs := int64(frameSize(&recs[uint32(o)])); fs > segmentBytes {
			return &RecordTooLargeError{Topic: t.name, Partition: int32(o >> 32), FrameBytes: fs, SegmentBytes: segmentBytes}
		}
		if ts := recs[uint32(o)].Timestamp; createTime && ts != 0 {
			var err error
			if now, err = checkAhead(&t.log.cfg, t.name, int32(o>>32), ts, now); err != nil {
				return err
			}
		}
	}
	slices.Sort(sc.order) // by partition, then by index: each group keeps recs' order
	for _, o := range sc.order {
		sc.recs = append(sc.recs, recs[uint32(o)])
	}
	for lo := 0; lo < len(sc.order); {
		part := int32(sc.order[lo] >> 32)
		hi := lo + 1
		for hi < len(sc.order) && int32(sc.order[hi]>>32) == part {
			hi++
		}
		if _, err := t.partitions[part].AppendAck(ctx, ack, sc.recs[lo:hi]...); err != nil {
			return fmt.Errorf("log: append batch to topic %s: %d of %d records to partition %d: %w", t.name, hi-lo, len(recs), part, err)
		}
		lo = hi
	}
	return nil
}

// PartitionFor returns the partition a record with key would be appended
// to now. It has no side effect: the round-robin counter for nil keys does
// not move.
func (t *Topic) PartitionFor(key []byte) int32 {
	return t.partitioner.PartitionFor(key, len(t.partitions))
}

// Sync forces every partition's accepted records to stable storage (see
// Partition.Sync).
func (t *Topic) Sync() error {
	var errs []error
	for _, p := range t.partitions {
		errs = append(errs, p.Sync())
	}
	return errors.Join(errs...)
}

func (t *Topic) close() error {
	t.lockMu.Lock() // no LockWriter half done
	defer t.lockMu.Unlock()
	var errs []error
	for _, p := range t.partitions {
		if p != nil {
			errs = append(errs, p.close())
		}
	}
	if t.lock != nil {
		errs = append(errs, unlockTopic(t.lock))
	}
	return errors.Join(errs...)
}
