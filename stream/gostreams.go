package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	streams "github.com/reugn/go-streams"
)

// go-streams interop, both ways:
//
//   - GoSource makes a strom Source a go-streams streams.Source, and GoSink a
//     strom Sink a streams.Sink, so a plain go-streams pipeline reads from
//     and writes to the log. go-streams has no acknowledgements, so neither
//     saves positions: see their docs for what that means after a crash.
//   - Via puts a go-streams streams.Flow inside a strom pipeline, which keeps
//     checkpointing at-least-once under the rule written in its doc.
//
// Why the adapter lives here and not in a package of its own: what it
// costs a program that imports stream and never calls it is go-streams'
// root package, 60 lines of interfaces that import nothing (measured
// 2026-12-02 on a program running From(source.Partition(...)).Map(...)
// .Checkpointing(store).Run(ctx), with and without this file: go list
// -deps 262 packages against 261, the binary 248 bytes larger, stripped
// the same size); go-streams' flow package, which does the work, is
// imported only by those who use it. Via, however, is a stage: it needs
// chain, the runtime (stop, spawn, the stall hook) and the elements'
// unexported owner through which a record is finished, and a package
// outside stream could reach those only through an exported seam that
// would let any package finish records out of turn. docs/pipelines.md
// ("Why the adapter lives in package stream") has the numbers.

// StageVia is the stage name of [Via] in errors and [Stream.Stats].
const StageVia = "via"

// Defaults of the go-streams adapters.
const (
	// DefaultGoBatchSize is how many values [GoSink] gathers into one Write
	// by default: 256, as the log's sources hand out batches of a few
	// hundred small records and one Write of the log sink is one append
	// call.
	DefaultGoBatchSize = 256
	// DefaultGoLinger is how long [GoSink] waits, after the first value of a
	// batch arrived, for the batch to fill before it writes it anyway: 10ms,
	// so a trickle of values is written within 10ms instead of waiting for
	// DefaultGoBatchSize of them.
	DefaultGoLinger = 10 * time.Millisecond
	// DefaultViaStallTimeout is how long [Via] lets the source wait for room
	// while the flow holds back a whole [WithMaxInFlight] of a partition's
	// records and emits nothing, before it fails the pipeline with
	// [ErrFlowStalled]: 5s (wall clock).
	DefaultViaStallTimeout = 5 * time.Second
)

var (
	// ErrWrongType is wrapped by the error of a go-streams adapter that got
	// a value of another type than the one it was built for: [GoSink]'s Err
	// and [Via]'s [*RecordError] say which type they got and which they
	// wanted.
	ErrWrongType = errors.New("stream: go-streams value of the wrong type")
	// ErrFlowEmitsMore is wrapped by the error Run returns when the flow of
	// a [Via] emitted more values than it was given: Via needs a flow that
	// emits at most one value per input, in input order.
	ErrFlowEmitsMore = errors.New("stream: Via needs a flow that emits at most one value per input")
	// ErrFlowUnsupported is wrapped by the error Run returns when the flow
	// of a [Via] is one of go-streams' own flows that breaks Via's rule
	// (emits more than one value per input, or not in input order), or
	// when a flow closed its output while Via still had values to give it.
	ErrFlowUnsupported = errors.New("stream: Via cannot keep at-least-once with this flow")
	// ErrFlowStalled is wrapped by the error Run returns when the source has
	// waited [DefaultViaStallTimeout] (or [GoStallTimeout]) for room while
	// the flow of a [Via] held back [WithMaxInFlight] records of a partition
	// without emitting anything: a flow that drops (or gathers) values keeps
	// their positions unfinished until the drain, and the pipeline would
	// otherwise hang.
	ErrFlowStalled = errors.New("stream: Via: the flow holds back the records the source waits for")
)

// GoOption configures a go-streams adapter: [GoSource], [GoSink] or [Via].
// Each option's doc says which of them it applies to; the others ignore it.
type GoOption interface{ applyGo(*goConfig) }

