package sink

import (
	"context"
	"fmt"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// LogOption configures a [LogSink]; pass options to [Log].
type LogOption interface {
	applyLog(*logConfig)
}

// logConfig holds a LogSink's settings; defaultLogConfig lists every default.
type logConfig struct {
	synced bool // Synced: sync every partition written before Write returns
}

func defaultLogConfig() logConfig { return logConfig{synced: false} }

// logOptionFunc adapts a closure to LogOption.
type logOptionFunc func(*logConfig)

func (f logOptionFunc) applyLog(c *logConfig) { f(c) }

// Synced makes Write call Sync on every partition it appended to before it
// returns, so the records are on disk, not only in the page cache, when Write
// returns. Use it when a checkpoint saved after the write must be backed by
// durable output (a relay from one topic to another). The default is off:
// Write returns once the bytes are in the page cache, and durability follows
// the log's flush policy. Under stream.ExactlyOnce, with the sink its
// transactor, the sync is made once per transaction, of every partition it
// wrote, before the commit (see [LogSink.EndTransaction]), so that a
// committed transaction survives a power loss too.
func Synced() LogOption {
	return logOptionFunc(func(c *logConfig) { c.synced = true })
}

// LogSink appends records to a topic of a [log.Log] as a
// stream.Sink[log.Record]. Build it with [Log].
//
// Each record goes to the partition the topic's partitioner picks from its
// Key: Kafka's murmur2 partitioner for a non-nil key (so a key lands in the
// same partition number here and in Kafka, see log.KafkaPartition), round-robin
// for a nil key. An empty, non-nil key is a key. The record's Topic, Partition
// and Offset, set when it was read, are ignored; a zero Timestamp means now.
//
// A LogSink is safe for concurrent use as far as the topic's Append is.
//
// # Exactly once
//
// A LogSink is also a stream.Transactor, a stream.TransactionalSink and a
// checkpoint.StateStore: checkpointed with itself under
// stream.ExactlyOnce, it runs the pipeline's transactions, and each
// result is in its topic once across crashes (see the package doc,
// "Exactly once into the log", and [LogSink.BeginTransactions]).
type LogSink struct {
	t   *log.Topic
	cfg logConfig
	txn logTxn // log_txn.go: the transactions under stream.ExactlyOnce
}

// The interface a LogSink implements.
var _ stream.Sink[log.Record] = (*LogSink)(nil)

// Log returns a sink appending to t. The topic, and the log it belongs to,
// stay the caller's: the sink never closes them. t must come from a log opened
// for writing; appends to a read-only log fail with log.ErrReadOnly.
func Log(t *log.Topic, opts ...LogOption) *LogSink {
	cfg := defaultLogConfig()
	for _, o := range opts {
		if o != nil {
			o.applyLog(&cfg)
		}
	}
	return &LogSink{t: t, cfg: cfg}
}

// Write appends recs with the topic's AppendBatchAck: the records are
// grouped by the partition the topic's partitioner picks (keeping their
// order within each partition, round-robin for nil keys as one Append per
// record would do) and each group is appended with one call. With [Synced]
// every partition written is synced before Write returns (the groups are
// appended with log.AckSynced, so one sync, shared with the partition's
// concurrent appenders, covers each group).
//
// On failure it returns a [*TopicError] and nothing after the failing
// partition's group is appended; the groups of lower partitions stay
// appended, so a retry of the whole batch writes them again
// (at-least-once). A record larger than the topic's segment size fails the
// whole batch, before anything is appended, with an error wrapping
// log.ErrRecordTooLarge. A nil topic is [ErrNilTopic].
//
// Once the sink runs transactions (stream.ExactlyOnce, see
// [LogSink.BeginTransactions]), Write appends without syncing: with
// Synced, EndTransaction syncs every partition the transaction wrote once,
// before it commits, instead of each Write.
func (s *LogSink) Write(ctx context.Context, recs []log.Record) error {
	if s.t == nil {
		return ErrNilTopic
	}
	cfg := s.cfg
	if s.transactional() {
		cfg.synced = false // synced at the commit
	}
	return appendRecords(ctx, s.t, cfg, recs, fmt.Sprintf("appending a batch of %d records", len(recs)))
}

// appendRecords appends recs to t with one Topic.AppendBatchAck (one
// Partition.Append per partition), with AckSynced when cfg says Synced, so
// every partition written is synced before it returns. what describes the
// batch in the error of a failed append.
func appendRecords(ctx context.Context, t *log.Topic, cfg logConfig, recs []log.Record, what string) error {
	ack := log.Ack(0) // the log's default
	if cfg.synced {
		ack = log.AckSynced
	}
	if err := t.AppendBatchAck(ctx, ack, recs); err != nil {
		return &TopicError{Topic: t.Name(), Partition: -1, Err: fmt.Errorf("%s: %w", what, err)}
	}
	return nil
}
