package stream

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
)

// Stream is a typed pipeline of stages over one or more sources, built with
// [From] (or [Merge]), extended with the methods below and with functions
// such as [MapTo] for stages that change the type, and started with
// [Stream.Run].
//
// Each method returns a new *Stream that shares the pipeline with the one it
// was called on; build a pipeline as one chain and call Run once on its last
// Stream. Building is not safe for concurrent use and must be done before
// Run.
type Stream[T any] struct {
	p *pipeline
	// connect wires this stream's stages, from its sources down to out, on
	// rt: it builds each stage's outlet and registers the goroutines Run
	// starts.
	connect func(rt *runtime, out outlet[T])
	// reorders names the first stage upstream that may hand the records of
	// a partition on out of offset order (a Parallel or KeyOrdered stage,
	// Batch, Via), "" when none does: stateful stages need that order.
	reorders string
	// unkeyedBy names the first Window upstream: its results carry no
	// source partition, so a stateful stage after it cannot keep its
	// state per partition on a consumer group (registerState).
	unkeyedBy string
}

// outlet is where a stage hands its output: the next stage, or Run's
// terminal, which marks elements finished.
type outlet[T any] interface {
	// push hands a batch on. The callee may modify elems in place and must
	// not keep the slice after it returns (values are copied where kept).
	// An error stops the pipeline.
	push(ctx context.Context, elems []Element[T]) error
	// close says no more batches come from this upstream: flush what is
	// held and pass the close on once everything pushed has been.
	close(ctx context.Context) error
}

// pipeline is what every Stream derived from one From shares.
type pipeline struct {
	sources []io.Closer        // closed by Run when it returns
	stores  []checkpoint.Store // registered by Checkpointing, in order
	cp      checkpointConfig
	cfg     pipelineConfig
	ran     atomic.Bool // set by the first Run
	stages  []*stageCounters

	// onCheckpoint, when set, is called after a position was saved to every
	// store. onSave after each round of saves that saved something.
	onCheckpoint func(topic string, partition int32, position checkpoint.Position)
	onSave       func()

	running atomic.Pointer[runtime] // while Run runs, for Checkpoint
	nilSrc  bool
	// stateNames are the names of the stateful stages, unique (state.go).
	stateNames map[string]bool
	// unpartitioned names the stateful stages whose key is not known to
	// follow the source's partitioning (ErrKeyNotPartitioned).
	unpartitioned []string
	// afterWindow names the stateful stages fed by a Window's results,
	// which carry no source partition, with that Window: "stage\x00window".
	afterWindow []string
	// effects are the parts that write outside the pipeline (sinks,
	// flows), for ExactlyOnce's checks (exactlyonce.go).
	effects []effect
	// buildErr is a fault of the pipeline found while it was built that
	// Run returns (Repartition of values it cannot encode).
	buildErr error
	// tableSources are the sources that feed only a Table (table.go): a
	// Window does not wait for their partitions' event times. tables
	// names the pipeline's tables, for Run's checks.
	tableSources []io.Closer
	tables       []string

	// obs is what Observe reports (observe.go).
	obs observer
}

// From returns a Stream reading from src. Nothing is read until [Stream.Run].
// Run closes src when it returns.
func From[T any](src Source[T], opts ...Option) *Stream[T] {
	p := &pipeline{cfg: defaultPipelineConfig(), cp: defaultCheckpointConfig()}
	for _, o := range opts {
		if o != nil {
			o.applyPipeline(&p.cfg)
		}
	}
	if src == nil {
		p.nilSrc = true
		return &Stream[T]{p: p, connect: func(*runtime, outlet[T]) {}}
	}
	p.sources = append(p.sources, src)
	return &Stream[T]{p: p, connect: func(rt *runtime, out outlet[T]) {
		rt.spawn(func() error { return runSource(rt, src, out) })
	}}
}

