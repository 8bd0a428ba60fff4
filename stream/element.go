package stream

import (
	"context"

	"github.com/strom-dev/strom/checkpoint"
)

// Element is one value moving through a pipeline with its lineage.
//
// The lineage (Topic, Partition, Offset, Epoch) is set by the source and
// kept by every stage: a Map or MapTo output element has the lineage of its
// input. Run checkpoints by lineage, so an element whose Topic is "" is
// handled like any other but never moves a checkpoint.
type Element[T any] struct {
	Value     T
	Topic     string // "" = no lineage (never checkpointed)
	Partition int32
	Offset    int64
	// Epoch is the log epoch of the record (log.Record.Epoch), saved with
	// the position of the batch's last record so a resume can detect offsets
	// reused after a crash recovery. Sources without epochs set
	// checkpoint.NoEpoch (-1).
	Epoch int32
	// Timestamp is the record's timestamp in milliseconds since the Unix
	// epoch (log.Record.Timestamp, a Kafka record's timestamp), set by the
	// source and kept by every stage like the lineage: the default event
	// time of [Window]. 0 when the source has none (lines of a file, a
	// slice).
	Timestamp int64

	// owner is told when the element is finished (or split): the tracker of
	// its source partition, or the group of a batch it went into. nil for
	// an element without lineage. Set by Run; sources leave it alone.
	owner acker
}

// acker is what an element reports its completion to: a
// *checkpoint.PartitionTracker, or a *group (a batch's members).
type acker interface {
	Done(offsets ...int64)
	Split(offset int64, n int)
}

// Source yields batches of elements to a pipeline.
//
// Read returns the next batch. It may block until records are available and
// must return promptly, with ctx.Err() (possibly wrapped), once ctx is done. A
// batch may be empty; Run then simply reads again. At a clean end Read returns
// io.EOF: sources should return (batch, nil) and then (nil, io.EOF), but a
// final non-empty batch returned together with io.EOF is handled before the
// pipeline ends. Any other error is a source failure: the elements returned
// with it are discarded (they are read again after a resume, which is what
// at-least-once needs) and Run returns the error as a [*SourceError].
//
// Within a topic-partition, Read must return offsets in increasing order.
// Run registers every element with lineage in the pipeline's completion
// tracker (checkpoint.Tracker) as it is read, and saves a partition's
// position only up to the lowest offset not yet finished.
//
// The returned slice is the pipeline's until the next call of Read: a
// source may reuse it then (stages that keep elements longer copy them).
// The values in it (for example a record's bytes) must stay valid for as
// long as the pipeline holds them, which with parallel or batching stages
// is after the next Read.
//
// Close releases what the source holds. Run calls it exactly once, when it
// returns, whatever the outcome. A source that implements [Resumer] may be
// resumed after Close.
type Source[T any] interface {
	Read(ctx context.Context) ([]Element[T], error)
	Close() error
}

// Resumer is implemented by sources that can restart from a checkpoint store
// (used by ConsumeForever at start and after every source failure).
//
// Resume positions the source at the position saved in store for each
// topic-partition it reads (the next offset to read), or at the source's own
// default start for a partition never saved, and makes the source readable
// again if it was closed: [ConsumeForever] calls Resume before the first Read
// and again after a failed run has closed the source. Resume must return the
// store's error, not start from a default, when Load fails: a checkpoint that
// cannot be read (an error wrapping [checkpoint.ErrCorrupt]) must never turn
// into a silent replay from the beginning or a skip to the end.
type Resumer interface {
	Resume(ctx context.Context, store checkpoint.Store) error
}

// Sink receives batches of values.
//
// Write is called once per batch with the batch's values in order, never with
// an empty slice, and must not keep values after it returns. It returns nil
// only when every value is handled (written, acknowledged, as durable as the
// sink promises): Run saves the positions of the batch after Write returns.
// An error stops the pipeline and the batch's positions are not saved, so the
// whole batch is delivered again after a restart: a sink that wrote part of
// the batch before failing sees that part twice.
type Sink[T any] interface {
	Write(ctx context.Context, values []T) error
}

// TopicIdentifier is implemented by sources that know the identity of the
// topics they read (source.Partition and source.Topic give log.Topic.ID).
// Run asks it, on the source's goroutine after each Read, for the topic ID
// of each topic-partition in the batch, and saves that ID with the
// partition's positions (checkpoint.Position.TopicID), so that a position
// is not trusted on a topic deleted and created again under the same name.
// The zero ID means unknown, and is saved as no ID.
type TopicIdentifier interface {
	TopicID(topic string, partition int32) checkpoint.TopicID
}

// BytesReuser is implemented by sources that may reuse the memory their
// values point into from one Read to the next (source.ReuseBytes). Run
// refuses such a source, with [ErrReusedBytes], in a pipeline with a stage
// that holds values past the next Read: Parallel, KeyOrdered, Batch, To
// over an [AsyncSink].
type BytesReuser interface {
	ReusesBytes() bool
}
