package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
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
	// batch is set by a stage whose function takes a whole batch (a sink):
	// its failure is then one per record for the dead-letter sink and the
	// Skipped and DeadLettered counters, which count records.
	batch batchFailures
}

// batchFailures splits the failure of a function of a whole batch into the
// records of the batch being handled.
type batchFailures interface {
	records() int              // how many records the batch holds
	split(f Failure) []Failure // f for each record: its value and lineage
}

// apply calls fn on e's value under the stage's failure policy. It returns
// the output and whether to keep it; an error stops the pipeline (a
// *RecordError, or errAbandoned when the stage context ended under it).
func apply[T, U any](ctx context.Context, sr *stageRun, e *Element[T], fn func(context.Context, T) (U, bool, error)) (U, outcome, error) {
	v, ok, err := callKeep(sr.cfg.recoverPanics, ctx, fn, e.Value)
	if err != nil {
		return failed(ctx, sr, e, fn, err)
	}
	if !ok {
		return v, dropped, nil
	}
	return v, keep, nil
}

// failed applies the failure policy to e, whose first call of fn returned
// err: it retries, then skips, dead-letters or stops.
func failed[T, U any](ctx context.Context, sr *stageRun, e *Element[T], fn func(context.Context, T) (U, bool, error), err error) (U, outcome, error) {
	cfg := sr.cfg
	var zero U
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			sr.ctr.retried.Add(1) // a call that is a retry, whether it fails or not
			v, ok, rerr := callKeep(cfg.recoverPanics, ctx, fn, e.Value)
			if rerr == nil {
				if !ok {
					return v, dropped, nil
				}
				return v, keep, nil
			}
			err = rerr
		}
		if ctx.Err() != nil && (cancelled(ctx, err) || errors.Is(err, context.Canceled)) {
			return zero, dropped, errAbandoned
		}
		sr.ctr.failed.Add(1)
		f := Failure{Stage: cfg.name, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset,
			Attempt: attempt, Err: err, Value: e.Value}
		sr.rt.noteFailure(f)
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
			n := 1
			if sr.batch != nil {
				n = sr.batch.records()
			}
			sr.ctr.skipped.Add(int64(n))
			return zero, dropped, nil
		case failDeadLetter:
			fs := []Failure{f}
			if sr.batch != nil {
				fs = sr.batch.split(f)
			}
			if derr := cfg.deadLetter.Write(ctx, fs); derr != nil {
				return zero, dropped, deadLetterFailed(cfg, f, recordError(cfg.name, e, err), derr)
			}
			sr.ctr.deadLettered.Add(int64(len(fs)))
			return zero, dropped, nil
		default:
			return zero, dropped, recordError(cfg.name, e, err)
		}
	}
}

