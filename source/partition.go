package source

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// DefaultMaxBytes is the default upper bound, in bytes of record frames, on
// one batch returned by [PartitionSource.Read]: 256 KiB. Override it with
// [MaxBytes]. Measured with internal/bench BenchmarkThreeFromLog (three
// sequential stages over 64 B records, 2-core machine): 256 KiB batches
// ran at 4.9 to 5.1 M records/s, 1 MiB ones at 4.5 to 4.7 M, 64 KiB ones
// at 5.1 M with 3.5x the allocations: a batch of about 2,500 elements
// stays in the CPU cache from one stage to the next, one of 10,000 does
// not.
const DefaultMaxBytes = 256 << 10

// PartitionOption configures a [PartitionSource]; pass options to [Partition].
type PartitionOption interface {
	applyPartition(*partitionConfig)
}

// partitionConfig holds a PartitionSource's settings; defaultPartitionConfig
// lists every default.
type partitionConfig struct {
	replay   bool // Replay: end with io.EOF at the high watermark seen at open
	maxBytes int  // MaxBytes: batch size bound in bytes

	reset   ResetPolicy // OnOutOfRange: below the log start offset (reset.go)
	onReset func(Reset) // OnReset: told of every reset; nil for none

	reuseBytes bool // ReuseBytes: records alias one buffer, valid until the next Read

	readCommitted bool // ReadCommitted: only records below the committed end (committed.go)
}

func defaultPartitionConfig() partitionConfig {
	return partitionConfig{replay: false, maxBytes: DefaultMaxBytes, reset: ResetEarliest}
}

// Option is an option that both [Partition] and [Topic] accept: [Replay],
// [MaxBytes], [OnOutOfRange] and [OnReset]. Given to Topic it applies to
// every partition the topic source reads.
type Option interface {
	PartitionOption
	TopicOption
}

// sharedOption adapts a closure over the per-partition settings to Option.
type sharedOption func(*partitionConfig)

func (f sharedOption) applyPartition(c *partitionConfig) { f(c) }
func (f sharedOption) applyTopic(c *topicConfig)         { f(&c.part) }

// Replay makes the source end: Read returns io.EOF once it reaches the high
// watermark as it was when the source opened (see log.Partition.Replay).
// Records appended after that are not returned. A replay reads up to two
// batches ahead of Read on a goroutine of its own (not with [ReuseBytes]
// or [ReadCommitted]; partition_readahead.go says why and what it buys):
// a batch read before retention deleted its segment is still returned. Without this option the source
// follows the partition and never ends: Read waits for new records until its
// context is cancelled (see log.Partition.Follow).
func Replay() Option {
	return sharedOption(func(c *partitionConfig) { c.replay = true })
}

// MaxBytes bounds one batch returned by Read to about n bytes of records,
// overriding the default of [DefaultMaxBytes] (256 KiB). A batch always holds at
// least one record when one is available, even if that record alone is
// larger. n <= 0 keeps the default.
func MaxBytes(n int) Option {
	return sharedOption(func(c *partitionConfig) {
		if n > 0 {
			c.maxBytes = n
		}
	})
}

// ReuseBytes makes a [PartitionSource] read every batch into one buffer it
// reuses, instead of a new buffer per batch: a record's Key, Value and
// headers are then valid only until the next Read. That is safe in a
// pipeline whose stages are all sequential (Map, Filter, Tap, MapTo,
// FlatMap, To), which has finished a batch before it reads the next, and
// only when no stage function or sink keeps a record's bytes after it
// returns. Run refuses it with [stream.ErrReusedBytes] in a pipeline with
// a Parallel, KeyOrdered or Batch stage, or before an asynchronous sink
// such as sink.Kafka, which hold records past the next Read. It saves the
// allocation of the batch's bytes (a replay of 64 B records allocated 120
// bytes per record without it; see internal/bench BenchmarkThreeFromLog for
// the speed it buys). The default
// is off: records stay valid for as long as anything holds them.
func ReuseBytes() PartitionOption {
	return sharedOption(func(c *partitionConfig) { c.reuseBytes = true })
}

// ReusesBytes reports whether the source was built with [ReuseBytes]: the
// pipeline checks it (stream.BytesReuser).
func (s *PartitionSource) ReusesBytes() bool { return s.cfg.reuseBytes && s.reuse }