type goOptionFunc func(*goConfig)

func (f goOptionFunc) applyGo(c *goConfig) { f(c) }

// goConfig holds the adapters' settings; defaultGoConfig lists every
// default.
type goConfig struct {
	buffer       int
	batchSize    int
	linger       time.Duration
	name         string
	stallTimeout time.Duration
}

func defaultGoConfig(opts []GoOption) goConfig {
	c := goConfig{batchSize: DefaultGoBatchSize, linger: DefaultGoLinger, name: StageVia, stallTimeout: DefaultViaStallTimeout}
	for _, o := range opts {
		if o != nil {
			o.applyGo(&c)
		}
	}
	return c
}

// GoBuffer gives the channel the adapter makes room for n values: [GoSource]'s
// Out, [GoSink]'s In. The default, 0, makes them unbuffered, as go-streams'
// own flows are. n < 0 is 0.
func GoBuffer(n int) GoOption {
	return goOptionFunc(func(c *goConfig) { c.buffer = max(n, 0) })
}

// GoBatch sets how [GoSink] gathers values into Writes: up to size values
// per Write (default [DefaultGoBatchSize]; size < 1 is 1), written when
// full, linger after the batch's first value arrived (default
// [DefaultGoLinger]; linger <= 0 waits for a full batch), or when In is
// closed.
func GoBatch(size int, linger time.Duration) GoOption {
	return goOptionFunc(func(c *goConfig) { c.batchSize, c.linger = max(size, 1), max(linger, 0) })
}

// GoName names a [Via] stage in errors and [Stream.Stats] (default
// [StageVia], "via").
func GoName(name string) GoOption {
	return goOptionFunc(func(c *goConfig) {
		if name != "" {
			c.name = name
		}
	})
}

// GoStallTimeout sets how long [Via] lets the source wait for room while the
// flow holds back a whole [WithMaxInFlight] of a partition without emitting,
// before Run fails with [ErrFlowStalled] (default [DefaultViaStallTimeout],
// wall clock). d <= 0 keeps the default.
func GoStallTimeout(d time.Duration) GoOption {
	return goOptionFunc(func(c *goConfig) {
		if d > 0 {
			c.stallTimeout = d
		}
	})
}

// ---- GoSource ----

// GoStreamsSource is a strom [Source] seen as a go-streams streams.Source,
// made by [GoSource].
type GoStreamsSource[T any] struct {
	ctx  context.Context
	src  Source[T]
	out  chan any
	done chan struct{}

	mu  sync.Mutex
	err error
}

var _ streams.Source = (*GoStreamsSource[int])(nil)

// GoSource returns a go-streams streams.Source that reads src, a batch at a
// time, on a goroutine it starts at once, and sends each element's Value
// (a T, as an any) to Out in order:
//
//	stream.GoSource(ctx, source.Topic(lg, "events", source.Earliest, source.Replay())).
//		Via(flow.NewMap(transform, 1)).
//		To(stream.GoSink(ctx, sink.Log(out)))
//
// Out is closed when src ends (io.EOF), when a Read fails, and within a
// moment of ctx being cancelled, even when nothing reads Out any more: every
// send waits on ctx too, and src's Read must return promptly once ctx is
// done (the [Source] contract). src is closed before Out is, and the
// goroutine ends with it, so nothing outlives a cancel but what reads Out.
// [GoStreamsSource.Err] then tells how it ended. By default Out is
// unbuffered ([GoBuffer] changes it). A src that reuses its values' bytes
// between Reads ([BytesReuser]) is refused: Out closes at once and Err is
// [ErrReusedBytes], since go-streams may hold a value for as long as it
// likes.
//
// Delivery: go-streams has no acknowledgements, so GoSource never learns
// when a value is done with, and it saves no positions: a position saved
// when a value was handed to Out could skip values still inside a flow when
// the process dies. Start src from the position you want (source.Earliest,
// source.At, or source.FromStore with a store something else keeps). For
// checkpointed at-least-once over a go-streams flow, run a strom pipeline
// with the flow inside it: [Via]. GoSource panics if src is nil.
func GoSource[T any](ctx context.Context, src Source[T], opts ...GoOption) *GoStreamsSource[T] {
	if src == nil {
		panic("stream: GoSource called with a nil source")
	}
	cfg := defaultGoConfig(opts)
	s := &GoStreamsSource[T]{ctx: ctx, src: src, out: make(chan any, cfg.buffer), done: make(chan struct{})}
	go s.run()
	return s
}