// runSource is the goroutine of one source: read, register every element
// in the completion tracker, push. It closes out at the source's end and
// when Run's context is cancelled (the drain).
func runSource[T any](rt *runtime, src Source[T], out outlet[T]) error {
	reg := registrar[T]{rt: rt}
	reg.ids, _ = any(src).(TopicIdentifier)
	var bt telSourceState
	for {
		if rt.stopped() {
			return nil
		}
		if rt.srcCtx.Err() != nil && rt.parent.Err() != nil {
			rt.interrupted.Store(true)
			return out.close(rt.stageCtx) // cancelled: read no more, drain
		}
		elems, err := src.Read(rt.srcCtx)
		last := false
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			last = true
		case cancelled(rt.srcCtx, err) && rt.parent.Err() != nil:
			// Run's context was cancelled: stop reading, drain the rest.
			rt.interrupted.Store(true)
			return out.close(rt.stageCtx)
		case rt.stopped():
			return nil
		default:
			return &SourceError{Err: err}
		}
		if rt.eos != nil && len(elems) > 0 {
			// Under the gate: a transaction ends before or after this
			// batch is handed in, never while it is. A batch read before
			// an abort rewound the source is dropped: the source reads it
			// again from the committed positions.
			rt.txnGate.RLock()
			if rs, ok := any(src).(RewindingSource); ok && rs.StaleRead() {
				rt.txnGate.RUnlock()
				elems = nil
			}
		}
		if len(elems) > 0 {
			e := &elems[0]
			b := rt.tel.beginBatch(rt.stageCtx, &bt, e.Topic, e.Partition, e.Offset, len(elems))
			err := reg.push(b.ctx, elems, out)
			rt.tel.endBatch(b, err)
			if rt.eos != nil {
				rt.txnGate.RUnlock()
			}
			if err != nil {
				return err
			}
			if rt.p.cp.eachBatch {
				// Save on this goroutine before the next Read: a sequential
				// pipeline saves after every batch, in order, as before
				// checkpoint policies existed.
				if err := rt.failSave(); err != nil {
					return nil // failSave stopped the pipeline
				}
			}
		}
		if last {
			return out.close(rt.stageCtx)
		}
	}
}

// registrar registers a source's elements with the tracker and pushes
// them, in runs that fit the tracker's bound.
type registrar[T any] struct {
	rt     *runtime
	last   *checkpoint.PartitionTracker
	offs   []int64
	epochs []int32

	ids    TopicIdentifier              // the source, when it knows its topics' IDs
	idFor  *checkpoint.PartitionTracker // the tracker last given idLast
	idLast checkpoint.TopicID
}

// stampID gives pt the topic ID the source reports for topic-partition,
// which its saved positions carry; a tracker already given that ID is left
// alone.
func (r *registrar[T]) stampID(pt *checkpoint.PartitionTracker, topic string, partition int32) {
	if r.ids == nil || pt == nil {
		return
	}
	if id := r.ids.TopicID(topic, partition); pt != r.idFor || id != r.idLast {
		pt.SetTopicID(id)
		r.idFor, r.idLast = pt, id
	}
}

func (r *registrar[T]) tracker(topic string, partition int32) *checkpoint.PartitionTracker {
	if r.last == nil || r.last.ID() != partition || r.last.Topic() != topic {
		r.last = r.rt.tracker.Partition(topic, partition)
	}
	return r.last
}

// begin registers r.offs with the tracker of topic-partition and returns
// it and how many it registered; nil when the partition was revoked (an
// Assignable source), when nothing of them may be handed on.
func (r *registrar[T]) begin(topic string, partition int32) (*checkpoint.PartitionTracker, int) {
	if !r.rt.partitioned {
		pt := r.tracker(topic, partition)
		r.stampID(pt, topic, partition)
		return pt, pt.TryBegin(r.offs, r.epochs)
	}
	// Under beginMu: an assignment that replaces the partition's tracker
	// comes before or after, never between the look-up and the begin.
	r.rt.beginMu.Lock()
	defer r.rt.beginMu.Unlock()
	pt := r.tracker(topic, partition)
	if pt.Revoked() {
		r.last = nil
		if pt = r.tracker(topic, partition); pt.Revoked() {
			return nil, 0
		}
	}
	r.stampID(pt, topic, partition)
	return pt, pt.TryBegin(r.offs, r.epochs)
}

