package stream

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// outcome is what became of one record in a stage.
type outcome uint8

const (
	keep    outcome = iota // passed on
	dropped                // filtered out, skipped or dead-lettered: finished here
)

// stageRun is what every stage of one Run shares: its config, counters and
// the runtime.
type stageRun struct {
	rt  *runtime
	cfg *stageConfig
	ctr *stageCounters
}

// apply calls fn on e's value under the stage's failure policy. It returns
// the output and whether to keep it; an error stops the pipeline (a
// *RecordError, or errAbandoned when the stage context ended under it).
func apply[T, U any](ctx context.Context, sr *stageRun, e *Element[T], fn func(context.Context, T) (U, bool, error)) (U, outcome, error) {
	cfg := sr.cfg
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			sr.ctr.retried.Add(1) // every call after the first is a retry, failed or not
		}
		v, ok, err := callKeep(cfg.recoverPanics, ctx, fn, e.Value)
		if err == nil {
			if !ok {
				return v, dropped, nil
			}
			return v, keep, nil
		}
		var zero U
		if ctx.Err() != nil && (cancelled(ctx, err) || errors.Is(err, context.Canceled)) {
			return zero, dropped, errAbandoned
		}
		sr.ctr.failed.Add(1)
		f := Failure{Stage: cfg.name, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset,
			Attempt: attempt, Err: err, Value: e.Value}
		for _, h := range cfg.hooks {
			h(f)
		}
		if attempt < cfg.attempts {
			if werr := sr.wait(ctx, backoff(cfg.minWait, cfg.maxWait, attempt)); werr != nil {
				return zero, dropped, errAbandoned
			}
			continue
		}
		switch cfg.onFail {
		case failSkip:
			sr.ctr.skipped.Add(1)
			return zero, dropped, nil
		case failDeadLetter:
			if derr := cfg.deadLetter.Write(ctx, []Failure{f}); derr != nil {
				return zero, dropped, fmt.Errorf("stream: dead-letter write for %w failed: %w",
					recordError(cfg.name, e, err), derr)
			}
			sr.ctr.deadLettered.Add(1)
			return zero, dropped, nil
		default:
			return zero, dropped, recordError(cfg.name, e, err)
		}
	}
}

// wait sleeps d on the pipeline's clock, or until ctx or the pipeline ends.
func (sr *stageRun) wait(ctx context.Context, d time.Duration) error {
	t := sr.rt.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-sr.rt.stop:
		return errAbandoned
	}
}

func callKeep[T, U any](rec bool, ctx context.Context, fn func(context.Context, T) (U, bool, error), v T) (out U, ok bool, err error) {
	if rec {
		defer func() {
			if r := recover(); r != nil {
				err = &PanicError{Value: r, Stack: stack()}
			}
		}()
	}
	return fn(ctx, v)
}

func recordError[T any](stage string, e *Element[T], err error) *RecordError {
	return &RecordError{Stage: stage, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Err: err}
}

// oneToOne builds a stage that maps each element to at most one: Map,
// Filter, Tap, MapTo. inPlace says T and U are the same type and the
// output may overwrite the input slice (reuse returns it as []Element[U]).
func oneToOne[T, U any](s *Stream[T], name string, opts []StageOption,
	fn func(context.Context, T) (U, bool, error), reuse func([]Element[T]) []Element[U]) *Stream[U] {
	cfg := newStageConfig(name, opts)
	ctr := s.p.counters(cfg.name)
	return chain(s, func(rt *runtime, down outlet[U]) outlet[T] {
		sr := &stageRun{rt: rt, cfg: cfg, ctr: ctr}
		if cfg.parallel > 1 {
			return newParallel(sr, fn, down)
		}
		return &seqStage[T, U]{sr: sr, fn: fn, reuse: reuse, down: down}
	})
}

// seqStage runs a one-to-one function on the goroutine of its upstream, a
// batch at a time.
type seqStage[T, U any] struct {
	sr    *stageRun
	fn    func(context.Context, T) (U, bool, error)
	reuse func([]Element[T]) []Element[U] // nil: out is the stage's own buffer
	down  outlet[U]
	buf   []Element[U]
	drop  []Element[T]
	offs  []int64
}