// Out returns the channel of the source's values, each a T as an any. It
// is closed when the source ends, fails or is cancelled.
func (s *GoStreamsSource[T]) Out() <-chan any { return s.out }

// Via sends every value of Out to f's In on a goroutine of its own, closes
// f's In once Out is closed or ctx is cancelled, and returns f, as
// go-streams' own sources do.
func (s *GoStreamsSource[T]) Via(f streams.Flow) streams.Flow {
	go s.transmit(f)
	return f
}

// To sends every value of Out to sink's In, closes it once Out is closed
// or ctx is cancelled, and returns once sink.AwaitCompletion has.
func (s *GoStreamsSource[T]) To(sink streams.Sink) {
	s.transmit(sink)
	sink.AwaitCompletion()
}

// Done is closed once Out is closed and src is closed.
func (s *GoStreamsSource[T]) Done() <-chan struct{} { return s.done }

// Err returns what ended the source, once [GoStreamsSource.Done] is
// closed: nil at src's end (io.EOF) and after ctx was cancelled, a
// [*SourceError] wrapping Read's error when a Read failed, [ErrReusedBytes]
// for a source that reuses its bytes, or the error of src.Close. Before
// Done it returns nil.
func (s *GoStreamsSource[T]) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *GoStreamsSource[T]) run() {
	err := s.emit()
	if cerr := s.src.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("stream: GoSource: close source: %w", cerr)
	}
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	close(s.out)
	close(s.done)
}

// emit reads src and sends its values to out until src ends, fails, or ctx
// is cancelled.
func (s *GoStreamsSource[T]) emit() error {
	if r, ok := s.src.(BytesReuser); ok && r.ReusesBytes() {
		return ErrReusedBytes
	}
	ctx := s.ctx
	for ctx.Err() == nil {
		elems, err := s.src.Read(ctx)
		switch {
		case err == nil, errors.Is(err, io.EOF):
		case cancelled(ctx, err):
			return nil
		default:
			return &SourceError{Err: err} // the batch read with a failure is not handed on
		}
		for i := range elems {
			select {
			case s.out <- any(elems[i].Value):
			case <-ctx.Done():
				return nil
			}
		}
		if err != nil {
			return nil // io.EOF
		}
	}
	return nil
}

func (s *GoStreamsSource[T]) transmit(in streams.Inlet) {
	defer close(in.In())
	for v := range s.out {
		select {
		case in.In() <- v:
		case <-s.ctx.Done():
			return
		}
	}
}

// ---- GoSink ----

// GoStreamsSink is a strom [Sink] seen as a go-streams streams.Sink, made by
// [GoSink].
type GoStreamsSink[T any] struct {
	ctx    context.Context
	sink   Sink[T]
	in     chan any
	done   chan struct{}
	size   int
	linger time.Duration

	mu  sync.Mutex
	err error
}

var _ streams.Sink = (*GoStreamsSink[int])(nil)

