package sink

import (
	"context"
	"fmt"
	"slices"

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
// the log's flush policy.
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
type LogSink struct {
	t   *log.Topic
	cfg logConfig
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

// Write appends recs in order with the topic's Append, which keeps the order
// of records within each partition. With [Synced] it then syncs every
// partition it wrote to, in partition order.
//
// On failure it stops at the first record that could not be appended and
// returns a [*TopicError]; the records before it stay appended, so a retry of
// the whole batch writes them again (at-least-once). A record larger than the
// topic's segment size fails with an error wrapping log.ErrRecordTooLarge. A
// nil topic is [ErrNilTopic].
func (s *LogSink) Write(ctx context.Context, recs []log.Record) error {
	if s.t == nil {
		return ErrNilTopic
	}
	return appendRecords(ctx, s.t, s.cfg, recs, func(i int) string {
		return fmt.Sprintf("appending record %d of %d", i+1, len(recs))
	})
}

// appendRecords appends recs to t in order and, when cfg says Synced, syncs
// every partition written, in partition order. what(i) describes record i in
// the error of a failed append.
func appendRecords(ctx context.Context, t *log.Topic, cfg logConfig, recs []log.Record, what func(i int) string) error {
	var written []int32 // partitions appended to, for Synced
	for i, r := range recs {
		p, _, err := t.Append(ctx, r)
		if err != nil {
			return &TopicError{
				Topic:     t.Name(),
				Partition: -1,
				Err:       fmt.Errorf("%s: %w", what(i), err),
			}
		}
		if cfg.synced && !slices.Contains(written, p) {
			written = append(written, p)
		}
	}
	slices.Sort(written)
	for _, id := range written {
		if err := syncPartition(t, id); err != nil {
			return &TopicError{Topic: t.Name(), Partition: id, Err: err}
		}
	}
	return nil
}

// syncPartition forces partition id of t to disk.
func syncPartition(t *log.Topic, id int32) error {
	p, err := t.Partition(id)
	if err != nil {
		return err
	}
	if err := p.Sync(); err != nil {
		return fmt.Errorf("syncing: %w", err)
	}
	return nil
}
