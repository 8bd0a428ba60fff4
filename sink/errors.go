package sink

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrNilTopic is returned by [LogSink.Write] when the sink was built by [Log]
// with a nil *log.Topic.
var ErrNilTopic = errors.New("sink: nil topic")

// ErrNilFunc is returned by the Write of a sink built by [Func] with a nil
// function.
var ErrNilFunc = errors.New("sink: nil func")

// ErrNilWriter is returned by the Write of a sink built by [Lines] with a nil
// io.Writer.
var ErrNilWriter = errors.New("sink: nil writer")

// ErrNoTransaction is wrapped by the error of a sink asked to do what only
// its stream.ExactlyOnce transactions do. A [LogSink] used as a checkpoint
// store: Save always, SaveState and EndTransaction before
// BeginTransactions. A [KafkaSink]: Save of a position (a transactional
// sink writes positions only in EndTransaction), BeginTransactions or Load
// of a sink without [KafkaTransactionalID], EndTransaction with none open.
var ErrNoTransaction = errors.New("sink: no transaction: positions and state are kept only in stream.ExactlyOnce transactions")

// ErrCommittedLost is wrapped by BeginTransactions' error when a partition
// of the topic ends below the end its last committed transaction gave it:
// committed records are gone (a power loss without [Synced], a topic
// truncated or replaced by hand), and the positions committed with them
// point past inputs whose results are lost. The error names the partition
// and both offsets. Nothing is changed; recovering is the operator's
// choice (deleting the TransactionFile starts the transactions again from
// the topic as it is, and the inputs from the pipeline's start).
var ErrCommittedLost = errors.New("sink: committed records of the log topic are gone")

// TopicError is the error a [LogSink] returns when appending to or syncing its
// topic fails. It names the topic and, when known, the partition, and wraps
// the cause, so errors.Is sees through it (for example to
// log.ErrRecordTooLarge, log.ErrReadOnly or log.ErrClosed).
type TopicError struct {
	Topic     string // the topic written to
	Partition int32  // the partition that failed; -1 when not known
	Err       error  // the cause
}

// Error returns "sink: topic T partition P: cause", or "sink: topic T: cause"
// when the partition is not known.
func (e *TopicError) Error() string {
	if e.Partition < 0 {
		return fmt.Sprintf("sink: topic %s: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("sink: topic %s partition %d: %v", e.Topic, e.Partition, e.Err)
}

// Unwrap returns the cause.
func (e *TopicError) Unwrap() error { return e.Err }

// ErrFenced is wrapped by the errors of a transactional [KafkaSink]
// ([KafkaTransactionalID]) once a newer producer with the same
// transactional id began its transactions: Kafka fenced this one, whose
// open transaction was aborted and which can never commit again. The
// sink's BeginTransactions, EndTransaction and writes return it from then
// on; a process that gets it should stop, since another took its place.
var ErrFenced = errors.New("sink: fenced: a newer producer with the same transactional id took over")

// ErrRecordTooLarge is wrapped, through a [*RecordTooLargeError], by the
// error of a record Kafka can never take: [KafkaSink.CheckSize]'s, and
// the [*ProduceError] of a [KafkaSink] write. A record is too large when,
// as a record batch of its own ([KafkaRecordBytes]), it is larger than the
// producer's limit ([KafkaMaxRecordBytes]: franz-go's
// kgo.ProducerBatchMaxBytes, 1,000,012 bytes by default), or when the broker refused its batch as too large
// (MESSAGE_TOO_LARGE, kerr.MessageTooLarge: the topic's max.message.bytes,
// or the broker's message.max.bytes, is below the producer's limit).
// Retrying cannot cure either: the write fails at once, and the stage's
// failure policy decides (stop by default, stream.Skip, stream.DeadLetter;
// see [KafkaSink.CheckSize] to apply it to the one record).
var ErrRecordTooLarge = errors.New("sink: record too large for Kafka")

// RecordTooLargeError gives the sizes behind [ErrRecordTooLarge]. It is
// the cause a [*ProduceError] wraps, which names the Kafka topic and the
// record's source topic, partition and offset.
type RecordTooLargeError struct {
	Bytes    int   // the record as a record batch of its own, as franz-go counts it (KafkaRecordBytes)
	MaxBytes int   // the producer's limit for the topic (KafkaSink.MaxRecordBytes)
	Err      error // the broker's or franz-go's refusal (kerr.MessageTooLarge); nil when the sink refused the record before sending it
}

// Error returns "sink: record too large for Kafka: N bytes as a record
// batch of its own, over the producer's limit of M bytes (...)", or, when
// the broker or franz-go refused it, the sizes and that refusal.
func (e *RecordTooLargeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%v: %d bytes as a record batch of its own, over the producer's limit of %d bytes "+
			"(raise it with sink.KafkaMaxRecordBytes, up to what the topic's max.message.bytes allows)", ErrRecordTooLarge, e.Bytes, e.MaxBytes)
	}
	return fmt.Sprintf("%v: %d bytes as a record batch of its own, the producer's limit %d bytes "+
		"(a refusal by the broker means the topic's max.message.bytes or the broker's message.max.bytes is lower): %v",
		ErrRecordTooLarge, e.Bytes, e.MaxBytes, e.Err)
}

// Unwrap returns ErrRecordTooLarge and the refusal, or, when the sink
// refused the record itself, kerr.MessageTooLarge (what franz-go would
// have refused it with): errors.Is holds for both sentinels either way.
func (e *RecordTooLargeError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrRecordTooLarge, kerr.MessageTooLarge}
	}
	return []error{ErrRecordTooLarge, e.Err}
}