// GoSink returns a go-streams streams.Sink that writes the values sent to
// its In to sink, in order, in batches: one sink.Write per
// [DefaultGoBatchSize] (256) values, or [DefaultGoLinger] (10ms) after the
// first value of a batch arrived, or when In is closed, whichever comes
// first ([GoBatch] changes both). Every value must be a T; any other is an
// error wrapping [ErrWrongType] naming the type it got and T. The Writes
// get ctx.
//
// The first failure (a failed Write, a value of the wrong type, ctx done
// before a Write) is kept for [GoStreamsSink.Err], like bufio.Writer's: the
// sink writes nothing more, but goes on reading In and dropping what
// arrives, so the go-streams pipeline in front of it can still end.
// AwaitCompletion returns once In is closed and every value before it was
// written (or dropped after a failure). The sink's goroutine ends when In
// is closed, not when ctx is: [GoSource] closes what it feeds when its ctx
// is cancelled, and go-streams' flows close their output once their input
// is closed.
//
// Delivery: a value counts as written once the Write holding it returned
// nil; go-streams has no way to tell upstream about it, so values in a
// batch not yet written when the process dies are lost, and nothing records
// how far the input got. What restarts such a pipeline must start its source
// from a position it knows was written (for a log, the output topic's own
// records can say how far it got), or use a strom pipeline ([Stream.To]),
// whose positions are saved only after the sink's Write returned. GoSink
// panics if sink is nil.
func GoSink[T any](ctx context.Context, sink Sink[T], opts ...GoOption) *GoStreamsSink[T] {
	if sink == nil {
		panic("stream: GoSink called with a nil sink")
	}
	cfg := defaultGoConfig(opts)
	k := &GoStreamsSink[T]{ctx: ctx, sink: sink, in: make(chan any, cfg.buffer), done: make(chan struct{}),
		size: cfg.batchSize, linger: cfg.linger}
	go k.run()
	return k
}

// In returns the channel to send values to; the upstream closes it when no
// more will come.
func (k *GoStreamsSink[T]) In() chan<- any { return k.in }

// AwaitCompletion blocks until In was closed and everything sent before was
// written (or dropped after a failure, see [GoStreamsSink.Err]).
func (k *GoStreamsSink[T]) AwaitCompletion() { <-k.done }

// Err returns the sink's first failure: a sink.Write error (wrapped with the
// number of values of the batch), a value of the wrong type (wrapping
// [ErrWrongType]), or ctx's error when ctx ended before a batch could be
// written. nil when nothing failed so far; after AwaitCompletion it is final.
func (k *GoStreamsSink[T]) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *GoStreamsSink[T]) setErr(err error) {
	k.mu.Lock()
	if k.err == nil {
		k.err = err
	}
	k.mu.Unlock()
}

func (k *GoStreamsSink[T]) run() {
	defer close(k.done)
	buf := make([]T, 0, k.size)
	failed := false
	var timer *time.Timer
	var timerC <-chan time.Time
	flush := func() {
		if timer != nil {
			timer.Stop()
			timerC = nil
		}
		if len(buf) == 0 {
			return
		}
		if !failed {
			err := k.ctx.Err()
			if err == nil {
				if err = k.sink.Write(k.ctx, buf); err != nil {
					err = fmt.Errorf("stream: GoSink: write of %d values: %w", len(buf), err)
				}
			} else {
				err = fmt.Errorf("stream: GoSink: %d values not written: %w", len(buf), err)
			}
			if err != nil {
				k.setErr(err)
				failed = true
			}
		}
		clear(buf)
		buf = buf[:0]
	}
	for {
		select {
		case v, ok := <-k.in:
			if !ok {
				flush()
				return
			}
			if failed {
				continue // drop: the go-streams pipeline must still be able to end
			}
			t, ok := v.(T)
			if !ok {
				flush() // what came before it is good
				k.setErr(fmt.Errorf("%w: GoSink got %T, wants %s", ErrWrongType, v, typeName[T]()))
				failed = true
				continue
			}
			buf = append(buf, t)
			switch {
			case len(buf) >= k.size:
				flush()
			case len(buf) == 1 && k.linger > 0:
				if timer == nil {
					timer = time.NewTimer(k.linger)
				} else {
					timer.Reset(k.linger)
				}
				timerC = timer.C
			}
		case <-timerC:
			timerC = nil
			flush()
		}
	}
}