// deadLetterFailed returns the error of a dead-letter write that failed
// with derr for the failure f (rerr as Run reports it), after calling the
// stage's OnError hooks with it: they saw f already, and see the failure
// that stops the pipeline too.
func deadLetterFailed(cfg *stageConfig, f Failure, rerr *RecordError, derr error) error {
	err := &DeadLetterError{Cause: rerr, Err: derr}
	f.Err = err
	for _, h := range cfg.hooks {
		h(f)
	}
	return err
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

// seqStage runs a one-to-one function on the goroutine of its upstream, a
// batch at a time.
type seqStage[T, U any] struct {
	sr    *stageRun
	fn    func(context.Context, T) (U, bool, error)
	reuse func([]Element[T]) []Element[U]     // nil: out is the stage's own buffer
	mapTo func(context.Context, T) (U, error) // MapTo's function, called without fn's wrapper
	down  outlet[U]
	buf   []Element[U]
	drop  []Element[T]
	offs  []int64
}

func (st *seqStage[T, U]) push(ctx context.Context, elems []Element[T]) error {
	if elems = dropRevoked(st.sr.rt, elems); len(elems) == 0 {
		return nil
	}
	rt := st.sr.rt
	g0 := rt.gen.Load()
	if g0&haltBit != 0 {
		return errAbandoned
	}
	var out []Element[U]
	if st.reuse != nil {
		out = st.reuse(elems)
	} else {
		out = slices.Grow(st.buf[:0], len(elems))[:len(elems)]
	}
	st.drop = st.drop[:0]
	st.sr.ctr.in.Add(int64(len(elems)))
	base, i, w := 0, 0, 0 // out[base:w] holds the outputs not yet handed on
	var err error
	for {
		start := st.sr.timeBatch()
		i, w, err = st.run(ctx, elems, out, i, w, &rt.gen, g0+splitAfter)
		st.sr.doneBatch(start)
		if err != nil || i == len(elems) {
			break
		}
		// 10 to 20 ms on this batch, or a halt (progress.go).
		if err = st.handOn(ctx, out[base:w:w]); err != nil || rt.halted() {
			err = cmp.Or(err, errAbandoned)
			break
		}
		base, g0 = w, rt.gen.Load()
	}
	if err == nil {
		err = st.handOn(ctx, out[base:w:w])
	}
	if st.reuse == nil {
		clear(out[:w]) // let the values be collected; the buffer stays
		st.buf = out[:0]
	}
	return err
}

// run calls the stage's function on elems[i:], writing the outputs from
// out[w] on, until the end of elems or until gen reaches limit (a split or
// a halt, checked before each record), and returns where it stopped: the
// hot loop, kept apart from push as [inPlaceStage.run] is.
func (st *seqStage[T, U]) run(ctx context.Context, elems []Element[T], out []Element[U], i, w int, gen *atomic.Uint64, limit uint64) (int, int, error) {
	direct := !st.sr.cfg.recoverPanics
	for ; i < len(elems); i++ {
		if gen.Load() >= limit {
			return i, w, nil
		}
		e := &elems[i]
		var v U
		var oc outcome
		var err error
		if direct {
			// The common case, without the policy's indirection: a
			// failure takes the slow path from its first error on.
			ok := true
			if st.mapTo != nil {
				v, err = st.mapTo(ctx, e.Value)
			} else {
				v, ok, err = st.fn(ctx, e.Value)
			}
			if err != nil {
				v, oc, err = failed(ctx, st.sr, e, st.fn, err)
			} else if !ok {
				oc = dropped
			}
		} else {
			v, oc, err = apply(ctx, st.sr, e, st.fn)
		}
		if err != nil {
			return i, w, err
		}
		if oc == dropped {
			st.drop = append(st.drop, *e)
			continue
		}
		if st.reuse != nil && w == i {
			out[w].Value = v // in place: the lineage is already there
		} else {
			out[w] = Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner}
		}
		w++
	}
	return i, w, nil
}

// handOn finishes the records dropped so far and pushes out downstream.
func (st *seqStage[T, U]) handOn(ctx context.Context, out []Element[U]) error {
	var err error
	st.drop, st.offs, err = handOn(ctx, st.sr, st.drop, st.offs, st.down, out)
	return err
}

// handOn finishes drop (records a sequential stage dropped since its last
// hand-on, reset and returned with the scratch offs for reuse), counts out
// and pushes it to down: what a Map, Filter, Tap or MapTo stage does after
// a batch and at each split within one.
func handOn[T, U any](ctx context.Context, sr *stageRun, drop []Element[T], offs []int64, down outlet[U], out []Element[U]) ([]Element[T], []int64, error) {
	if len(drop) > 0 {
		offs = finish(drop, offs)
		sr.rt.noteFinished(len(drop))
		sr.ctr.left.Add(int64(len(drop)))
		clear(drop)
		drop = drop[:0]
	}
	sr.ctr.out.Add(int64(len(out))) // and left: oneToOne
	if len(out) == 0 {
		return drop, offs, nil
	}
	return drop, offs, down.push(ctx, out)
}

func (st *seqStage[T, U]) close(ctx context.Context) error { return st.down.close(ctx) }

// Map returns a Stream that replaces each value v with fn(ctx, v), keeping
// its lineage. Sequential by default, in order, in place (no copy of the
// elements); with [Parallel] or [KeyOrdered] on several goroutines. A
// failure of fn goes to the stage's failure policy (opts): by default Run
// stops with a [*RecordError] (Stage "map"). It panics if fn is nil.
func (s *Stream[T]) Map(fn func(context.Context, T) (T, error), opts ...StageOption) *Stream[T] {
	mustFunc("Map", fn == nil)
	return inPlace(s, StageMap, opts, &inPlaceStage[T]{kind: kindMap, mapFn: fn}, func(ctx context.Context, v T) (T, bool, error) {
		out, err := fn(ctx, v)
		return out, true, err
	})
}

// Filter returns a Stream that keeps the values for which fn returns true.
// A dropped record is finished: its position may be saved. A failure of fn
// goes to the stage's failure policy (opts); by default Run stops with a
// [*RecordError] (Stage "filter"). It panics if fn is nil.
func (s *Stream[T]) Filter(fn func(context.Context, T) (bool, error), opts ...StageOption) *Stream[T] {
	mustFunc("Filter", fn == nil)
	return inPlace(s, StageFilter, opts, &inPlaceStage[T]{kind: kindFilter, filterFn: fn}, func(ctx context.Context, v T) (T, bool, error) {
		ok, err := fn(ctx, v)
		return v, ok, err
	})
}

