package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
)

// Stream is a typed pipeline of stages over a [Source], built with [From],
// extended with the methods below and with functions such as [MapTo] for
// stages that change the type, and started with [Run].
//
// Each method returns a new *Stream that shares the pipeline with the one it
// was called on; build a pipeline as one chain and call Run once on its last
// Stream. Building is not safe for concurrent use and must be done before
// Run.
type Stream[T any] struct {
	p    *pipeline
	pull func(ctx context.Context) (batch[T], error)
}

// pipeline is what every Stream derived from one From shares.
type pipeline struct {
	src    io.Closer          // the source; nil when From was given nil
	stores []checkpoint.Store // registered by Checkpointing, in order
	ran    atomic.Bool        // set by the first Run

	// onCheckpoint, when set, is called after a position was saved to every
	// store.
	onCheckpoint func(topic string, partition int32, position checkpoint.Position)
	// onBatch, when set, is called after a batch passed every stage and its
	// positions were saved.
	onBatch func()
}

// batch is one Read's worth of elements on its way through the stages,
// together with the positions the source reached with it.
type batch[T any] struct {
	elems []Element[T]
	// positions are computed from the source's batch before any stage runs
	// and carried unchanged through every stage, so that a batch whose
	// elements were all filtered out still advances the checkpoint.
	positions []position
	// last is set when the source returned io.EOF with this batch.
	last bool
}

// position is the next offset to read in one topic-partition, and the epoch
// of the record below it.
type position struct {
	topic     string
	partition int32
	next      int64
	epoch     int32
}

// From returns a Stream reading from src. Nothing is read until [Stream.Run].
// Run closes src when it returns.
func From[T any](src Source[T]) *Stream[T] {
	p := &pipeline{}
	if src != nil {
		p.src = src
	}
	return &Stream[T]{p: p, pull: func(ctx context.Context) (batch[T], error) {
		elems, err := src.Read(ctx)
		last := false
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			last = true
		default:
			return batch[T]{}, &SourceError{Err: err}
		}
		return batch[T]{elems: elems, positions: positionsOf(elems), last: last}, nil
	}}
}

// positionsOf returns, for every topic-partition in elems, one past the
// highest offset seen. Batches hold one or a few partitions, so a linear
// search beats a map here.
func positionsOf[T any](elems []Element[T]) []position {
	var ps []position
next:
	for i := range elems {
		e := &elems[i]
		if e.Topic == "" {
			continue
		}
		for j := range ps {
			if ps[j].topic == e.Topic && ps[j].partition == e.Partition {
				if e.Offset+1 > ps[j].next {
					ps[j].next, ps[j].epoch = e.Offset+1, e.Epoch
				}
				continue next
			}
		}
		ps = append(ps, position{topic: e.Topic, partition: e.Partition, next: e.Offset + 1, epoch: e.Epoch})
	}
	return ps
}

// derive returns a Stream of the same pipeline that runs stage on every batch
// s produces. stage must keep each element's lineage.
func derive[T, U any](s *Stream[T], stage func(context.Context, []Element[T]) ([]Element[U], error)) *Stream[U] {
	up := s.pull
	return &Stream[U]{p: s.p, pull: func(ctx context.Context) (batch[U], error) {
		b, err := up(ctx)
		if err != nil {
			return batch[U]{}, err
		}
		out, err := stage(ctx, b.elems)
		if err != nil {
			return batch[U]{}, err
		}
		return batch[U]{elems: out, positions: b.positions, last: b.last}, nil
	}}
}

// mapElems applies fn to every element in order, keeping lineage, and stops
// at the first error with a RecordError naming stage and the record.
func mapElems[T, U any](ctx context.Context, stage string, elems []Element[T], fn func(context.Context, T) (U, error)) ([]Element[U], error) {
	out := make([]Element[U], len(elems))
	for i := range elems {
		e := &elems[i]
		v, err := fn(ctx, e.Value)
		if err != nil {
			return nil, recordError(stage, e, err)
		}
		out[i] = Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch}
	}
	return out, nil
}

func recordError[T any](stage string, e *Element[T], err error) *RecordError {
	return &RecordError{Stage: stage, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Err: err}
}

func mustFunc(op string, isNil bool) {
	if isNil {
		panic("stream: " + op + " called with a nil function")
	}
}

// Map returns a Stream that replaces each value v with fn(ctx, v), in order,
// keeping its lineage. An error from fn stops Run with a [*RecordError]
// (Stage "map"). It panics if fn is nil.
func (s *Stream[T]) Map(fn func(context.Context, T) (T, error)) *Stream[T] {
	mustFunc("Map", fn == nil)
	return derive(s, func(ctx context.Context, elems []Element[T]) ([]Element[T], error) {
		return mapElems(ctx, StageMap, elems, fn)
	})
}