func typeName[T any]() string { return reflect.TypeFor[T]().String() }

// ---- Via ----

// Via returns a Stream of the values a go-streams flow f emits when given
// the values of s: each value of s is sent to f.In(), each value f.Out()
// emits must be a U and goes on downstream. It is a function because Go
// methods cannot take type parameters. opts: [GoName], [GoStallTimeout].
//
// # The rule that keeps at-least-once
//
// Inside a flow a value is an any with no lineage, so Via pairs by count:
// the k-th value f emits gets the lineage (topic, partition, offset) of the
// k-th value Via sent in, and finishing it downstream finishes that input.
// This is safe for every flow that emits at most one value per input, in
// input order: then the k-th output came from an input j >= k, and every
// input up to j was handled by the flow, its output (if any) being one of
// the first k, each still holding back its own lineage until it finishes.
// So a position never passes a record whose output is still in flight.
// That covers go-streams' flow.Map, flow.Filter (parallelism 1),
// flow.PassThrough, flow.Fold, flow.Reduce, flow.Throttler, flow.Batch and
// the tumbling and session windows.
//
// Flows that break the rule: a flow emitting more values than it was given
// (flow.FlatMap) would finish records whose outputs have not yet come out;
// a flow that reorders (flow.Map, flow.Filter or flow.FlatMap built with
// parallelism > 1: in go-streams v0.13.0 their workers share one output
// channel, so values leave in completion order; flow.Keyed) could pair an
// early output with a record still being worked on. Run refuses go-streams'
// own flows of those kinds (an error wrapping [ErrFlowUnsupported],
// recognised by their type and parallelism); for parallel work put
// [Parallel] or [KeyOrdered] on a strom stage next to the flow instead. A
// flow of another package that emits more values than it was given fails
// Run with [ErrFlowEmitsMore] once its outputs outnumber its inputs, which
// may be later than its first extra output (until then extra outputs are
// paired with later inputs, so positions saved before the failure may
// already be past records still in the flow); one that reorders cannot be
// detected at all. Neither must be used.
//
// To chain flows, call Via once per flow: go-streams' Flow.Via returns the
// last flow of the chain, whose In is not the chain's.
//
// # Flows that drop values
//
// A flow that drops a value (a filter, or a batch or window that gathers
// many into one) leaves that record's lineage unpaired: positions then
// trail behind by the number of values dropped so far, and catch up only at
// the drain, when the source ends or Run's context is cancelled. Since the
// source stops at [WithMaxInFlight] unfinished records of a partition
// (65,536 by default), a flow that drops that many would hang the
// pipeline: instead, when the source has waited for room for
// [DefaultViaStallTimeout] (5s, or [GoStallTimeout]) while the values the
// flow holds without output span a whole WithMaxInFlight of a partition,
// Run fails with an error wrapping [ErrFlowStalled]. The lag only grows, so
// a pipeline that never ends (a following source) with a flow that keeps
// dropping, even rarely, ends there in time. Drop records with
// [Stream.Filter] before the flow instead: a filtered record is finished at
// once.
//
// # Drain, errors and goroutines
//
// When the source ends or Run's context is cancelled, Via closes f.In(),
// passes on what f still emits until f.Out() is closed, and then finishes
// every record f did not answer for (f handled them all). When the
// pipeline stops (a failure, or a cancel without [WithDrainTimeout]), Via
// closes f.In() and reads f.Out() to its end, dropping what comes, so f's
// goroutines end before Run returns (Run waits for f's function to return,
// as it waits for any stage's). An output that is not a U fails Run with a
// [*RecordError] (stage "via", the paired record's lineage) wrapping
// [ErrWrongType]; so does a flow that closes its output before Via closed
// its input (wrapping [ErrFlowUnsupported]). go-streams flows have no error
// path: a function that fails must say so in the value it emits, for a
// stage after Via to act on. A pipeline that is never run, or whose Run
// returns before starting ([ErrAlreadyRun], [ErrReusedBytes]), leaves f
// running: close f.In() to end it. Via panics if f is nil.
func Via[T, U any](s *Stream[T], f streams.Flow, opts ...GoOption) *Stream[U] {
	if f == nil {
		panic("stream: Via called with a nil flow")
	}
	cfg := defaultGoConfig(opts)
	ctr := s.p.counters(cfg.name)
	s.p.noteEffect(fmt.Sprintf("go-streams flow %q (Via)", cfg.name),
		"a flow's stages and sinks are outside the pipeline: what they wrote could not be taken back when a transaction aborts")
	ctr.detached = true // collect hands on, on its own goroutine
	out := chainTimed(s, ctr, 1, func(rt *runtime, down outlet[U]) outlet[T] {
		st := &viaStage[T, U]{rt: rt, ctr: ctr, name: cfg.name, f: f, in: f.In(), out: f.Out(), down: down,
			stallTimeout: cfg.stallTimeout, bad: checkFlow(f, cfg.name)}
		// Values stay in the flow past the next Read and finish on the
		// collector goroutine.
		rt.async, rt.holds = true, true
		rt.flushers = append(rt.flushers, st.checkStall)
		rt.spawn(st.collect)
		return st
	})
	return reordering(out, cfg.name)
}

