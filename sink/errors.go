package sink

import (
	"errors"
	"fmt"
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