// PartitionSource reads one partition of a topic of a [log.Log] as a
// stream.Source[log.Record]. Build it with [Partition].
//
// It opens lazily: nothing touches the log until the first Read. Each element
// it returns carries the record as its Value and the record's Topic, Partition
// and Offset as its lineage, so a checkpointing pipeline saves positions of
// this partition.
//
// A PartitionSource is not safe for concurrent use: call Read, Resume and
// Close from one goroutine at a time (a blocked Read is ended by cancelling
// its context, not by Close).
type PartitionSource struct {
	lg        *log.Log
	topic     string
	partition int32
	start     Start // as configured; used again by Resume when the store has nothing
	cfg       partitionConfig

	next    Start                        // where the next open starts
	reader  *log.Reader                  // nil while closed
	pos     int64                        // next offset Read will return; -1 while unknown
	pending error                        // an error that arrived with a batch, returned by the next Read
	recs    []log.Record                 // scratch for the reader's batch
	elems   []stream.Element[log.Record] // the batch Read returns, reused by the next Read when reuse is set
	// reuse is set for a source handed to a pipeline, which owns a batch
	// only until its next Read; a TopicSource reads ahead, holding batches
	// past the next Read, so its partition sources allocate each batch.
	reuse bool
	// ahead is the goroutine reading one batch ahead of Read (nil while
	// none runs; partition_readahead.go), fetchedTo the reader's position
	// after the batch it last handed over.
	ahead     *readAhead
	fetchedTo int64

	resets atomic.Int64 // positions moved by the reset policy (reset.go)

	opened  atomic.Pointer[log.Partition] // the partition once opened, for HighWatermark (telemetry.go)
	topicOf atomic.Pointer[log.Topic]     // the topic once opened, for TopicID
	// For CaughtUp (caughtup.go): the position the last open started at,
	// and whether Read has returned a record since the source was made.
	openedAt atomic.Int64
	returned atomic.Bool
	// replayEnd is at or above where a replay ends (the committed end a
	// ReadCommitted replay set at open; else the high watermark read after
	// it opened); -1 when following. For CaughtUp and
	// TopicSource.PendingPartitions.
	replayEnd atomic.Int64
	// hwmSeen is the greatest high watermark CaughtUp has read of the
	// partition (high watermarks only grow).
	hwmSeen atomic.Int64

	// ReadCommitted (committed.go): the topic's folder, where its
	// transaction file is; the topic's partition count, which the file
	// must give the ends of; the committed end last read (-1: not known,
	// or no file); the wake of a wait for the next commit. Where a
	// ReadCommitted replay ends is replayEnd above.
	dir       string
	nparts    int
	committed int64
	wake      chan struct{}
}

// The interfaces a PartitionSource implements.
var (
	_ stream.Source[log.Record] = (*PartitionSource)(nil)
	_ stream.Resumer            = (*PartitionSource)(nil)
	_ stream.TopicIdentifier    = (*PartitionSource)(nil)
)

// TopicID returns the ID of the topic the source reads (log.Topic.ID), once
// the first Read opened it, for topic-partition of the source; the zero ID
// (unknown) before, and for any other topic-partition. The pipeline saves
// it with the partition's positions (stream.TopicIdentifier), so that a
// later resume tells a topic deleted and created again from this one. Safe
// for concurrent use.
func (s *PartitionSource) TopicID(topic string, partition int32) checkpoint.TopicID {
	t := s.topicOf.Load()
	if t == nil || topic != s.topic || partition != s.partition {
		return checkpoint.TopicID{}
	}
	return t.ID()
}

// Partition returns a source reading partition partition of topic from lg,
// beginning at start (see [Earliest], [Latest], [At], [FromStore]). By default
// it follows the partition forever; with [Replay] it ends with io.EOF.
//
// The log is the caller's: the source never closes it. Reading takes no
// writer lock, so the log may be the process's one read-write Log (which
// also writes other topics) or one opened with log.ReadOnly(); either
// follows a topic another process writes.
// Errors (unknown topic, partition out of range, start out of range, a failing
// store) are returned by the first Read, as a [*PartitionError].
func Partition(lg *log.Log, topic string, partition int32, start Start, opts ...PartitionOption) *PartitionSource {
	cfg := defaultPartitionConfig()
	for _, o := range opts {
		if o != nil {
			o.applyPartition(&cfg)
		}
	}
	s := newPartitionSource(lg, topic, partition, start, cfg)
	s.reuse = true
	return s
}