// viaStage is Via in one Run: push sends values into the flow on the
// upstream goroutine; collect reads the flow's output on its own goroutine
// and pairs each value with the oldest unpaired input.
type viaStage[T, U any] struct {
	rt           *runtime
	ctr          *stageCounters
	name         string
	f            streams.Flow
	in           chan<- any
	out          <-chan any
	down         outlet[U]
	stallTimeout time.Duration
	bad          error // set when f is a go-streams flow that breaks the rule

	sendMu   sync.Mutex  // held while sending into in, and to close it
	inClosed atomic.Bool // set before in is closed

	mu         sync.Mutex // guards what follows
	pending    lineageQueue
	sent       int64
	emitted    int64
	lastOut    time.Time // wall clock of the last output
	stallSince time.Time // wall clock the source was first seen waiting on a full span
	lastCheck  time.Time // wall clock of the last checkStall
}

// pendingInput is the lineage of a value sent into the flow that no output
// has been paired with yet.
type pendingInput struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	timestamp int64
	owner     acker
}

// lineageQueue is a FIFO of pendingInput.
type lineageQueue struct {
	items []pendingInput
	head  int
}

func (q *lineageQueue) len() int { return len(q.items) - q.head }

func (q *lineageQueue) push(p pendingInput) { q.items = append(q.items, p) }

func (q *lineageQueue) pop() pendingInput {
	p := q.items[q.head]
	q.items[q.head] = pendingInput{}
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 1024 && 2*q.head >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return p
}

func (st *viaStage[T, U]) push(_ context.Context, elems []Element[T]) error {
	st.ctr.in.Add(int64(len(elems)))
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if st.inClosed.Load() {
		return nil // the pipeline is stopping: nothing more goes in
	}
	for i := range elems {
		e := &elems[i]
		st.mu.Lock()
		// Registered before the send, so an output that comes out at once
		// finds its lineage.
		st.pending.push(pendingInput{topic: e.Topic, partition: e.Partition, offset: e.Offset, epoch: e.Epoch, timestamp: e.Timestamp, owner: e.owner})
		st.sent++
		st.mu.Unlock()
		select {
		case st.in <- any(e.Value):
		case <-st.rt.stop:
			return nil
		}
	}
	return nil
}

// close ends the flow's input; collect passes the close on once the flow's
// output is closed.
func (st *viaStage[T, U]) close(context.Context) error {
	st.closeIn()
	return nil
}