// Filter returns a Stream that keeps the values for which fn returns true, in
// order. A dropped record counts as done: its position is saved with its
// batch. An error from fn stops Run with a [*RecordError] (Stage "filter").
// It panics if fn is nil.
func (s *Stream[T]) Filter(fn func(context.Context, T) (bool, error)) *Stream[T] {
	mustFunc("Filter", fn == nil)
	return derive(s, func(ctx context.Context, elems []Element[T]) ([]Element[T], error) {
		out := make([]Element[T], 0, len(elems))
		for i := range elems {
			keep, err := fn(ctx, elems[i].Value)
			if err != nil {
				return nil, recordError(StageFilter, &elems[i], err)
			}
			if keep {
				out = append(out, elems[i])
			}
		}
		return out, nil
	})
}

// Tap returns a Stream that calls fn with each value, in order, and passes the
// values on unchanged: the place for side effects (handling a record,
// counting, logging). An error from fn stops Run with a [*RecordError]
// (Stage "tap"). It panics if fn is nil.
func (s *Stream[T]) Tap(fn func(context.Context, T) error) *Stream[T] {
	mustFunc("Tap", fn == nil)
	return derive(s, func(ctx context.Context, elems []Element[T]) ([]Element[T], error) {
		for i := range elems {
			if err := fn(ctx, elems[i].Value); err != nil {
				return nil, recordError(StageTap, &elems[i], err)
			}
		}
		return elems, nil
	})
}

// To returns a Stream that writes each batch's values to sink with one Write
// call (none for a batch left empty by a Filter) and passes the values on, so
// stages and sinks may follow. An error from Write stops Run with a
// [*RecordError] (Stage "sink") naming the first record of the batch. It
// panics if sink is nil.
func (s *Stream[T]) To(sink Sink[T]) *Stream[T] {
	mustFunc("To", sink == nil)
	return derive(s, func(ctx context.Context, elems []Element[T]) ([]Element[T], error) {
		if len(elems) == 0 {
			return elems, nil
		}
		values := make([]T, len(elems))
		for i := range elems {
			values[i] = elems[i].Value
		}
		if err := sink.Write(ctx, values); err != nil {
			return nil, recordError(StageSink, &elems[0], err)
		}
		return elems, nil
	})
}

// Checkpointing registers store to receive the pipeline's positions and
// returns s. Where it sits in the chain does not matter: Run saves a batch's
// positions only after the batch has passed every stage of the pipeline,
// those chained after Checkpointing included. It may be called more than
// once; each position is then saved to every store, in registration order.
// It panics if store is nil.
func (s *Stream[T]) Checkpointing(store checkpoint.Store) *Stream[T] {
	mustFunc("Checkpointing", store == nil)
	s.p.stores = append(s.p.stores, store)
	return s
}

// Run reads the source batch by batch, passes every batch through every stage
// in order and then saves the positions the source reached with it to every
// store registered with [Stream.Checkpointing]: a position is saved only after
// every record below it has passed every stage.
//
// Run returns nil when the source ends (io.EOF) and when ctx is cancelled,
// after saving every completed batch. It returns a [*RecordError] when a
// stage function or sink fails, a [*SourceError] when Read fails, and an error
// naming the topic, partition and position when a store's Save fails; in all
// three cases the failed batch's positions are not saved. Saves use
// context.WithoutCancel(ctx), so a cancellation never loses completed work.
// Run closes the source before it returns and returns the Close error if
// nothing else failed. Run may be called once per pipeline; later calls return
// [ErrAlreadyRun].
func (s *Stream[T]) Run(ctx context.Context) (err error) {
	p := s.p
	if !p.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	if p.src == nil {
		return errNilSource
	}
	defer func() {
		if cerr := p.src.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stream: close source: %w", cerr)
		}
	}()
	for {
		if ctx.Err() != nil {
			return nil
		}
		b, err := s.pull(ctx)
		if err != nil {
			if cancelled(ctx, err) {
				return nil // the batch in flight is abandoned, unsaved
			}
			return err
		}
		if err := p.save(ctx, b.positions); err != nil {
			return err
		}
		if p.onBatch != nil {
			p.onBatch()
		}
		if b.last {
			return nil
		}
	}
}

// save saves every position to every store, with a context that outlives a
// cancellation of ctx: the batch is complete, and its positions must not be
// lost because the caller asked to stop.
func (p *pipeline) save(ctx context.Context, positions []position) error {
	if len(p.stores) == 0 {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	for _, pos := range positions {
		cp := checkpoint.Position{Offset: pos.next, Epoch: pos.epoch}
		for _, store := range p.stores {
			if err := store.Save(ctx, pos.topic, pos.partition, cp); err != nil {
				return fmt.Errorf("stream: checkpoint %s/%d at position %d: %w", pos.topic, pos.partition, pos.next, err)
			}
		}
		if p.onCheckpoint != nil {
			p.onCheckpoint(pos.topic, pos.partition, cp)
		}
	}
	return nil
}

// cancelled reports whether err is the caller's cancellation of ctx rather
// than a failure of its own.
func cancelled(ctx context.Context, err error) bool {
	if ctx.Err() == nil {
		return false
	}
	return errors.Is(err, ctx.Err()) || errors.Is(err, context.Cause(ctx))
}