func (st *seqStage[T, U]) push(ctx context.Context, elems []Element[T]) error {
	var out []Element[U]
	if st.reuse != nil {
		out = st.reuse(elems)[:0]
	} else {
		out = st.buf[:0]
	}
	st.drop = st.drop[:0]
	st.sr.ctr.in.Add(int64(len(elems)))
	for i := range elems {
		e := &elems[i]
		v, oc, err := apply(ctx, st.sr, e, st.fn)
		if err != nil {
			return err
		}
		if oc == dropped {
			st.drop = append(st.drop, *e)
			continue
		}
		out = append(out, Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, owner: e.owner})
	}
	if st.reuse == nil {
		st.buf = out
	}
	if len(st.drop) > 0 {
		st.offs = finish(st.drop, st.offs)
		st.sr.rt.noteFinished(len(st.drop))
		clear(st.drop)
	}
	st.sr.ctr.out.Add(int64(len(out)))
	if len(out) == 0 {
		return nil
	}
	err := st.down.push(ctx, out)
	if st.reuse == nil {
		clear(out) // let the values be collected; the buffer stays
	}
	return err
}

func (st *seqStage[T, U]) close(ctx context.Context) error { return st.down.close(ctx) }

// Map returns a Stream that replaces each value v with fn(ctx, v), keeping
// its lineage. Sequential by default, in order, in place (no copy of the
// elements); with [Parallel] or [KeyOrdered] on several goroutines. A
// failure of fn goes to the stage's failure policy (opts): by default Run
// stops with a [*RecordError] (Stage "map"). It panics if fn is nil.
func (s *Stream[T]) Map(fn func(context.Context, T) (T, error), opts ...StageOption) *Stream[T] {
	mustFunc("Map", fn == nil)
	return oneToOne(s, StageMap, opts, func(ctx context.Context, v T) (T, bool, error) {
		out, err := fn(ctx, v)
		return out, true, err
	}, sameSlice[T])
}

// Filter returns a Stream that keeps the values for which fn returns true.
// A dropped record is finished: its position may be saved. A failure of fn
// goes to the stage's failure policy (opts); by default Run stops with a
// [*RecordError] (Stage "filter"). It panics if fn is nil.
func (s *Stream[T]) Filter(fn func(context.Context, T) (bool, error), opts ...StageOption) *Stream[T] {
	mustFunc("Filter", fn == nil)
	return oneToOne(s, StageFilter, opts, func(ctx context.Context, v T) (T, bool, error) {
		ok, err := fn(ctx, v)
		return v, ok, err
	}, sameSlice[T])
}

// Tap returns a Stream that calls fn with each value and passes the values
// on unchanged: the place for side effects (handling a record, counting,
// logging). A failure of fn goes to the stage's failure policy (opts); by
// default Run stops with a [*RecordError] (Stage "tap"). It panics if fn is
// nil.
func (s *Stream[T]) Tap(fn func(context.Context, T) error, opts ...StageOption) *Stream[T] {
	mustFunc("Tap", fn == nil)
	return oneToOne(s, StageTap, opts, func(ctx context.Context, v T) (T, bool, error) {
		return v, true, fn(ctx, v)
	}, sameSlice[T])
}

// MapTo returns a Stream of U that replaces each value v of s with
// fn(ctx, v), keeping its lineage, so the checkpoint follows the input
// records. It is a function rather than a method because Go methods cannot
// take type parameters. Options and failures as for [Stream.Map] (Stage
// "mapto"). It panics if fn is nil.
//
// The returned Stream shares s's pipeline: run it, not s.
func MapTo[T, U any](s *Stream[T], fn func(context.Context, T) (U, error), opts ...StageOption) *Stream[U] {
	mustFunc("MapTo", fn == nil)
	return oneToOne(s, StageMapTo, opts, func(ctx context.Context, v T) (U, bool, error) {
		out, err := fn(ctx, v)
		return out, true, err
	}, nil)
}

func sameSlice[T any](e []Element[T]) []Element[T] { return e }

// To returns a Stream that writes each batch's values to sink with one
// Write call and passes the values on, so stages and sinks may follow: a
// record is finished only once every sink after it returned. A failed Write
// goes to the stage's failure policy for the whole batch (Retry calls Write
// again with the same values; Skip drops the batch, DeadLetter writes each
// value of it); by default Run stops with a [*RecordError] (Stage "sink")
// naming the batch's first record. [Parallel] does not apply to a sink. To
// write to several sinks, use [Broadcast]. It panics if sink is nil.
func (s *Stream[T]) To(sink Sink[T], opts ...StageOption) *Stream[T] {
	mustFunc("To", sink == nil)
	cfg := newStageConfig(StageSink, opts)
	ctr := s.p.counters(cfg.name)
	return chain(s, func(rt *runtime, down outlet[T]) outlet[T] {
		return &sinkStage[T]{sr: &stageRun{rt: rt, cfg: cfg, ctr: ctr}, sink: sink, down: down}
	})
}