func (r *registrar[T]) push(ctx context.Context, elems []Element[T], out outlet[T]) error {
	from := 0 // elems[from:i] are registered and not yet pushed
	for i := 0; i < len(elems); {
		e := &elems[i]
		if e.Topic == "" {
			e.owner = nil
			i++
			continue
		}
		r.offs, r.epochs = r.offs[:0], r.epochs[:0]
		j := i
		for ; j < len(elems) && elems[j].Partition == e.Partition && elems[j].Topic == e.Topic; j++ {
			r.offs = append(r.offs, elems[j].Offset)
			r.epochs = append(r.epochs, elems[j].Epoch)
		}
		pt, n := r.begin(e.Topic, e.Partition)
		if pt == nil {
			// Revoked since the source read them: not handed on.
			if from < i {
				if err := out.push(ctx, elems[from:i:i]); err != nil {
					return err
				}
			}
			for k := i; k < j; k++ {
				elems[k].owner = nil
			}
			i, from = j, j
			continue
		}
		for k := i; k < i+n; k++ {
			elems[k].owner = pt
		}
		i += n
		if i < j {
			// The tracker is full: hand on what is registered, so it can
			// finish, then wait for room.
			if from < i {
				if err := out.push(ctx, elems[from:i:i]); err != nil {
					return err
				}
				from = i
			}
			if err := r.rt.waitRoom(pt, elems[i].Offset); err != nil {
				if r.rt.stopped() || r.rt.parent.Err() != nil {
					return nil
				}
				return err
			}
		}
	}
	if from < len(elems) {
		return out.push(ctx, elems[from:len(elems):len(elems)])
	}
	return nil
}

// chain returns a Stream of the same pipeline whose stage is built by
// stage: given the outlet downstream of it, it returns the outlet its
// upstream pushes into.
func chain[T, U any](s *Stream[T], stage func(rt *runtime, down outlet[U]) outlet[T]) *Stream[U] {
	up := s.connect
	return &Stream[U]{p: s.p, reorders: s.reorders, unkeyedBy: s.unkeyedBy, connect: func(rt *runtime, down outlet[U]) {
		up(rt, stage(rt, down))
	}}
}

// reordering marks s as fed by the stage name, which may reorder the
// records of a partition, unless an earlier stage already did.
func reordering[T any](s *Stream[T], name string) *Stream[T] {
	if s.reorders == "" {
		s.reorders = name
	}
	return s
}

func mustFunc(op string, isNil bool) {
	if isNil {
		panic("stream: " + op + " called with a nil function")
	}
}

// Checkpointing registers store to receive the pipeline's positions and
// returns s. Where it sits in the chain does not matter: a position is
// saved only once every record below it has finished every stage of the
// pipeline, those chained after Checkpointing included. It may be called
// more than once; each position is then saved to every store, in
// registration order. opts set when saves happen (the last call's options
// win): by default every [DefaultCheckpointInterval] while records finish
// ([CheckpointInterval], [CheckpointRecords], [CheckpointEachBatch]), and
// always once more when Run returns. It panics if store is nil.
func (s *Stream[T]) Checkpointing(store checkpoint.Store, opts ...CheckpointOption) *Stream[T] {
	if store == nil {
		panic("stream: Checkpointing called with a nil store")
	}
	s.p.stores = append(s.p.stores, store)
	if len(opts) > 0 {
		cp := defaultCheckpointConfig()
		for _, o := range opts {
			if o != nil {
				o.applyCheckpoint(&cp)
			}
		}
		s.p.cp = cp
	}
	return s
}

