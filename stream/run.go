package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// runtime is one Run of a pipeline: its contexts, goroutines, completion
// tracker and first failure.
type runtime struct {
	p      *pipeline
	parent context.Context // Run's ctx

	// srcCtx ends reading: Run's ctx, also cancelled on a failure.
	srcCtx    context.Context
	srcCancel context.CancelFunc
	// stageCtx is what stage functions get: it outlives a cancellation of
	// Run's ctx by the drain timeout, and ends on a failure.
	stageCtx    context.Context
	stageCancel context.CancelFunc

	stop     chan struct{} // closed on a failure or an abort: every goroutine leaves
	stopOnce sync.Once
	done     chan struct{} // closed when every goroutine has returned

	tracker *checkpoint.Tracker
	tel     *telemetry // metrics and spans (telemetry.go)
	// async is set when a stage finishes records on goroutines of its own
	// (Parallel, KeyOrdered, Batch's linger): CheckpointEachBatch then also
	// saves when they finish, not only after each source batch.
	async bool
	// holds is set when a stage keeps elements past its push (Parallel,
	// KeyOrdered, Batch): a source must not reuse their memory then.
	holds bool
	// flushers hand on the partial batches of Batch stages (waitRoom), in
	// the order the stages were wired: downstream first.
	flushers []func(context.Context) error
	clock    Clock

	starts []func() error
	wg     sync.WaitGroup

	mu         sync.Mutex
	err        error // the first failure
	panicked   bool
	panicVal   any
	panicStack []byte // the panicking goroutine's stack, taken where it panicked

	// gen is the progress generation the sequential stages watch between
	// records (progress.go): it moves every splitTick while Run runs, and
	// takes haltBit when the stages' context ends.
	gen atomic.Uint64
	// interrupted is set when Run's context ended while the pipeline was
	// still running (a source still reading, records in flight): Run then
	// reports a deadline.
	interrupted atomic.Bool

	finished     atomic.Int64  // records finished since the last save
	wantProgress bool          // the checkpoint policy counts records or saves each batch
	progress     chan struct{} // capacity 1: something finished
	saveReq      chan chan error

	// stateful are the pipeline's stateful stages, in wiring order, and
	// stateStores the checkpoint stores that keep their state (state.go).
	stateful []statefulStage
	// lockingState is set while saveState takes the stateful stages'
	// locks: a stage waiting with its upstream's lock held (a windowed
	// join's input aligning) stops waiting, or the save would wait for it
	// while it waits for an input the save holds back.
	lockingState atomic.Bool
	stateStores  []checkpoint.StateStore
	stateBytes   atomic.Int64 // the size of the last snapshot saved
	stateName    string       // what the state is saved under: the stages' names, upstream first, joined by "."

	// partitioned: a source is Assignable, and the stateful stages keep
	// their state per source partition, saved to changelog
	// (partstate.go, rebalance.go).
	partitioned bool
	changelog   checkpoint.ChangelogStore
	changes     []checkpoint.Change // scratch of saveChanges
	// revokes counts the partitions revoked or lost: until the first,
	// stages do not look for records of revoked partitions.
	revokes atomic.Int64
	// beginMu orders the source's registration of a batch with the
	// trackers against an assignment replacing a partition's tracker.
	beginMu sync.Mutex

	// eos is the pipeline's Transactor under ExactlyOnce (exactlyonce.go),
	// nil otherwise. txnGate is held by a transaction's end, and read-held
	// by what hands records in (a source's push, a processing-time
	// Window's timer), so that nothing starts while the pipeline drains
	// and commits. settleWake is signalled when a Window's results still
	// owed downstream drop to none.
	eos        Transactor
	txnGate    sync.RWMutex
	settleWake chan struct{}
	txnAborts  atomic.Int64
	// retired are the trackers Assigned replaced (under beginMu), whose
	// records may still run: a transaction's end waits for them too.
	retired []*checkpoint.PartitionTracker
	// revokedInTxn: a partition was revoked or lost since the last
	// transaction ended; the open one cannot commit (its outputs may
	// hold records of the partition past the position it leaves with).
	revokedInTxn atomic.Bool

	saveFailed atomic.Bool
	saveMu     sync.Mutex // one save at a time; guards saved and parts
	// stateMu orders the saves of state (saveState, from taking the
	// changes to their save's end) with the assignments and revocations
	// that restore, save and drop a partition's state. It is not held
	// while positions are saved: a consumer group's commit waits while
	// the group rebalances, and the rebalance waits for the hooks.
	stateMu  sync.Mutex
	saved    map[*checkpoint.PartitionTracker]checkpoint.Position
	batch    []checkpoint.TopicPosition     // scratch of save: the positions to save
	batchPts []*checkpoint.PartitionTracker // and their trackers
	parts    []*checkpoint.PartitionTracker
}