// Tap returns a Stream that calls fn with each value and passes the values
// on unchanged: the place for side effects (handling a record, counting,
// logging). A failure of fn goes to the stage's failure policy (opts); by
// default Run stops with a [*RecordError] (Stage "tap"). It panics if fn is
// nil.
func (s *Stream[T]) Tap(fn func(context.Context, T) error, opts ...StageOption) *Stream[T] {
	mustFunc("Tap", fn == nil)
	return inPlace(s, StageTap, opts, &inPlaceStage[T]{kind: kindTap, tapFn: fn}, func(ctx context.Context, v T) (T, bool, error) {
		return v, true, fn(ctx, v)
	})
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
	cfg := newStageConfig(StageMapTo, opts)
	ctr := s.p.counters(cfg.name)
	ctr.oneToOne = true
	s.p.noteDeadLetter(cfg)
	wrapped := func(ctx context.Context, v T) (U, bool, error) {
		out, err := fn(ctx, v)
		return out, true, err
	}
	out := chainTimed(s, ctr, cfg.parallel, func(rt *runtime, down outlet[U]) outlet[T] {
		sr := &stageRun{rt: rt, cfg: cfg, ctr: ctr}
		if cfg.parallel > 1 {
			return newParallel(sr, wrapped, down)
		}
		return &seqStage[T, U]{sr: sr, fn: wrapped, mapTo: fn, down: down}
	})
	if cfg.parallel > 1 {
		reordering(out, cfg.name)
	}
	return out
}

func sameSlice[T any](e []Element[T]) []Element[T] { return e }

// inPlace builds a Map, Filter or Tap stage: sequential ones are an
// inPlaceStage (proto, copied per Run), which calls the user's function
// with no wrapper and rewrites the batch in place; parallel ones, and those
// with Recover, go through the generic stages with fn.
func inPlace[T any](s *Stream[T], name string, opts []StageOption, proto *inPlaceStage[T], fn func(context.Context, T) (T, bool, error)) *Stream[T] {
	cfg := newStageConfig(name, opts)
	ctr := s.p.counters(cfg.name)
	ctr.oneToOne = true
	s.p.noteDeadLetter(cfg)
	out := chainTimed(s, ctr, cfg.parallel, func(rt *runtime, down outlet[T]) outlet[T] {
		sr := &stageRun{rt: rt, cfg: cfg, ctr: ctr}
		switch {
		case cfg.parallel > 1:
			return newParallel(sr, fn, down)
		case cfg.recoverPanics:
			return &seqStage[T, T]{sr: sr, fn: fn, reuse: sameSlice[T], down: down}
		}
		st := *proto
		st.sr, st.fn, st.down = sr, fn, down
		return &st
	})
	if cfg.parallel > 1 {
		reordering(out, cfg.name)
	}
	return out
}

// The kinds of inPlaceStage.
const (
	kindMap = iota
	kindFilter
	kindTap
)

// inPlaceStage is a sequential Map, Filter or Tap: the hot path of a
// pipeline. It calls the user's function directly (no wrapper per record),
// writes a Map's result into the element, moves elements only after a
// drop, and takes the failure policy's path only from a first error on.
// Measured on 64 B records (internal/bench BenchmarkThree), going through
// one generic wrapper per record cost about a third of the time.
type inPlaceStage[T any] struct {
	kind     int
	mapFn    func(context.Context, T) (T, error)
	filterFn func(context.Context, T) (bool, error)
	tapFn    func(context.Context, T) error

	sr   *stageRun
	fn   func(context.Context, T) (T, bool, error) // for the failure path
	down outlet[T]
	drop []Element[T]
	offs []int64
}

func (st *inPlaceStage[T]) push(ctx context.Context, elems []Element[T]) error {
	if elems = dropRevoked(st.sr.rt, elems); len(elems) == 0 {
		return nil
	}
	rt := st.sr.rt
	g0 := rt.gen.Load()
	if g0&haltBit != 0 {
		return errAbandoned
	}
	st.sr.ctr.in.Add(int64(len(elems)))
	st.drop = st.drop[:0]
	base, i, w := 0, 0, 0 // elems[base:w] are the outputs not yet handed on
	for {
		start := st.sr.timeBatch()
		var err error
		i, w, err = st.run(ctx, elems, i, w, &rt.gen, g0+splitAfter)
		st.sr.doneBatch(start)
		if err != nil {
			return err
		}
		if i == len(elems) {
			return st.handOn(ctx, elems[base:w:w])
		}
		// 10 to 20 ms on this batch, or a halt: hand on what is finished
		// so its positions can move (progress.go).
		if err := st.handOn(ctx, elems[base:w:w]); err != nil || rt.halted() {
			return cmp.Or(err, errAbandoned)
		}
		base, g0 = w, rt.gen.Load()
	}
}