// Checkpoint saves, while Run runs, the position of every partition up to
// its lowest unfinished record, to every store, and returns when the save
// is done (or ctx ends). It returns [ErrNotRunning] when Run is not
// running, and the store's error when a Save fails (which also stops Run).
func (s *Stream[T]) Checkpoint(ctx context.Context) error {
	rt := s.p.running.Load()
	if rt == nil {
		return ErrNotRunning
	}
	req := make(chan error, 1)
	select {
	case rt.saveReq <- req:
	case <-rt.done:
		return ErrNotRunning
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats returns the counters of every stage, in pipeline order from the
// source: records in, out, skipped, dead-lettered, failed and retried. It
// may be called at any time, also while Run runs.
func (s *Stream[T]) Stats() []StageStats {
	out := make([]StageStats, len(s.p.stages))
	for i, c := range s.p.stages {
		out[i] = c.snapshot()
	}
	return out
}

// StageStats are one stage's counters, in records.
//
// Its JSON form (in [Snapshot]) names the fields in camelCase, as the rest
// of the snapshot: "name", "in", "out", "skipped", "deadLettered",
// "failed", "retried", "late".
type StageStats struct {
	Name         string `json:"name"`
	In           int64  `json:"in"`           // records that entered the stage
	Out          int64  `json:"out"`          // records it passed on (a filter's kept ones, a flat-map's outputs)
	Skipped      int64  `json:"skipped"`      // dropped by Skip after failing (a sink: every record of the batch)
	DeadLettered int64  `json:"deadLettered"` // written to the dead-letter sink after failing (a sink: every record of the batch)
	Failed       int64  `json:"failed"`       // calls of the function (a sink: Writes) that failed, each retry included
	Retried      int64  `json:"retried"`      // calls that were retries, whether they failed or not
	Late         int64  `json:"late"`         // a Window's late records: sent to LateTo, dropped by DropLate, or the one that stopped Run
}

type stageCounters struct {
	name                                            string
	idx                                             int // the stage's place in pipeline.stages
	in, out, skipped, deadLettered, failed, retried atomic.Int64
	late                                            atomic.Int64
	// left counts the records that left the stage: handed on (as
	// themselves or in a result: a batch, a window's), finished in it
	// (filtered, skipped, dead-lettered, absorbed into its state, sent to
	// a late sink) or, for an AsyncSink, acknowledged. in - left is the
	// stage's records in flight (StageSnapshot.InFlight). Counted once
	// per batch, never per record. In a oneToOne stage it counts only the
	// records finished in it: those it handed on are out, which saves an
	// atomic add per batch on the stages that hand on what they take (a
	// map, a filter, a tap, a sink).
	left     atomic.Int64
	oneToOne bool

	// push and handOn time the stage's push and its handing batches on
	// (observe.go's chainTimed); workers its goroutines, 0 or 1 when
	// sequential.
	push, handOn stageTimer
	workers      int
	timed        bool // built by chainTimed: push and handOn are measured
	eventTime    bool // an event-time stage: Window (not over processing time), JoinWindow
	// detached: the stage hands on from a goroutine of its own, not from
	// its push (Via), as a Parallel stage does: busy is then its push
	// time, back-pressured its handing on.
	detached bool
}

func (c *stageCounters) snapshot() StageStats {
	return StageStats{Name: c.name, In: c.in.Load(), Out: c.out.Load(), Skipped: c.skipped.Load(),
		DeadLettered: c.deadLettered.Load(), Failed: c.failed.Load(), Retried: c.retried.Load(), Late: c.late.Load()}
}

func (p *pipeline) counters(name string) *stageCounters {
	c := &stageCounters{name: name, idx: len(p.stages)}
	p.stages = append(p.stages, c)
	return c
}

// cancelled reports whether err is the caller's cancellation of ctx rather
// than a failure of its own.
func cancelled(ctx context.Context, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	return errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx))
}