// newPartitionSource returns a closed PartitionSource with settings cfg.
func newPartitionSource(lg *log.Log, topic string, partition int32, start Start, cfg partitionConfig) *PartitionSource {
	return &PartitionSource{
		lg:        lg,
		topic:     topic,
		partition: partition,
		start:     start,
		cfg:       cfg,
		next:      start,
		pos:       -1,
	}
}

// Topic returns the topic the source reads.
func (s *PartitionSource) Topic() string { return s.topic }

// PartitionID returns the partition the source reads.
func (s *PartitionSource) PartitionID() int32 { return s.partition }

// Position returns the offset of the next record Read will return (what a
// checkpoint would store once everything before it is handled), or -1 while
// that is not yet known: before the first Read resolves the start, and after a
// Resume that found no saved position.
func (s *PartitionSource) Position() int64 { return s.pos }

// Read returns the next batch of records, each as an element whose lineage is
// the record's topic, partition and offset. It opens the partition on the
// first call (and on the first call after Close or Resume).
//
// In follow mode (the default) Read waits until at least one record is
// available or ctx is done; in [Replay] mode it returns nil, io.EOF once the
// high watermark seen at open is reached, and io.EOF again on every later
// call. A done context returns ctx.Err(); both are returned unwrapped. Any
// other failure is a [*PartitionError] naming the topic and partition.
func (s *PartitionSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if err := s.pending; err != nil {
		s.pending = nil
		return nil, err
	}
	// The []Record is scratch reused by every Read (its records are copied
	// into the elements); their bytes are one new buffer per batch, so they
	// stay valid however long the pipeline keeps them.
	var recs []log.Record
	var err error
	for {
		if s.reader == nil {
			if err := s.open(ctx); err != nil {
				return nil, err
			}
		}
		committed := s.cfg.readCommitted && !s.cfg.replay
		if committed {
			if err := s.bound(ctx); err != nil {
				return nil, s.wrap(err)
			}
		}
		if s.readsAhead() {
			return s.readAheadBatch(ctx)
		}
		recs, err = s.reader.NextInto(ctx, s.recs[:0], s.cfg.maxBytes)
		for to, ok := s.resetOnOutOfRange(err); ok; to, ok = s.resetOnOutOfRange(err) {
			s.reader.SetPosition(to) // retention passed the position: apply the policy
			s.pos = to
			recs, err = s.reader.NextInto(ctx, s.recs[:0], s.cfg.maxBytes)
		}
		s.recs = recs
		if !committed {
			break
		}
		if len(recs) == 0 && errors.Is(err, io.EOF) {
			continue // at the committed end: wait for the next commit
		}
		if s.committed >= 0 || len(recs) == 0 {
			break
		}
		// Read with no end: is there a transaction file now?
		keep, reopen, cerr := s.uncommittedSince(recs)
		if cerr != nil {
			return nil, s.wrap(cerr)
		}
		if !reopen {
			break
		}
		// Back to the first uncommitted record, keeping the reader: with
		// none (a reopen) an open that failed would leave the source
		// without one, where a TopicSource's Close keeps the start it has
		// (past records it read ahead but Read never returned).
		s.reader.SetPosition(recs[keep].Offset)
		s.pos = recs[keep].Offset
		recs, s.recs = recs[:keep], recs[:keep]
		if keep > 0 {
			s.returned.Store(true)
			return s.elements(recs), nil
		}
	}
	if len(recs) > 0 {
		s.pos = s.reader.Position()
		s.returned.Store(true)
	}
	if err != nil {
		err = s.wrap(err)
		if len(recs) == 0 {
			return nil, err
		}
		s.pending = err
	}
	return s.elements(recs), nil
}

// readAheadBatch is Read's path when a goroutine reads ahead
// (partition_readahead.go): the next batch it read, the reset policy
// applied as Read applies it.
func (s *PartitionSource) readAheadBatch(ctx context.Context) ([]stream.Element[log.Record], error) {
	elems, err := s.fetch(ctx)
	for to, ok := s.resetOnOutOfRange(err); ok; to, ok = s.resetOnOutOfRange(err) {
		// The goroutine returned with the error: the reader is Read's.
		s.reader.SetPosition(to) // retention passed the position: apply the policy
		s.pos = to
		elems, err = s.fetch(ctx)
	}
	if len(elems) > 0 {
		s.pos = s.fetchedTo
		s.returned.Store(true)
	}
	if err != nil {
		err = s.wrap(err)
		if len(elems) == 0 {
			return nil, err
		}
		s.pending = err
	}
	return elems, nil
}