func newRuntime(ctx context.Context, p *pipeline) *runtime {
	rt := &runtime{
		p:        p,
		parent:   ctx,
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		tracker:  checkpoint.NewTracker(p.cfg.maxInFlight),
		clock:    p.cfg.clock,
		progress: make(chan struct{}, 1),
		saveReq:  make(chan chan error),
		saved:    make(map[*checkpoint.PartitionTracker]checkpoint.Position),

		settleWake: make(chan struct{}, 1),
	}
	for _, src := range p.sources {
		if _, ok := src.(Assignable); ok {
			rt.partitioned = true
		}
	}
	rt.srcCtx, rt.srcCancel = context.WithCancel(ctx)
	if p.cfg.drainTimeout > 0 {
		rt.stageCtx, rt.stageCancel = context.WithCancel(context.WithoutCancel(ctx))
	} else {
		// No drain: stages see Run's cancellation at the same instant.
		rt.stageCtx, rt.stageCancel = context.WithCancel(ctx)
	}
	return rt
}

// spawn registers a goroutine Run starts once the pipeline is wired. A
// returned error fails the pipeline; a panic is carried to Run.
func (rt *runtime) spawn(fn func() error) { rt.starts = append(rt.starts, fn) }

func (rt *runtime) start() {
	for _, fn := range rt.starts {
		rt.wg.Add(1)
		go func() {
			defer rt.wg.Done()
			defer rt.catch()
			if err := fn(); err != nil {
				rt.fail(err)
			}
		}()
	}
	go func() {
		rt.wg.Wait()
		close(rt.done)
	}()
}

// catch turns a panic of a pipeline goroutine into a stop of the pipeline
// and a panic again on Run's goroutine.
func (rt *runtime) catch() {
	if v := recover(); v != nil {
		// The stack is taken here, in the deferred call, while the
		// panicking frames are still on it: Run panics again on another
		// goroutine, whose own trace would show only Run.
		st := stack()
		rt.mu.Lock()
		if !rt.panicked {
			rt.panicked, rt.panicVal, rt.panicStack = true, v, st
		}
		rt.mu.Unlock()
		rt.abort()
	}
}

// fail records err as the pipeline's failure, unless it only reports the
// cancellation of Run's context or another failure came first, and stops
// the pipeline.
func (rt *runtime) fail(err error) {
	if err == nil {
		return
	}
	if errors.Is(err, errAbandoned) || (rt.parent.Err() != nil && cancelled(rt.parent, err)) ||
		(rt.stageCtx.Err() != nil && rt.parent.Err() != nil && errors.Is(err, context.Canceled)) {
		rt.abort()
		return
	}
	rt.mu.Lock()
	if rt.err == nil {
		rt.err = err
	}
	rt.mu.Unlock()
	rt.abort()
}

// abort stops every goroutine without recording a failure.
func (rt *runtime) abort() {
	rt.stopOnce.Do(func() {
		close(rt.stop)
		rt.srcCancel()
		rt.stageCancel()
	})
}

func (rt *runtime) stopped() bool {
	select {
	case <-rt.stop:
		return true
	default:
		return false
	}
}

// errAbandoned is what a stage returns when the stage context ended under a
// record: the record is left unfinished and the pipeline winds down without
// an error.
var errAbandoned = errors.New("stream: record abandoned on cancel")

// errSaveFailed answers a save asked for after a save failed.
var errSaveFailed = errors.New("stream: an earlier checkpoint save failed")

// waitRoom waits until pt can begin offset. Records held by Batch stages
// are unfinished until their batch is handed on, and a batch that needs
// more records than the tracker lets the source read would wait forever
// (nested batches, or offsets with gaps that use up the tracker's span), so
// while it waits it hands on every partial batch, upstream ones first, and
// does so again every 20ms for records that reach a batch meanwhile.
func (rt *runtime) waitRoom(pt *checkpoint.PartitionTracker, offset int64) error {
	if len(rt.flushers) == 0 {
		return pt.WaitRoom(rt.srcCtx, offset)
	}
	for {
		for i := len(rt.flushers) - 1; i >= 0; i-- { // registered downstream first
			if err := rt.flushers[i](rt.stageCtx); err != nil {
				return err
			}
		}
		ctx, cancel := context.WithTimeout(rt.srcCtx, 20*time.Millisecond)
		err := pt.WaitRoom(ctx, offset)
		cancel()
		if err == nil || rt.srcCtx.Err() != nil {
			return err
		}
	}
}