// run calls the stage's function on elems[i:], writing the kept outputs
// from elems[w] on, until the end of elems or until gen reaches limit (a
// split or a halt, checked before each record). It returns where it
// stopped. The loop of the hot path: kept apart from push so that it
// holds as few values as possible across the calls of the function (Go's
// ABI saves no register across a call).
func (st *inPlaceStage[T]) run(ctx context.Context, elems []Element[T], i, w int, gen *atomic.Uint64, limit uint64) (int, int, error) {
	for ; i < len(elems); i++ {
		if gen.Load() >= limit {
			return i, w, nil
		}
		e := &elems[i]
		kept := true
		var err error
		switch st.kind {
		case kindMap:
			var v T
			if v, err = st.mapFn(ctx, e.Value); err == nil {
				e.Value = v
			}
		case kindFilter:
			kept, err = st.filterFn(ctx, e.Value)
		default:
			err = st.tapFn(ctx, e.Value)
		}
		if err != nil {
			v, oc, ferr := failed(ctx, st.sr, e, st.fn, err)
			if ferr != nil {
				return i, w, ferr
			}
			kept = oc == keep
			if kept {
				e.Value = v
			}
		}
		if !kept {
			st.drop = append(st.drop, *e)
			continue
		}
		if w != i {
			elems[w] = *e
		}
		w++
	}
	return i, w, nil
}

// handOn finishes the records dropped so far and pushes out downstream.
func (st *inPlaceStage[T]) handOn(ctx context.Context, out []Element[T]) error {
	var err error
	st.drop, st.offs, err = handOn(ctx, st.sr, st.drop, st.offs, st.down, out)
	return err
}

func (st *inPlaceStage[T]) close(ctx context.Context) error { return st.down.close(ctx) }

// To returns a Stream that writes each batch's values to sink with one
// Write call and passes the values on, so stages and sinks may follow: a
// record is finished only once every sink after it returned. A failed Write
// goes to the stage's failure policy for the whole batch (Retry calls Write
// again with the same values; Skip drops the batch, DeadLetter writes each
// value of it); by default Run stops with a [*RecordError] (Stage "sink")
// naming the batch's first record. To write to several sinks, use
// [Broadcast]. It panics if sink is nil or if given [Parallel] or
// [KeyOrdered], which do not apply to a sink.
func (s *Stream[T]) To(sink Sink[T], opts ...StageOption) *Stream[T] {
	mustFunc("To", sink == nil)
	cfg := newStageConfig(StageSink, opts)
	if cfg.parallel > 1 {
		panic("stream: Parallel and KeyOrdered do not apply to To: a sink takes a batch at a time")
	}
	ctr := s.p.counters(cfg.name)
	s.p.noteSink(fmt.Sprintf("sink %q", cfg.name), sink)
	s.p.noteDeadLetter(cfg)
	if as, ok := sink.(AsyncSink[T]); ok {
		if cfg.attempts > 1 {
			panic("stream: Retry does not apply to an AsyncSink: it retries on its own (franz-go's record retries for sink.Kafka)")
		}
		return chainTimed(s, ctr, 1, func(rt *runtime, down outlet[T]) outlet[T] {
			// The sink holds values' memory until Kafka's ack, past the
			// next Read: a source reusing its bytes is refused.
			rt.async, rt.holds = true, true
			return &asyncSinkStage[T]{sr: &stageRun{rt: rt, cfg: cfg, ctr: ctr}, sink: as, down: down}
		})
	}
	ctr.oneToOne = true
	return chainTimed(s, ctr, 1, func(rt *runtime, down outlet[T]) outlet[T] {
		st := &sinkStage[T]{sr: &stageRun{rt: rt, cfg: cfg, ctr: ctr}, sink: sink, down: down}
		st.sr.batch = st
		return st
	})
}

type sinkStage[T any] struct {
	sr     *stageRun
	sink   Sink[T]
	down   outlet[T]
	values []T
	offs   []int64
	cur    []Element[T] // the batch being written, for split
}

func (st *sinkStage[T]) records() int { return len(st.cur) }

