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

// ErrNoTransaction is wrapped by the error of a [KafkaSink] asked to do
// what only its transactions do: Save of a position (a transactional sink
// writes positions only in EndTransaction), BeginTransactions or Load of a
// sink without [KafkaTransactionalID], EndTransaction with none open.
var ErrNoTransaction = errors.New("sink: no Kafka transaction")