// noteFinished tells the checkpointer that n records finished.
func (rt *runtime) noteFinished(n int) {
	if !rt.wantProgress {
		return // only the timer saves: no need to wake the coordinator
	}
	rt.finished.Add(int64(n))
	select {
	case rt.progress <- struct{}{}:
	default:
	}
}

// Run starts the pipeline: every source is read on its own goroutine and
// its records pass through the stages (sequential stages one batch at a
// time on the goroutine that feeds them, [Parallel] and [KeyOrdered] stages
// on their own goroutines), and every record with lineage is tracked until
// it has finished every stage. Positions are saved to the stores of
// [Stream.Checkpointing] by the checkpoint policy and once more when Run
// returns; a position is never past a record that has not finished. A
// sequential stage that has worked on one batch for 10 to 20 ms hands on
// what it finished and goes on with the rest, so positions advance within
// a batch as records finish, whatever the batch size.
//
// Run returns when everything is finished or abandoned and no goroutine it
// started is left:
//
//   - nil when every source ended (io.EOF) and every record read finished;
//   - nil when ctx is cancelled: reading stops, stages stop calling their
//     functions (the calls in progress finish; a function that ignores its
//     context holds Run until it returns), the records not yet handled are
//     abandoned unsaved, and the finished positions are saved. With
//     [WithDrainTimeout] the stages go on with a live context for that
//     long first;
//   - an error wrapping [ErrDeadline] and context.DeadlineExceeded when
//     ctx's deadline expired before the sources ended, after the same
//     drain: a deadline cuts work short, it is not a shutdown;
//   - a [*RecordError] when a stage function or sink fails under the stop
//     policy (the default), a [*SourceError] when a Read fails, an error
//     naming topic, partition and position when a Save fails. Positions of
//     records finished before the failure are still saved; the failed
//     record's never is.
//
// A panic in a stage is carried to Run's goroutine: Run stops the
// pipeline, saves what finished, and panics again with a [*PanicError]
// holding the value and the stack of the goroutine that panicked, so the
// crash shows the function that panicked (unless the stage has [Recover],
// which makes the record's error of it). Saves use
// context.WithoutCancel(ctx). Run closes every source before it returns,
// and returns the Close error if nothing else failed. Run may be called
// once per pipeline; later calls return [ErrAlreadyRun].
func (s *Stream[T]) Run(ctx context.Context) (err error) {
	p := s.p
	if !p.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	if p.nilSrc {
		return errNilSource
	}
	if p.buildErr != nil {
		for _, src := range p.sources {
			_ = src.Close()
		}
		return p.buildErr
	}
	rt := newRuntime(ctx, p)
	rt.tel = newTelemetry(rt)
	defer rt.tel.close()
	defer rt.srcCancel()
	defer rt.stageCancel()
	s.connect(rt, &terminal[T]{rt: rt})
	if rt.holds {
		for _, src := range p.sources {
			if r, ok := src.(BytesReuser); ok && r.ReusesBytes() {
				for _, src := range p.sources {
					_ = src.Close()
				}
				return ErrReusedBytes
			}
		}
	}
	if p.cfg.eos.on {
		tr, err := p.checkExactlyOnce()
		if err != nil {
			for _, src := range p.sources {
				_ = src.Close()
			}
			return err
		}
		rt.eos = tr
	}
	if err := rt.restoreState(ctx); err != nil {
		for _, src := range p.sources {
			_ = src.Close()
		}
		return err
	}
	for _, src := range p.sources {
		// Under ExactlyOnce no position may be committed outside the
		// transactor's transactions: a source.Kafka read into the log
		// would otherwise commit its group's offsets at a revocation,
		// past outputs an abort then truncates.
		if pa, ok := src.(PositionsAware); ok && rt.eos == nil {
			pa.SetPositions(trackerPositions{rt.tracker})
			defer pa.SetPositions(nil)
		}
		if a, ok := src.(Assignable); ok {
			a.SetRebalanceHooks(rt)
			defer a.SetRebalanceHooks(nil)
		}
	}
	if rt.eos != nil {
		// After the hooks are set: a transactor that is the source joins
		// its group here, and assignments restore state through them.
		if err := rt.beginTransactions(ctx); err != nil {
			for _, src := range p.sources {
				_ = src.Close()
			}
			if cancelled(ctx, err) {
				// Stopped before the first record, as Run without
				// ExactlyOnce returns then: nil for a cancel.
				if errors.Is(ctx.Err(), context.DeadlineExceeded) {
					return deadlineError(ctx)
				}
				return nil
			}
			return err
		}
	}
	p.running.Store(rt)
	defer p.running.Store(nil)
	rt.wantProgress = len(p.stores) > 0 && (p.cp.records > 0 || (p.cp.eachBatch && rt.async))
	stopProgress := rt.startProgress()
	stopObserving := rt.startObserving()
	rt.start()
	err = rt.coordinate(ctx)
	stopProgress()
	stopObserving()
	for _, src := range p.sources {
		if cerr := src.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("stream: close source: %w", cerr)
		}
	}
	if rt.panicked {
		if pe, ok := rt.panicVal.(*PanicError); ok {
			panic(pe) // already carries the stack where it began
		}
		panic(&PanicError{Value: rt.panicVal, Stack: rt.panicStack})
	}
	if err == nil && rt.interrupted.Load() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// A deadline is not a shutdown: the work was cut short, and a
		// test's timeout must not read as a pass.
		err = deadlineError(ctx)
	}
	return err
}