// ready waits, holding nothing, until Read can return without waiting for
// records: a record is there, the end of a replay is reached, or Read has
// an error to report (which it leaves to Read). It returns ctx.Err() when
// ctx ends first. A [TopicSource]'s reading goroutine calls it before it
// reserves a batch's bytes, so a partition with no records holds none of
// the read-ahead budget.
func (s *PartitionSource) ready(ctx context.Context) error {
	if s.pending != nil {
		return nil
	}
	if s.reader == nil {
		if err := s.open(ctx); err != nil {
			return ctx.Err() // Read opens again and reports it
		}
	}
	if s.cfg.readCommitted && !s.cfg.replay {
		if err := s.bound(ctx); err != nil {
			return ctx.Err()
		}
	}
	return s.reader.Wait(ctx)
}

// elements turns a batch of records into the elements Read returns.
func (s *PartitionSource) elements(recs []log.Record) []stream.Element[log.Record] {
	s.elems = s.fill(s.elems, recs)
	return s.elems
}

// fill turns recs into elements in buf, or in a new slice when buf is too
// short or the source does not reuse its batches, and returns them.
func (s *PartitionSource) fill(buf []stream.Element[log.Record], recs []log.Record) []stream.Element[log.Record] {
	// The batch slice is reused from one Read to the next, as the Source
	// contract allows (the records' bytes are new each Read): a new slice
	// per Read was 168 bytes per record, a fifth of what a replay
	// allocated, in internal/bench's BenchmarkThreeFromLog.
	if !s.reuse || cap(buf) < len(recs) {
		buf = make([]stream.Element[log.Record], len(recs))
	}
	elems := buf[:len(recs)]
	for i, r := range recs {
		elems[i] = stream.Element[log.Record]{
			Value:     r,
			Topic:     r.Topic,
			Partition: r.Partition,
			Offset:    r.Offset,
			Epoch:     r.Epoch,
			Timestamp: r.Timestamp,
		}
	}
	return elems
}

// open takes the topic and partition, resolves s.next and creates the reader.
func (s *PartitionSource) open(ctx context.Context) error {
	if s.lg == nil {
		return s.wrap(ErrNilLog)
	}
	t, err := s.lg.Topic(s.topic)
	if err != nil {
		return s.wrap(err)
	}
	p, err := t.Partition(s.partition)
	if err != nil {
		return s.wrap(err)
	}
	from, err := s.next.resolve(ctx, p, t.ID(), s.topic, s.partition)
	if to, ok := s.resetOnOutOfRange(err); ok {
		from, err = to, nil // the start is below the log start offset, or of a topic created again: apply the policy
	}
	if err != nil {
		return s.wrap(err)
	}
	s.dir, s.nparts, s.committed = t.Dir(), t.Partitions(), -1
	var replayEnd int64 = -1
	if s.cfg.readCommitted {
		// The replay's end is taken before the look at the transaction
		// file: when the look finds none, no sink.LogSink had begun when
		// the records below that end were appended (it writes the file
		// before its first append), so they are all committed. Taken
		// after, it could take in the first transaction of a LogSink that
		// began in between.
		hwm := p.HighWatermark()
		ce, found, err := s.committedEnd(s.dir)
		if err != nil {
			return s.wrap(err)
		}
		if found && s.next.kind == startLatest && ce < from {
			from = ce // Kafka's read_committed starts "latest" at the last stable offset
		}
		if s.cfg.replay {
			replayEnd = hwm
			if found && from <= hwm { // above it, the replay's out-of-range error stays
				replayEnd = max(from, min(ce, hwm))
			}
		}
	}
	if s.cfg.replay {
		s.reader = p.Replay(from)
		if replayEnd >= 0 {
			s.reader.SetEnd(replayEnd)
		} else {
			replayEnd = p.HighWatermark() // at or above the end Replay took
		}
	} else {
		s.reader = p.Follow(from)
	}
	s.reader.SetReuseBytes(s.ReusesBytes())
	s.pos = from
	s.openedAt.Store(from)
	s.replayEnd.Store(replayEnd)
	s.hwmSeen.Store(0) // a topic made again starts over
	s.opened.Store(p)
	s.topicOf.Store(t)
	return nil
}

