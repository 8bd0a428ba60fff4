package source

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/stream"
)

// TopicOption configures a [TopicSource]; pass options to [Topic]. Every
// [Option] ([Replay], [MaxBytes], [OnOutOfRange], [OnReset]) is also a
// TopicOption and applies to each partition; [Partitions] and
// [ReadAheadBytes] are TopicOptions only.
type TopicOption interface {
	applyTopic(*topicConfig)
}

// topicConfig holds a TopicSource's settings.
type topicConfig struct {
	part      partitionConfig // the settings of every partition's source
	subset    []int32         // Partitions: the ids to read, as given
	hasSubset bool            // Partitions was given (even with no ids)
	readAhead int64           // ReadAheadBytes: the bytes held read ahead, all partitions together
}

// topicOptionFunc adapts a closure to TopicOption.
type topicOptionFunc func(*topicConfig)

func (f topicOptionFunc) applyTopic(c *topicConfig) { f(c) }

// Partitions makes a [TopicSource] read only the partitions ids of the topic
// instead of all of them. Duplicates are ignored; the source reads them in
// ascending order of id. An id outside the topic's partitions makes Read
// fail with a [*PartitionError] naming it (wrapping
// log.ErrPartitionOutOfRange), and an empty list with [ErrNoPartitions]: an
// empty subset is not taken to mean "all".
func Partitions(ids ...int32) TopicOption {
	ids = slices.Clone(ids)
	return topicOptionFunc(func(c *topicConfig) { c.subset, c.hasSubset = ids, true })
}

// TopicSource reads every partition of a topic of a [log.Log] (or the subset
// chosen with [Partitions]) as one stream.Source[log.Record]. Build it with
// [Topic].
//
// Each partition is read by its own [PartitionSource], so every element
// carries the record as its Value and the record's Topic, Partition, Offset
// and Epoch as its lineage, exactly as from Partition: a checkpointing
// pipeline saves a position per partition. Each batch Read returns holds
// records of one partition only, in offset order; offsets increase per
// partition across batches.
//
// # Fairness
//
// Partitions take turns: a goroutine per partition reads batches ahead, and
// Read returns the next ready batch looking at the partitions round-robin,
// starting after the partition of the batch it returned last. A partition
// with a large backlog therefore gets one batch in turn with every other
// partition that has records, and never starves them. In follow mode Read
// wakes as soon as any partition has records.
//
// # Memory
//
// The bytes of records read ahead of Read, all partitions together, are
// bounded by [ReadAheadBytes] (64 MiB by default), whatever the number of
// partitions: a partition's goroutine reserves [MaxBytes] of that budget
// before it reads a batch, and the budget gets the batch's bytes back when
// Read hands it to the pipeline. A partition also reads at most two
// batches ahead (one queued, one waiting to be queued), so with few
// partitions the bound is about 2 x MaxBytes per partition (512 KiB at the
// default 256 KiB) instead. A partition waiting for records holds none of
// the budget. Partitions wait for room in turn, first come first served,
// so the fairness above holds under the bound.
//
// # Positions and at-least-once
//
// Positions come from what Read returned, not from what was read ahead:
// [TopicSource.Position] is the offset after the last record Read returned
// for a partition. Close and Resume drop the read-ahead, so records read
// ahead but never returned are simply read again. After Close the next Read
// opens every partition again at its position (no record returned twice);
// after Resume at the store's positions (records returned but not yet
// saved are returned again: at-least-once).
//
// # Concurrency
//
// Like every source, a TopicSource is used by one goroutine: call Read,
// Resume and Close from one goroutine at a time. A Read waiting for records
// returns ctx.Err() as soon as its context is done; the reading goroutines
// keep their read-ahead for the next Read. Close stops and waits for all of
// them: none outlives it.
type TopicSource struct {
	lg    *log.Log
	topic string
	start Start
	cfg   topicConfig

	parts []*topicPart       // one per partition read, ascending id; nil until resolved
	turn  int                // index in parts where the next Read starts looking
	wake  chan struct{}      // capacity 1: a partition queued a batch
	run   context.Context    // the reading goroutines' context; nil while none run
	stopc context.CancelFunc // cancels run
	wg    sync.WaitGroup     // the reading goroutines

	resetMu sync.Mutex // serialises the OnReset hook across partitions

	budget  *budget      // ReadAheadBytes, shared by the reading goroutines (readahead.go)
	sending atomic.Int32 // reading goroutines waiting for Read to take their queued batch (tests)

	opened atomic.Pointer[log.Topic]    // the topic once resolved, for HighWatermark (telemetry.go)
	view   atomic.Pointer[[]*topicPart] // parts once resolved, for CaughtUp from other goroutines (caughtup.go)
	// pending are the partitions that had records to read when they
	// opened (PendingPartitions); nil until the first open.
	pending atomic.Pointer[[]stream.TopicPartition]
}