type sinkStage[T any] struct {
	sr     *stageRun
	sink   Sink[T]
	down   outlet[T]
	values []T
	offs   []int64
}

func (st *sinkStage[T]) push(ctx context.Context, elems []Element[T]) error {
	st.sr.ctr.in.Add(int64(len(elems)))
	st.values = st.values[:0]
	for i := range elems {
		st.values = append(st.values, elems[i].Value)
	}
	// The batch as one record: the function is the Write of all values.
	whole := Element[[]T]{Value: st.values, Topic: elems[0].Topic, Partition: elems[0].Partition, Offset: elems[0].Offset}
	_, oc, err := apply(ctx, st.sr, &whole, func(ctx context.Context, vs []T) (struct{}, bool, error) {
		return struct{}{}, true, st.sink.Write(ctx, vs)
	})
	clear(st.values)
	if err != nil {
		return err
	}
	if oc == dropped {
		st.offs = finish(elems, st.offs)
		st.sr.rt.noteFinished(len(elems))
		return nil
	}
	st.sr.ctr.out.Add(int64(len(elems)))
	return st.down.push(ctx, elems)
}

func (st *sinkStage[T]) close(ctx context.Context) error { return st.down.close(ctx) }

// Broadcast returns a sink that writes every batch to each of sinks at the
// same time, one goroutine per sink, and returns once all have returned:
// nil when all succeeded, else their errors joined. A record written
// through it is finished only when every sink has it (a sink that failed
// may see the batch again after a restart).
func Broadcast[T any](sinks ...Sink[T]) Sink[T] {
	for _, s := range sinks {
		if s == nil {
			panic("stream: Broadcast called with a nil sink")
		}
	}
	return broadcast[T](sinks)
}

type broadcast[T any] []Sink[T]

func (b broadcast[T]) Write(ctx context.Context, values []T) error {
	if len(b) == 1 {
		return b[0].Write(ctx, values)
	}
	errs := make([]error, len(b))
	done := make(chan struct{}, len(b))
	for i, s := range b {
		go func() {
			errs[i] = s.Write(ctx, values)
			done <- struct{}{}
		}()
	}
	for range b {
		<-done
	}
	return errors.Join(errs...)
}

// FlatMap returns a Stream of U with the values fn(ctx, v) returns for each
// value v of s, in order, each with v's lineage. A record that fn splits
// into several is finished when all of them are; one that fn maps to none
// is finished at once. Sequential (Parallel does not apply); failures as
// for [Stream.Map] (Stage "flatmap"). It panics if fn is nil.
func FlatMap[T, U any](s *Stream[T], fn func(context.Context, T) ([]U, error), opts ...StageOption) *Stream[U] {
	mustFunc("FlatMap", fn == nil)
	cfg := newStageConfig(StageFlatMap, opts)
	cfg.parallel = 0
	ctr := s.p.counters(cfg.name)
	return chain(s, func(rt *runtime, down outlet[U]) outlet[T] {
		return &flatStage[T, U]{sr: &stageRun{rt: rt, cfg: cfg, ctr: ctr}, fn: func(ctx context.Context, v T) ([]U, bool, error) {
			out, err := fn(ctx, v)
			return out, true, err
		}, down: down}
	})
}

type flatStage[T, U any] struct {
	sr   *stageRun
	fn   func(context.Context, T) ([]U, bool, error)
	down outlet[U]
	buf  []Element[U]
}

func (st *flatStage[T, U]) push(ctx context.Context, elems []Element[T]) error {
	st.sr.ctr.in.Add(int64(len(elems)))
	out := st.buf[:0]
	for i := range elems {
		e := &elems[i]
		vs, oc, err := apply(ctx, st.sr, e, st.fn)
		if err != nil {
			return err
		}
		if oc == dropped || len(vs) == 0 {
			finishOne(e)
			st.sr.rt.noteFinished(1)
			continue
		}
		if len(vs) != 1 && e.owner != nil {
			e.owner.Split(e.Offset, len(vs))
		}
		for _, v := range vs {
			out = append(out, Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, owner: e.owner})
		}
	}
	st.buf = out
	st.sr.ctr.out.Add(int64(len(out)))
	if len(out) == 0 {
		return nil
	}
	err := st.down.push(ctx, out)
	clear(out)
	return err
}

func (st *flatStage[T, U]) close(ctx context.Context) error { return st.down.close(ctx) }