// deadlineError is what Run, ConsumeForever and Forever return when ctx's
// deadline stopped them: it wraps context.DeadlineExceeded, and the
// context's cause when one was given (context.WithDeadlineCause).
func deadlineError(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w (%w)", ErrDeadline, ctx.Err(), cause)
	}
	return fmt.Errorf("%w: %w", ErrDeadline, ctx.Err())
}

// coordinate runs on Run's goroutine until every pipeline goroutine has
// returned: it saves positions by the checkpoint policy, answers
// Checkpoint calls, and starts the drain when ctx is cancelled. It then
// makes the final save and returns the pipeline's result.
func (rt *runtime) coordinate(ctx context.Context) error {
	cp := rt.p.cp
	var tick Timer
	var tickC <-chan time.Time
	arm := func() {
		if cp.interval > 0 && len(rt.p.stores) > 0 {
			tick = rt.clock.NewTimer(cp.interval)
			tickC = tick.C()
		}
	}
	arm()
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	cancelC := ctx.Done()
	var drainC <-chan time.Time
	var drain Timer
	defer func() {
		if drain != nil {
			drain.Stop()
		}
	}()
	for {
		select {
		case <-rt.done:
			var serr error
			if !rt.saveFailed.Load() {
				serr = rt.save() // the final save
			}
			rt.mu.Lock()
			err := rt.err
			rt.mu.Unlock()
			if err == nil {
				err = serr
			}
			return err
		case <-rt.progress:
			if (cp.eachBatch && rt.async) || (cp.records > 0 && rt.finished.Load() >= cp.records) {
				rt.failSave()
			}
		case <-tickC:
			rt.failSave()
			arm()
		case req := <-rt.saveReq:
			req <- rt.failSave()
		case <-cancelC:
			cancelC = nil
			rt.interrupted.Store(true) // still running when ctx ended
			if rt.p.cfg.drainTimeout <= 0 {
				rt.abort()
				continue
			}
			drain = rt.clock.NewTimer(rt.p.cfg.drainTimeout)
			drainC = drain.C()
		case <-drainC:
			drainC = nil
			rt.abort()
		}
	}
}

// failSave saves and, when that fails, fails the pipeline.
func (rt *runtime) failSave() error {
	if rt.saveFailed.Load() {
		return errSaveFailed
	}
	err := rt.save()
	if err != nil {
		rt.fail(err)
	}
	return err
}