var (
	_ stream.PartitionLister = (*TopicSource)(nil)
	_ stream.TopicIdentifier = (*TopicSource)(nil)
)

// TopicID returns the ID of the topic the source reads (log.Topic.ID), once
// the first Read or Resume opened it, for any partition of it; the zero ID
// (unknown) before, and for another topic. The pipeline saves it with the
// partitions' positions (stream.TopicIdentifier). Safe for concurrent use.
func (s *TopicSource) TopicID(topic string, _ int32) checkpoint.TopicID {
	t := s.opened.Load()
	if t == nil || topic != s.topic {
		return checkpoint.TopicID{}
	}
	return t.ID()
}

// PendingPartitions returns the partitions the source will deliver records
// of (nil before the first Read or Resume): in [Replay] mode those that had
// records between their start and the end when the source opened them,
// when following every partition read. An event-time stream.Window holds
// its watermark back until each of them has delivered an event time (see
// stream.Idleness for partitions that stay empty). Safe for concurrent use.
func (s *TopicSource) PendingPartitions() []stream.TopicPartition {
	if p := s.pending.Load(); p != nil {
		return *p
	}
	return nil
}

// topicPart is the state of one partition of a TopicSource. Only the
// goroutine calling Read touches it; src belongs to the partition's reading
// goroutine while ch is not nil.
type topicPart struct {
	src  *PartitionSource
	pos  int64           // position after the last record Read returned; -1 while unknown
	ch   chan topicBatch // capacity 1; nil while no goroutine reads the partition
	done bool            // replay: the partition reached its end
}

// topicBatch is what a partition's goroutine hands to Read: a batch, its
// bytes held in the budget, and the partition's position after it, or an
// error (io.EOF at the end of a replay), after which the goroutine has
// ended.
type topicBatch struct {
	elems []stream.Element[log.Record]
	bytes int64
	next  int64
	err   error
}

// The interfaces a TopicSource implements.
var (
	_ stream.Source[log.Record] = (*TopicSource)(nil)
	_ stream.Resumer            = (*TopicSource)(nil)
)

// Topic returns a source reading every partition of topic from lg (or those
// chosen with [Partitions]), each beginning at start:
//
//   - [Earliest] and [Latest]: each partition's own log start offset or high
//     watermark when the source opens.
//   - [At](offset): the same offset in every partition; a partition where it
//     is out of range fails or resets as with [Partition] (see [At]). It is
//     meant for partitions of equal length, such as a topic just created;
//     [FromStore] is the usual choice.
//   - [FromStore](store): each partition's own saved position, else its log
//     start offset.
//
// By default it follows every partition and never ends; with [Replay] it
// ends with io.EOF once every partition has reached the high watermark it
// had when the source opened. [MaxBytes] bounds each batch (default
// [DefaultMaxBytes]); [OnOutOfRange] and [OnReset] apply per partition.
//
// The source opens lazily, on its first Read (or Resume), and learns the
// partitions then. The log is the caller's and is never closed by the
// source; reading takes no writer lock, so it may be the process's one
// read-write Log or one opened with log.ReadOnly(). Errors (a nil log, an unknown topic, a partition id out of range,
// a start out of range, a failing store) are returned by Read as a
// [*PartitionError] naming the topic and, where one is at fault, the
// partition.
func Topic(lg *log.Log, topic string, start Start, opts ...TopicOption) *TopicSource {
	cfg := topicConfig{part: defaultPartitionConfig(), readAhead: DefaultReadAheadBytes}
	for _, o := range opts {
		if o != nil {
			o.applyTopic(&cfg)
		}
	}
	s := &TopicSource{lg: lg, topic: topic, start: start, cfg: cfg, wake: make(chan struct{}, 1),
		budget: newBudget(cfg.readAhead)}
	if fn := cfg.part.onReset; fn != nil {
		s.cfg.part.onReset = func(r Reset) { // partitions reset on their own goroutines
			s.resetMu.Lock()
			defer s.resetMu.Unlock()
			fn(r)
		}
	}
	return s
}

// Topic returns the topic the source reads.
func (s *TopicSource) Topic() string { return s.topic }

// Partitions returns the ids of the partitions the source reads, ascending,
// or nil before the source has opened the topic (on the first Read or
// Resume).
func (s *TopicSource) Partitions() []int32 {
	if s.parts == nil {
		return nil
	}
	ids := make([]int32, len(s.parts))
	for i, p := range s.parts {
		ids[i] = p.src.partition
	}
	return ids
}

