package log

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Topic is a named set of partitions, fixed in number at creation. It is
// safe for concurrent use.
type Topic struct {
	log         *Log
	name        string
	dir         string
	partitions  []*Partition
	lock        *os.File // the writer lock; nil when read-only
	partitioner Partitioner
	retention   topicRetention // retention.go
}

// topicMetaFile holds the topic's name and partition count, written at
// creation, and its retention policy, rewritten when CreateTopic changes it
// (temporary file, fsync, rename, directory fsync).
const topicMetaFile = "topic.json"

type topicMeta struct {
	Version    int    `json:"version"`
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// RetentionBytes and RetentionMs are the retention policy (Kafka's
	// retention.bytes and retention.ms); absent or negative means
	// unlimited. Only a topic with a bound writes them, so a topic without
	// one stays readable by versions that predate retention.
	RetentionBytes *int64 `json:"retentionBytes,omitempty"`
	RetentionMs    *int64 `json:"retentionMs,omitempty"`
}

func readTopicMeta(name, tdir string) (int, error) {
	m, err := loadTopicMeta(name, tdir)
	return m.Partitions, err
}

func loadTopicMeta(name, tdir string) (topicMeta, error) {
	path := filepath.Join(tdir, topicMetaFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return topicMeta{}, fmt.Errorf("%w: %s (no %s)", ErrUnknownTopic, name, path)
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

// openTopic opens (recovering) every partition, in parallel: recovery walks
// each partition's last segment, and partitions share nothing.
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
			t.partitions[i], errs[i] = openPartition(&l.cfg, name, int32(i), filepath.Join(tdir, strconv.Itoa(i)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.close()
		return nil, err
	}
	if !l.cfg.readOnly {
		if err := syncDir(tdir); err != nil {
			t.close()
			return nil, err
		}
	}
	return t, nil
}

// Name returns the topic's name.
func (t *Topic) Name() string { return t.name }

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
	if t.log.cfg.readOnly {
		return 0, 0, fmt.Errorf("%w: append to topic %s", ErrReadOnly, t.name)
	}
	partition = t.partitioner.Partition(r.Key, len(t.partitions))
	offset, err = t.partitions[partition].AppendAck(ctx, ack, r)
	return partition, offset, err
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
	var errs []error
	for _, p := range t.partitions {
		if p != nil {
			errs = append(errs, p.close())
		}
	}
	if t.lock != nil {
		errs = append(errs, t.lock.Close()) // closing the descriptor releases the flock
	}
	return errors.Join(errs...)
}
