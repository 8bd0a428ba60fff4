package log

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// CleanupPolicy says what a topic's partitions drop as they grow, as Kafka's
// cleanup.policy does: CleanupDelete (the default) drops whole segments by
// age and size (RetentionBytes, Retention); CleanupCompact keeps the latest
// record of each key (log compaction, see the package doc, "Compaction");
// CleanupCompactDelete does both. Offsets never change either way.
type CleanupPolicy uint8

const (
	// CleanupDelete drops whole segments by the topic's retention bounds
	// only. It is the zero value and the default.
	CleanupDelete CleanupPolicy = iota
	// CleanupCompact keeps the latest record of each key; every record
	// appended needs a key (ErrKeyRequired). A record with a nil Value is
	// a tombstone; an empty non-nil Value is data. Records without a key
	// appended while the topic was not compacted are kept as they are
	// (Kafka's cleaner drops them; strom removes nothing it cannot tell
	// is replaced).
	CleanupCompact
	// CleanupCompactDelete compacts and applies the retention bounds.
	CleanupCompactDelete
)

// ErrKeyRequired is returned by an append of a record without a key (a nil
// Key) to a compacted topic (CleanupCompact, CleanupCompactDelete), as
// Kafka refuses one: compaction keeps the latest record of each key, and a
// record without one has none. The *KeyRequiredError that carries it names
// the record; nothing of its batch is appended.
var ErrKeyRequired = errors.New("log: a compacted topic needs a key on every record")

// ErrCompacted is returned by a Truncate below what compaction relied on:
// the cleaner removed records of a key because a later record of the same
// key replaced them, and cutting that later record would leave the key
// with neither. The *CompactedError that carries it gives the lowest
// offset a Truncate may cut at. (Kafka never truncates below its high
// watermark, which bounds its cleaner; strom's Truncate may cut anywhere
// above the log start, so the cleaner's reach bounds it instead.)
var ErrCompacted = errors.New("log: truncate below what compaction relied on")

// CompactedError reports a Truncate refused by compaction. It matches
// ErrCompacted.
type CompactedError struct {
	Topic     string
	Partition int32
	Offset    int64 // the offset Truncate was asked to cut at
	// CompactedThrough is the end of the section the cleaner mapped: the
	// lowest offset a Truncate may cut at.
	CompactedThrough int64
}

// Error names the coordinates, as the type doc lists them.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("log: topic %s partition %d: truncate to offset %d refused: compaction removed records that later records up to offset %d replaced (cut at %d or above)",
		e.Topic, e.Partition, e.Offset, e.CompactedThrough, e.CompactedThrough)
}

// Unwrap returns ErrCompacted.
func (e *CompactedError) Unwrap() error { return ErrCompacted }

// KeyRequiredError reports a record without a key appended to a compacted
// topic. It matches ErrKeyRequired.
type KeyRequiredError struct {
	Topic     string
	Partition int32
	Index     int // the record's index in the batch given to the append
}

// Error names the coordinates, as the type doc lists them.
func (e *KeyRequiredError) Error() string {
	return fmt.Sprintf("log: topic %s partition %d: record %d of the batch has no key, and the topic is compacted (cleanup policy compact): nothing of the batch was appended",
		e.Topic, e.Partition, e.Index)
}

// Unwrap returns ErrKeyRequired.
func (e *KeyRequiredError) Unwrap() error { return ErrKeyRequired }

// String returns Kafka's spelling of the policy: "delete", "compact" or
// "compact,delete".
func (c CleanupPolicy) String() string {
	switch c {
	case CleanupDelete:
		return "delete"
	case CleanupCompact:
		return "compact"
	case CleanupCompactDelete:
		return "compact,delete"
	}
	return fmt.Sprintf("CleanupPolicy(%d)", uint8(c))
}

// Compacts reports whether the policy compacts: CleanupCompact or
// CleanupCompactDelete.
func (c CleanupPolicy) Compacts() bool { return c == CleanupCompact || c == CleanupCompactDelete }

func (c CleanupPolicy) valid() bool { return c <= CleanupCompactDelete }

// ParseCleanupPolicy parses Kafka's cleanup.policy values: "delete",
// "compact", and both, comma-separated in either order ("compact,delete",
// "delete,compact"), with spaces around the commas ignored. Anything else
// is an error that names it.
func ParseCleanupPolicy(s string) (CleanupPolicy, error) {
	var compact, del bool
	for _, part := range strings.Split(s, ",") {
		switch strings.TrimSpace(part) {
		case "compact":
			compact = true
		case "delete":
			del = true
		default:
			return 0, fmt.Errorf("log: unknown cleanup policy %q (want delete, compact or compact,delete)", s)
		}
	}
	switch {
	case compact && del:
		return CleanupCompactDelete, nil
	case compact:
		return CleanupCompact, nil
	}
	return CleanupDelete, nil
}

// WithCleanupPolicy sets the topic's cleanup policy (CleanupDelete, the
// default, CleanupCompact or CleanupCompactDelete). It is stored in the
// topic's topic.json ("cleanupPolicy":"compact"; absent means delete, the
// form of versions before the option) and survives reopening. Given to
// CreateTopic of an existing topic, it replaces the stored value: a topic
// made compacted refuses records without a key from then on, and one made
// delete again keeps what compaction removed removed. An unknown policy
// fails CreateTopic.
func WithCleanupPolicy(c CleanupPolicy) TopicOption {
	return topicOptionFunc(func(o *topicOptions) { o.cleanupPolicy = &c })
}

// TombstoneRetention sets how long a compacted topic keeps a tombstone (a
// record with a nil Value) after the cleaner pass that first kept it, as
// Kafka's delete.retention.ms does: long enough for a consumer that reads
// the topic from its start to see the deletion before the key is gone
// without a trace. The default is 24 hours; d is kept in whole
// milliseconds (rounded down), and a negative d fails CreateTopic. It is
// stored in topic.json ("deleteRetentionMs"). Given to CreateTopic of an
// existing topic, it replaces the stored value.
func TombstoneRetention(d time.Duration) TopicOption {
	return topicOptionFunc(func(o *topicOptions) {
		ms := d.Milliseconds()
		if d < 0 {
			ms = min(ms, -1) // a negative duration under 1 ms is still negative
		}
		o.tombstoneMs = &ms
	})
}

// TombstoneRetention returns the topic's tombstone retention
// (TombstoneRetention, 24 hours by default).
func (t *Topic) TombstoneRetention() time.Duration {
	return time.Duration(t.retention.tombstoneMs.Load()) * time.Millisecond
}

// CleanupPolicy returns the topic's cleanup policy (WithCleanupPolicy). On
// a log opened read-only it is the policy stored when the topic was opened.
func (t *Topic) CleanupPolicy() CleanupPolicy {
	if len(t.partitions) == 0 {
		return CleanupDelete
	}
	return CleanupPolicy(t.partitions[0].policy.Load())
}

// parseStoredPolicy reads topicMeta.CleanupPolicy: absent is delete.
func parseStoredPolicy(s string) (CleanupPolicy, error) {
	if s == "" {
		return CleanupDelete, nil
	}
	return ParseCleanupPolicy(s)
}