// Position returns the offset after the last record Read returned from
// partition (what a checkpoint would store once everything before it is
// handled), the resolved start while none has been returned, or -1 while
// that is not known: before the partition opens, after a Resume that found
// no saved position for it, and for a partition the source does not read.
func (s *TopicSource) Position(partition int32) int64 {
	if p := s.part(partition); p != nil {
		return p.pos
	}
	return -1
}

// Resets returns how many times, over all partitions, the source moved a
// position because of its [ResetPolicy]. It may be called from any
// goroutine once the first Read or Resume has returned. A reset met while
// reading ahead counts when it happens; if Close or Resume then drops that
// read-ahead before Read returned the batch after the reset, the reopened
// partition meets the same gap and counts it again.
func (s *TopicSource) Resets() int64 {
	var n int64
	for _, p := range s.parts {
		n += p.src.Resets()
	}
	return n
}

// part returns the state of partition id, or nil.
func (s *TopicSource) part(id int32) *topicPart {
	for _, p := range s.parts {
		if p.src.partition == id {
			return p
		}
	}
	return nil
}

// Read returns the next batch of records of one partition, each as an
// element whose lineage is the record's topic, partition, offset and epoch.
// Partitions take turns (see [TopicSource], "Fairness"). It opens the topic
// and its partitions on the first call, and again after Close or Resume.
//
// In follow mode (the default) Read waits until some partition has records
// or ctx is done; with [Replay] it returns nil, io.EOF once every partition
// has reached the high watermark it had at open, and io.EOF again on every
// later call. A done context returns ctx.Err(); both are returned unwrapped.
// Any other failure, of the topic or of one partition, is a
// [*PartitionError]; batches returned before it stay returned, and the next
// Read tries the failed partition again where it stopped.
func (s *TopicSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.open(ctx); err != nil {
		return nil, err
	}
	for {
		done := 0
		for i := range len(s.parts) {
			k := (s.turn + i) % len(s.parts)
			p := s.parts[k]
			if p.done {
				done++
				continue
			}
			var b topicBatch
			select {
			case b = <-p.ch:
			default:
				continue
			}
			switch {
			case b.err == nil:
				s.turn = k + 1
				p.pos = b.next
				s.budget.release(b.bytes) // the pipeline holds it now
				return b.elems, nil
			case errors.Is(b.err, io.EOF):
				p.ch, p.done = nil, true // its goroutine has ended
				done++
			default:
				s.turn = k + 1
				p.ch = nil // its goroutine has ended; the next Read starts another
				return nil, b.err
			}
		}
		if done == len(s.parts) {
			return nil, io.EOF
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// open resolves the partitions, opens those without a reader (resolving
// their start, with ctx for a store) and starts a reading goroutine for each
// partition that has none and has not ended.
func (s *TopicSource) open(ctx context.Context) error {
	if err := s.resolve(); err != nil {
		return err
	}
	for _, p := range s.parts {
		if p.ch != nil || p.done || p.src.reader != nil {
			continue
		}
		if err := p.src.open(ctx); err != nil {
			return err
		}
		p.pos = p.src.pos
	}
	if s.pending.Load() == nil {
		pending := []stream.TopicPartition{}
		for _, p := range s.parts {
			// A replay delivers what lies between its start and the end;
			// a follow may deliver any partition, one empty now too.
			if lp := p.src.opened.Load(); !s.cfg.part.replay || (lp != nil && !p.done && p.pos >= 0 && p.pos < p.src.replayEndOr(lp)) {
				pending = append(pending, stream.TopicPartition{Topic: s.topic, Partition: p.src.partition})
			}
		}
		s.pending.Store(&pending)
	}
	for _, p := range s.parts {
		if p.ch != nil || p.done {
			continue
		}
		if s.run == nil {
			// Not Read's ctx: a cancelled Read leaves the read-ahead for the next one.
			s.run, s.stopc = context.WithCancel(context.Background())
		}
		p.ch = make(chan topicBatch, 1)
		s.wg.Add(1)
		go s.pump(s.run, p.src, p.ch)
	}
	return nil
}

// resolve takes the topic and builds a PartitionSource per partition to
// read, once.
func (s *TopicSource) resolve() error {
	if s.parts != nil {
		return nil
	}
	if s.lg == nil {
		return wrapErr(s.topic, AllPartitions, ErrNilLog)
	}
	t, err := s.lg.Topic(s.topic)
	if err != nil {
		return wrapErr(s.topic, AllPartitions, err)
	}
	var ids []int32
	if s.cfg.hasSubset {
		if len(s.cfg.subset) == 0 {
			return wrapErr(s.topic, AllPartitions, ErrNoPartitions)
		}
		ids = slices.Clone(s.cfg.subset)
		slices.Sort(ids)
		ids = slices.Compact(ids)
		for _, id := range ids {
			if _, err := t.Partition(id); err != nil {
				return wrapErr(s.topic, id, err)
			}
		}
	} else {
		for id := range int32(t.Partitions()) {
			ids = append(ids, id)
		}
	}
	parts := make([]*topicPart, len(ids))
	for i, id := range ids {
		parts[i] = &topicPart{src: newPartitionSource(s.lg, s.topic, id, s.start, s.cfg.part), pos: -1}
	}
	s.parts = parts
	s.view.Store(&parts)
	s.opened.Store(t)
	return nil
}

// pump reads src until ctx is done or src fails or ends, handing each
// batch to ch and waking Read. At most one batch waits in ch and one in
// hand, and every batch is read under the source's byte budget: it waits
// for records holding nothing, reserves MaxBytes, reads, and keeps of the
// reservation what the batch holds until Read hands the batch on.
func (s *TopicSource) pump(ctx context.Context, src *PartitionSource, ch chan<- topicBatch) {
	defer s.wg.Done()
	reserve := int64(src.cfg.maxBytes)
	for {
		if src.ready(ctx) != nil {
			return // stopping
		}
		if s.budget.acquire(ctx, reserve) != nil {
			return
		}
		elems, err := src.Read(ctx)
		if ctx.Err() != nil {
			return // stopping: what was read ahead is dropped (stop resets the budget)
		}
		n := batchBytes(elems)
		if n <= reserve {
			s.budget.release(reserve - n)
		} else {
			s.budget.grow(n - reserve) // one record above MaxBytes, in memory already
		}
		if err == nil && len(elems) == 0 {
			continue
		}
		b := topicBatch{elems: elems, bytes: n, next: src.pos, err: err}
		select {
		case ch <- b:
		default: // a batch is queued already: wait for Read to take it
			s.sending.Add(1)
			select {
			case ch <- b:
				s.sending.Add(-1)
			case <-ctx.Done():
				s.sending.Add(-1)
				return
			}
		}
		select {
		case s.wake <- struct{}{}:
		default: // Read has a wake-up pending already
		}
		if err != nil {
			return
		}
	}
}

// stop ends the reading goroutines, waits for them, and drops what they
// read ahead: each partition's next open continues after the last record
// Read returned. Partitions that ended are opened again (a replay then
// runs to the high watermark of that new open, as Partition's does).
func (s *TopicSource) stop() {
	if s.run != nil {
		s.stopc()
		s.wg.Wait()
		s.run, s.stopc = nil, nil
		s.budget.reset() // what they reserved and read ahead is dropped
	}
	for _, p := range s.parts {
		p.ch, p.done = nil, false
		p.src.rewind(p.pos)
	}
	select {
	case <-s.wake:
	default:
	}
}

// Resume makes the next Read start each partition at the position saved in
// store for it, or at the configured Start for a partition the store has
// none of. It opens the topic if the source has not yet, stops the reading
// goroutines and drops their read-ahead, so records already returned but
// not yet saved are read again (at-least-once). stream.ConsumeForever calls
// it at start and after every source failure.
//
// Every partition's position is loaded before anything changes: a store
// that fails for any partition returns its error wrapped in a
// [*PartitionError] naming that partition and leaves the source as it was,
// never falling back to a default start. A nil store is [ErrNilStore]. The
// positions are checked against each partition's range when the next Read
// opens it, as with [PartitionSource.Resume].
func (s *TopicSource) Resume(ctx context.Context, store checkpoint.Store) error {
	if store == nil {
		return wrapErr(s.topic, AllPartitions, ErrNilStore)
	}
	if err := s.resolve(); err != nil {
		return err
	}
	type loaded struct {
		pos   checkpoint.Position
		found bool
	}
	got := make([]loaded, len(s.parts))
	for i, p := range s.parts {
		pos, found, err := store.Load(ctx, s.topic, p.src.partition)
		if err != nil {
			return p.src.wrap(err)
		}
		got[i] = loaded{pos, found}
	}
	s.stop()
	for i, p := range s.parts {
		if got[i].found {
			p.src.next, p.src.pos, p.pos = saved(got[i].pos), got[i].pos.Offset, got[i].pos.Offset
		} else {
			p.src.next, p.src.pos, p.pos = s.start, -1, -1
		}
	}
	return nil
}

// Close stops and waits for every reading goroutine and drops what they
// read ahead. It does not close the log, which belongs to the caller. The
// source stays usable: the next Read opens the partitions again, each at
// [TopicSource.Position], so no record is returned twice (unless Resume
// moves them). Close always returns nil.
func (s *TopicSource) Close() error {
	s.stop()
	return nil
}