// split gives the dead-letter sink one Failure per record of the batch whose
// Write failed, each with the record's own value and lineage: the batch
// buffer is reused after the stage returns, so a dead-letter sink may keep
// what it is given.
func (st *sinkStage[T]) split(f Failure) []Failure {
	fs := make([]Failure, len(st.cur))
	for i := range st.cur {
		e := &st.cur[i]
		fs[i] = Failure{Stage: f.Stage, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset,
			Attempt: f.Attempt, Err: f.Err, Value: e.Value}
	}
	return fs
}

func (st *sinkStage[T]) push(ctx context.Context, elems []Element[T]) error {
	if elems = dropRevoked(st.sr.rt, elems); len(elems) == 0 {
		return nil
	}
	if st.sr.rt.halted() {
		// The stages' context ended: the batch is abandoned unsaved,
		// not written with a dead context.
		return errAbandoned
	}
	st.sr.ctr.in.Add(int64(len(elems)))
	st.values = st.values[:0]
	for i := range elems {
		st.values = append(st.values, elems[i].Value)
	}
	// The batch as one record: the function is the Write of all values.
	whole := Element[[]T]{Value: st.values, Topic: elems[0].Topic, Partition: elems[0].Partition, Offset: elems[0].Offset}
	st.cur = elems
	start := st.sr.timeBatch()
	_, oc, err := apply(ctx, st.sr, &whole, func(ctx context.Context, vs []T) (struct{}, bool, error) {
		return struct{}{}, true, st.sink.Write(ctx, vs)
	})
	st.sr.doneBatch(start)
	st.cur = nil
	clear(st.values)
	if err != nil {
		return err
	}
	if oc == dropped {
		st.sr.ctr.left.Add(int64(len(elems))) // those handed on are Out: oneToOne
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

// JoinTransaction has every sink join t's transactions (TransactionalSink,
// for ExactlyOnce): a broadcast is exactly once when each of its sinks is.
func (b broadcast[T]) JoinTransaction(t Transactor) error {
	for i, s := range b {
		ts, ok := s.(TransactionalSink)
		if !ok {
			return fmt.Errorf("Broadcast's sink %d is a %T, which cannot write into a transaction", i, s)
		}
		if err := ts.JoinTransaction(t); err != nil {
			return fmt.Errorf("Broadcast's sink %d: %w", i, err)
		}
	}
	return nil
}

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
// is finished at once. Sequential: it panics if given Parallel or
// KeyOrdered, or a nil fn; failures as for [Stream.Map] (Stage "flatmap").
func FlatMap[T, U any](s *Stream[T], fn func(context.Context, T) ([]U, error), opts ...StageOption) *Stream[U] {
	mustFunc("FlatMap", fn == nil)
	cfg := newStageConfig(StageFlatMap, opts)
	if cfg.parallel > 1 {
		panic("stream: Parallel and KeyOrdered do not apply to FlatMap: put them on a stage before or after it")
	}
	ctr := s.p.counters(cfg.name)
	s.p.noteDeadLetter(cfg)
	return chainTimed(s, ctr, 1, func(rt *runtime, down outlet[U]) outlet[T] {
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
	if elems = dropRevoked(st.sr.rt, elems); len(elems) == 0 {
		return nil
	}
	rt := st.sr.rt
	gen := &rt.gen // one load per record, from a register
	g0 := gen.Load()
	if g0&haltBit != 0 {
		return errAbandoned
	}
	st.sr.ctr.in.Add(int64(len(elems)))
	start := st.sr.timeBatch()
	out := st.buf[:0]
	from := 0 // elems[from:i] are handled and not yet counted as left
	for i := range elems {
		if gen.Load()-g0 >= splitAfter {
			// 10 to 20 ms on this batch, or a halt (progress.go).
			st.sr.doneBatch(start)
			st.sr.ctr.left.Add(int64(i - from))
			from = i
			err := st.handOn(ctx, out)
			clear(out)
			out = out[:0]
			if err != nil || rt.halted() {
				return cmp.Or(err, errAbandoned)
			}
			g0, start = gen.Load(), st.sr.timeBatch()
		}
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
			out = append(out, Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner})
		}
	}
	st.sr.doneBatch(start)
	st.buf = out
	st.sr.ctr.left.Add(int64(len(elems) - from))
	err := st.handOn(ctx, out)
	clear(out)
	return err
}

// handOn pushes out downstream.
func (st *flatStage[T, U]) handOn(ctx context.Context, out []Element[U]) error {
	st.sr.ctr.out.Add(int64(len(out)))
	if len(out) == 0 {
		return nil
	}
	return st.down.push(ctx, out)
}

func (st *flatStage[T, U]) close(ctx context.Context) error { return st.down.close(ctx) }