func (st *viaStage[T, U]) closeIn() {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	if !st.inClosed.Swap(true) {
		close(st.in)
	}
}

// abandon ends the flow when the pipeline stops: it closes the flow's input
// and reads its output to the end, dropping what comes, so the flow's
// goroutines end. The stop must be signalled first (rt.stop), so that a push
// blocked on the flow's input lets go of sendMu.
func (st *viaStage[T, U]) abandon() {
	st.closeIn()
	for range st.out {
	}
}

// collect reads the flow's output, pairs every value with its lineage and
// hands them downstream in batches of what has come out.
func (st *viaStage[T, U]) collect() error {
	rt := st.rt
	if st.bad != nil {
		rt.fail(st.bad)
		st.abandon()
		return nil
	}
	var buf []Element[U]
	var offs []int64
	for {
		var v any
		var ok bool
		select {
		case v, ok = <-st.out:
		case <-rt.stop:
			st.abandon()
			return nil
		}
		closed := !ok
		buf = buf[:0]
		for ok {
			e, err := st.pair(v)
			if err != nil {
				rt.fail(err)
				st.abandon()
				return nil
			}
			buf = append(buf, e)
			if len(buf) >= maxCollect {
				break
			}
			select {
			case v, ok = <-st.out:
				closed = !ok
			default:
				ok = false // nothing more yet: hand on what came
			}
		}
		if len(buf) > 0 {
			st.ctr.out.Add(int64(len(buf)))
			st.ctr.left.Add(int64(len(buf)))
			if err := st.down.push(rt.stageCtx, buf); err != nil {
				rt.fail(err)
				st.abandon()
				return nil
			}
			clear(buf)
		}
		if closed {
			return st.end(&offs)
		}
	}
}

// end runs once the flow's output is closed: after Via closed its input,
// every input still unpaired was dropped by the flow and is finished; before
// that the flow is broken.
func (st *viaStage[T, U]) end(offs *[]int64) error {
	rt := st.rt
	if !st.inClosed.Load() {
		st.mu.Lock()
		sent, emitted := st.sent, st.emitted
		st.mu.Unlock()
		rt.fail(&RecordError{Stage: st.name, Err: fmt.Errorf(
			"%w: the flow closed its output while Via had more to send (%d values sent, %d emitted)",
			ErrFlowUnsupported, sent, emitted)})
		st.abandon()
		return nil
	}
	st.mu.Lock()
	dropped := make([]Element[struct{}], 0, st.pending.len())
	for st.pending.len() > 0 {
		p := st.pending.pop()
		dropped = append(dropped, Element[struct{}]{Topic: p.topic, Partition: p.partition, Offset: p.offset, owner: p.owner})
	}
	st.mu.Unlock()
	if len(dropped) > 0 {
		*offs = finish(dropped, *offs)
		rt.noteFinished(len(dropped))
	}
	return st.down.close(rt.stageCtx)
}

// pair gives an output value the lineage of the oldest unpaired input.
func (st *viaStage[T, U]) pair(v any) (Element[U], error) {
	st.mu.Lock()
	if st.pending.len() == 0 {
		sent, emitted := st.sent, st.emitted+1
		st.mu.Unlock()
		return Element[U]{}, &RecordError{Stage: st.name, Err: fmt.Errorf(
			"%w: the flow emitted value %d after only %d values were sent in (for a flow that splits values, use FlatMap)",
			ErrFlowEmitsMore, emitted, sent)}
	}
	p := st.pending.pop()
	st.emitted++
	st.lastOut = time.Now()
	st.mu.Unlock()
	e := Element[U]{Topic: p.topic, Partition: p.partition, Offset: p.offset, Epoch: p.epoch, Timestamp: p.timestamp, owner: p.owner}
	u, ok := v.(U)
	if !ok {
		return e, &RecordError{Stage: st.name, Topic: p.topic, Partition: p.partition, Offset: p.offset,
			Err: fmt.Errorf("%w: the flow emitted %T, Via wants %s", ErrWrongType, v, typeName[U]())}
	}
	e.Value = u
	return e, nil
}