// Resume makes the next Read start at the position saved in store for this
// topic and partition, or at the configured Start when the store has none. It
// drops the current reader, so records already returned but not yet saved are
// read again (at-least-once). stream.ConsumeForever calls it at start and after
// every source failure.
//
// The saved position is checked against the partition's range when the next
// Read opens it (below the log start offset: the [OnOutOfRange] policy;
// above the high watermark: an error), and its topic ID against the
// topic's (another: the [OnOutOfRange] policy, see [FromStore]). A failing store returns its error wrapped in a
// [*PartitionError] and leaves the source as it was; a nil store is
// [ErrNilStore].
func (s *PartitionSource) Resume(ctx context.Context, store checkpoint.Store) error {
	if store == nil {
		return s.wrap(ErrNilStore)
	}
	pos, found, err := store.Load(ctx, s.topic, s.partition)
	if err != nil {
		return s.wrap(err)
	}
	s.closeReader()
	if found {
		s.next, s.pos = saved(pos), pos.Offset
	} else {
		s.next, s.pos = s.start, -1
	}
	return nil
}

// Close releases the reader. It does not close the log, which belongs to the
// caller. The source stays usable: the next Read opens the partition again
// and continues at [PartitionSource.Position], so no record is returned twice
// (unless Resume moves it). Close always returns nil.
func (s *PartitionSource) Close() error {
	s.closeReader()
	return nil
}

// closeReader forgets the reader and any error queued behind a batch; the
// next open continues at the position the reader reached.
func (s *PartitionSource) closeReader() {
	s.stopReadAhead()
	if s.reader != nil {
		s.next = At(s.pos)
	}
	s.reader = nil
	s.pending = nil
}

// rewind drops the reader, like closeReader, but makes the next open
// continue at pos instead of where the reader got to: a [TopicSource] reads
// ahead, and pos is the position after the last record it returned. A
// source without a reader keeps the start it has.
func (s *PartitionSource) rewind(pos int64) {
	s.stopReadAhead()
	if s.reader != nil {
		s.next, s.pos = At(pos), pos
	}
	s.reader = nil
	s.pending = nil
}

// wrap adds the coordinates to err, except for the end of a replay and a done
// context, which callers compare against io.EOF and ctx.Err().
func (s *PartitionSource) wrap(err error) error { return wrapErr(s.topic, s.partition, err) }

// wrapErr adds topic and partition (AllPartitions for the whole topic) to
// err, except for the end of a replay and a done context, which callers
// compare against io.EOF and ctx.Err(). Failures no retry can cure are
// marked stream.Permanent.
func wrapErr(topic string, partition int32, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF):
		return io.EOF
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, log.ErrClosed), errors.Is(err, log.ErrPartitionOutOfRange),
		errors.Is(err, log.ErrInvalidTopic), errors.Is(err, log.ErrCorrupt), errors.Is(err, ErrNilLog),
		errors.Is(err, ErrNoPartitions):
		// Retrying cannot cure these: ConsumeForever returns them at once.
		return stream.Permanent(&PartitionError{Topic: topic, Partition: partition, Err: err})
	case errors.Is(err, ErrTopicRecreated):
		// Nor this, under ResetError: the caller decides what the position
		// of a topic created again means.
		return stream.Permanent(&PartitionError{Topic: topic, Partition: partition, Err: err})
	case aboveEnd(err):
		// Nor this, and retrying would be worse: once appends reached the
		// position the retry would resume there, past records never read.
		return stream.Permanent(&PartitionError{Topic: topic, Partition: partition, Err: err})
	}
	return &PartitionError{Topic: topic, Partition: partition, Err: err}
}

// aboveEnd reports whether err is an out-of-range error for an offset above
// the high watermark: a position that no record of the log reaches (a
// checkpoint edited by hand, or a log recreated or restored from an older
// copy; a crash that lost records is told apart by the saved epoch, see
// log.Partition.ResumeOffset).
func aboveEnd(err error) bool {
	var oor *log.OffsetOutOfRangeError
	return errors.As(err, &oor) && oor.Offset > oor.NextOffset
}