// save saves the position of every partition that moved since its last
// save to every store, with a context that outlives a cancellation of
// Run's: the records below it are finished, and their positions must not
// be lost because the caller asked to stop.
func (rt *runtime) save() error {
	if rt.saveFailed.Load() {
		return errSaveFailed
	}
	if rt.eos != nil {
		return rt.saveTxn()
	}
	rt.saveMu.Lock()
	defer rt.saveMu.Unlock()
	rt.finished.Store(0)
	if len(rt.p.stores) == 0 {
		return nil
	}
	ctx := context.WithoutCancel(rt.parent)
	at, began := rt.clock.Now(), time.Now() // for Observe's checkpoint history
	rt.parts = rt.tracker.Partitions(rt.parts[:0])
	rt.batch, rt.batchPts = rt.batch[:0], rt.batchPts[:0]
	for _, pt := range rt.parts {
		pos, ok := pt.Position()
		if !ok {
			continue
		}
		if last, seen := rt.saved[pt]; seen && last == pos {
			continue
		}
		rt.batch = append(rt.batch, checkpoint.TopicPosition{Topic: pt.Topic(), Partition: pt.ID(), Position: pos})
		rt.batchPts = append(rt.batchPts, pt)
	}
	if len(rt.stateful) > 0 {
		// The state after the positions are read, before they are saved:
		// every record below them had finished, its effect on the state
		// was in, and the snapshot holds it. A record absorbed since then
		// is in the snapshot too, above the positions: after a crash it
		// is delivered again, and the stage's marks tell it counted.
		if err := rt.saveState(ctx); err != nil {
			rt.saveFailed.Store(true)
			rt.noteCheckpoint(at, time.Since(began), rt.batch, err)
			return err
		}
	}
	if len(rt.batch) == 0 {
		return nil
	}
	ctx, span, start := rt.tel.beginSave(ctx, len(rt.batch))
	for _, store := range rt.p.stores {
		if err := saveTo(ctx, store, rt.batch); err != nil {
			// A store that failed is not trusted with another save in
			// this run; the pipeline stops.
			rt.saveFailed.Store(true)
			rt.tel.endSave(span, start, err)
			rt.noteCheckpoint(at, time.Since(began), rt.batch, err)
			return err
		}
	}
	rt.tel.endSave(span, start, nil)
	rt.noteCheckpoint(at, time.Since(began), rt.batch, nil)
	for i, tp := range rt.batch {
		rt.saved[rt.batchPts[i]] = tp.Position
		if rt.p.onCheckpoint != nil {
			rt.p.onCheckpoint(tp.Topic, tp.Partition, tp.Position)
		}
	}
	if rt.p.onSave != nil {
		rt.p.onSave()
	}
	return nil
}

// saveTo saves positions to store, in one SaveBatch when it is a
// checkpoint.BatchStore, else one Save each; the error names the position
// that failed (the first of the batch for SaveBatch).
func saveTo(ctx context.Context, store checkpoint.Store, positions []checkpoint.TopicPosition) error {
	if bs, ok := store.(checkpoint.BatchStore); ok && len(positions) > 1 {
		if err := bs.SaveBatch(ctx, positions); err != nil {
			tp := positions[0]
			return fmt.Errorf("stream: checkpoint %d partitions (%s/%d at position %d, ...): %w",
				len(positions), tp.Topic, tp.Partition, tp.Position.Offset, err)
		}
		return nil
	}
	for _, tp := range positions {
		if err := store.Save(ctx, tp.Topic, tp.Partition, tp.Position); err != nil {
			return fmt.Errorf("stream: checkpoint %s/%d at position %d: %w", tp.Topic, tp.Partition, tp.Position.Offset, err)
		}
	}
	return nil
}

// terminal is the outlet after the last stage: it marks elements finished.
type terminal[T any] struct {
	rt   *runtime
	offs []int64
}

func (t *terminal[T]) push(_ context.Context, elems []Element[T]) error {
	t.offs = finish(elems, t.offs)
	t.rt.noteFinished(len(elems))
	return nil
}

func (t *terminal[T]) close(context.Context) error { return nil }

// finish marks every element finished, one Done call per run of elements
// of one owner; offs is scratch space, returned for reuse.
func finish[T any](elems []Element[T], offs []int64) []int64 {
	for i := 0; i < len(elems); {
		o := elems[i].owner
		if o == nil {
			i++
			continue
		}
		offs = offs[:0]
		j := i
		for ; j < len(elems) && elems[j].owner == o; j++ {
			offs = append(offs, elems[j].Offset)
		}
		o.Done(offs...)
		i = j
	}
	return offs
}

// finishOne marks one element finished.
func finishOne[T any](e *Element[T]) {
	if e.owner != nil {
		e.owner.Done(e.Offset)
	}
}

// PanicError is a panic in a pipeline goroutine (a stage function, a
// sink's Write): the panic's value and the stack of the goroutine that
// panicked, taken where it panicked, so the function that panicked is in
// it. A stage with [Recover] makes the record's error of it; without
// Recover, Run panics again on its caller's goroutine with a *PanicError,
// as golang.org/x/sync/errgroup does, because a panic raised again with
// the bare value would show only Run's stack.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // runtime/debug.Stack() of the panicking goroutine, at the panic
}

// Error reports the panic value and, after a blank line, the stack of the
// goroutine that panicked, as in "stream: recovered panic: boom\n\ngoroutine
// 7 [running]:...": an unrecovered panic prints it after the runtime's own
// "panic: ", so the crash names the function that panicked.
func (e *PanicError) Error() string {
	if len(e.Stack) == 0 {
		return fmt.Sprintf("stream: recovered panic: %v", e.Value)
	}
	return fmt.Sprintf("stream: recovered panic: %v\n\n%s", e.Value, e.Stack)
}

// Unwrap returns the panic value when it is an error (a runtime.Error for a
// nil dereference, say), so errors.As finds it; nil otherwise.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}