// checkStall is called by the source goroutine while it waits for room in
// the tracker (runtime.waitRoom, every 20ms). It fails the pipeline when
// the inputs the flow holds without output span a whole WithMaxInFlight of
// a partition, so the source cannot read that partition on, and the flow
// has emitted nothing for stallTimeout since that was first seen.
func (st *viaStage[T, U]) checkStall(context.Context) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	now := time.Now()
	gap := now.Sub(st.lastCheck) > 200*time.Millisecond // the source did not wait all along
	st.lastCheck = now
	full, held := st.fullSpanLocked()
	if full == nil {
		st.stallSince = time.Time{}
		return nil
	}
	if st.stallSince.IsZero() || gap || st.lastOut.After(st.stallSince) {
		st.stallSince = now
		return nil
	}
	if now.Sub(st.stallSince) < st.stallTimeout {
		return nil
	}
	return &RecordError{Stage: st.name, Topic: full.topic, Partition: full.partition, Offset: full.offset,
		Err: fmt.Errorf("%w: %d values sent into the flow from offset %d on have no output after %v (%d sent, %d emitted in all; the source waits at WithMaxInFlight %d): "+
			"a flow that drops values holds their positions until the drain; drop them with Filter before Via",
			ErrFlowStalled, held, full.offset, st.stallTimeout, st.sent, st.emitted, st.rt.p.cfg.maxInFlight)}
}

// fullSpanLocked returns the oldest unpaired input of a partition whose
// unpaired inputs span at least the tracker's bound, and how many of that
// partition's inputs are unpaired; nil when there is none.
func (st *viaStage[T, U]) fullSpanLocked() (*pendingInput, int) {
	type span struct {
		first *pendingInput
		last  int64
		n     int
	}
	limit := int64(st.rt.p.cfg.maxInFlight)
	if int64(st.pending.len()) == 0 {
		return nil, 0
	}
	spans := make(map[viaPartition]*span)
	for i := st.pending.head; i < len(st.pending.items); i++ {
		p := &st.pending.items[i]
		if p.topic == "" {
			continue
		}
		k := viaPartition{p.topic, p.partition}
		s := spans[k]
		if s == nil {
			s = &span{first: p}
			spans[k] = s
		}
		s.last, s.n = p.offset, s.n+1
	}
	for _, s := range spans {
		if s.last-s.first.offset+1 >= limit {
			return s.first, s.n
		}
	}
	return nil, 0
}

type viaPartition struct {
	topic     string
	partition int32
}

// checkFlow returns an error wrapping ErrFlowUnsupported when f is one of
// go-streams' own flows that breaks Via's rule, nil otherwise. It knows
// them by type name and by their parallelism field, as of v0.13.0.
func checkFlow(f streams.Flow, stage string) error {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	t := v.Type().Elem()
	if t.PkgPath() != "github.com/reugn/go-streams/flow" {
		return nil
	}
	name, _, _ := strings.Cut(t.Name(), "[")
	var why string
	switch name {
	case "FlatMap":
		why = "flow.FlatMap may emit several values per input"
	case "SlidingWindow":
		why = "flow.SlidingWindow emits a value in every window it falls in"
	case "Keyed":
		why = "flow.Keyed emits in no fixed order"
	}
	if why == "" && t.Kind() == reflect.Struct {
		if p := v.Elem().FieldByName("parallelism"); p.IsValid() && p.CanInt() && p.Int() > 1 {
			why = fmt.Sprintf("flow.%s with parallelism %d emits in completion order, not input order (use parallelism 1, and stream.Parallel on a strom stage)", name, p.Int())
		}
	}
	if why == "" {
		return nil
	}
	return &RecordError{Stage: stage, Err: fmt.Errorf("%w: %s", ErrFlowUnsupported, why)}
}
