package stream

import (
	"errors"
	"fmt"
)

// ErrAlreadyRun is returned by [Stream.Run] when Run was already called on
// the same pipeline: on this Stream, or on one derived from the same [From]
// (a pipeline reads its source once).
var ErrAlreadyRun = errors.New("stream: Run already called on this pipeline")

// ErrDeadline is wrapped, together with context.DeadlineExceeded, by the
// error [Stream.Run], [ConsumeForever] and [Forever] return when their
// context's deadline (context.WithTimeout, context.WithDeadline) stopped
// them before their sources ended. A deadline is not a shutdown: work was
// cut short, so a test whose timeout expires fails instead of passing.
// Cancelling the context (its CancelFunc, a signal) is the shutdown and
// returns nil. The positions of what finished are saved all the same.
var ErrDeadline = errors.New("stream: stopped by the context's deadline")

// ErrPermanent marks a source failure that retrying cannot cure: the log
// was closed under the source, the partition does not exist, the data is
// corrupt. [ConsumeForever] returns such a failure at once instead of
// backing off and resuming. Sources mark an error with [Permanent].
var ErrPermanent = errors.New("stream: permanent source failure")

// Permanent returns err marked as permanent: errors.Is(result, ErrPermanent)
// and errors.Is(result, err) both hold, and the message is err's. nil stays
// nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

type permanentError struct{ err error }

func (e permanentError) Error() string   { return e.err.Error() }
func (e permanentError) Unwrap() []error { return []error{ErrPermanent, e.err} }

// errNilSource is returned by Run when From was given a nil source.
var errNilSource = errors.New("stream: From was given a nil source")

// Stage names carried by [RecordError.Stage].
const (
	StageMap     = "map"     // Stream.Map
	StageFilter  = "filter"  // Stream.Filter
	StageTap     = "tap"     // Stream.Tap, and the handler of ConsumeForever
	StageSink    = "sink"    // Stream.To
	StageMapTo   = "mapto"   // MapTo
	StageFlatMap = "flatmap" // FlatMap
	StageBatch   = "batch"   // Batch
)

// ErrReusedBytes is returned by [Stream.Run] for a pipeline whose source
// reuses its values' memory from one Read to the next ([BytesReuser], as
// source.ReuseBytes makes it) and that has a stage holding values past the
// next Read (Parallel, KeyOrdered, Batch, or To over an [AsyncSink], which
// sends from the values' memory until acknowledged): those values would
// change under the stage.
var ErrReusedBytes = errors.New("stream: a source that reuses its bytes between reads cannot feed Parallel, KeyOrdered, Batch or asynchronous sink stages")

// ErrNotRunning is returned by [Stream.Checkpoint] when Run is not running.
var ErrNotRunning = errors.New("stream: the pipeline is not running")

// RecordError is returned by [Stream.Run] when a stage function or a sink
// fails. It names the stage and the lineage of the record that failed (for a
// sink, the first record of the batch whose Write failed), and wraps the
// function's error: errors.Is(err, handlerErr) holds for the error Run
// returns. The positions of the failed batch are not saved.
type RecordError struct {
	Stage     string // the stage's name: StageMap, StageFilter, ... or what Name gave it
	Topic     string // "" when the record has no lineage
	Partition int32
	Offset    int64
	Err       error // the error the stage function or sink returned
}

// Error reports the stage, the record and the cause, as in
// "stream: map failed on events/0 at offset 37: boom".
func (e *RecordError) Error() string {
	if e.Topic == "" {
		return fmt.Sprintf("stream: %s failed: %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("stream: %s failed on %s/%d at offset %d: %v", e.Stage, e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns the stage function's or sink's error.
func (e *RecordError) Unwrap() error { return e.Err }

// DeadLetterError is the error of a [DeadLetter] write that failed: the
// dead-letter sink refused the record a stage's function failed on (for a
// sink stage, the failed batch). It stops the pipeline: [Stream.Run]
// returns it, and the stage's [OnError] hooks are called with it as the
// Failure's Err after the call with the function's own error, so a hook
// tells the two apart with errors.As. It names the stage and the record
// (topic, partition, offset: those of Cause) and wraps both errors:
// errors.Is holds for the dead-letter sink's error and for the function's,
// and errors.As finds Cause, a [*RecordError].
type DeadLetterError struct {
	Cause *RecordError // the failure being dead-lettered: stage, record and the function's error
	Err   error        // the error the dead-letter sink's Write returned
}

// Error reports the failure and the dead-letter sink's error, as in
// "stream: dead-letter write for stream: map failed on events/0 at offset
// 37: boom failed: disk full".
func (e *DeadLetterError) Error() string {
	return fmt.Sprintf("stream: dead-letter write for %v failed: %v", e.Cause, e.Err)
}

// Unwrap returns the dead-letter sink's error and the failure it was
// writing.
func (e *DeadLetterError) Unwrap() []error { return []error{e.Err, e.Cause} }

// SourceError is returned by [Stream.Run] when the source's Read fails with
// anything but io.EOF, and by [ConsumeForever]'s OnSourceError hook for a
// failed Read or Resume. It tells a source failure, which a restart from the
// last checkpoint can cure, from a handler failure, which it cannot.
type SourceError struct {
	Err error // the error Read or Resume returned
}

// Error reports the source's error, as in "stream: source failed: connection reset".
func (e *SourceError) Error() string { return "stream: source failed: " + e.Err.Error() }

// Unwrap returns the source's error.
func (e *SourceError) Unwrap() error { return e.Err }
