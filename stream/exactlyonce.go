package stream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// DefaultTransactionInterval is how often an [ExactlyOnce] pipeline ends
// its transaction when [TransactionInterval] does not say: 100 ms, Kafka
// Streams' commit.interval.ms under exactly_once_v2. Under exactly-once it
// is the visibility latency: a reader that reads only committed records
// (Kafka's read_committed) sees a result at the latest one interval, plus
// the commit's round trips, after the record that made it.
const DefaultTransactionInterval = 100 * time.Millisecond

// eosConfig holds the settings of [ExactlyOnce].
type eosConfig struct {
	on       bool
	interval time.Duration
}

// ExactlyOnceOption configures [ExactlyOnce].
type ExactlyOnceOption func(*eosConfig)

// TransactionInterval sets how often an [ExactlyOnce] pipeline ends its
// transaction (default [DefaultTransactionInterval]); d <= 0 keeps the
// default. A longer interval costs fewer commits (each one drains the
// pipeline, see ExactlyOnce) and delays the results' visibility as much.
func TransactionInterval(d time.Duration) ExactlyOnceOption {
	return func(c *eosConfig) {
		if d > 0 {
			c.interval = d
		}
	}
}

// ExactlyOnce is an [Option] of [From] (or [Merge]) that makes every
// checkpoint of the pipeline one transaction: the outputs its sinks wrote
// since the previous checkpoint, the changes of its stateful stages' state,
// and the source positions past the records that made them become visible
// together, or none of them does. A crash, a rebalance or a fenced member
// then hands out no result twice and loses none: each result is in the
// output once, for readers that read only committed records.
//
// The pipeline's one store ([Stream.Checkpointing]) must be a
// [Transactor], which runs the transactions (source.Kafka, with its group's
// offsets committed in the transaction), and every sink must be a
// [TransactionalSink] that can write into them (sink.Kafka). Run refuses,
// with an error wrapping [ErrNotExactlyOnce] that names the part and why,
// a pipeline with another store, with a sink that cannot take part (a
// sink.Func, an io.Writer: what it did cannot be taken back), with a
// go-streams flow ([Via]) or a [Repartition] between. A function a stage
// calls (Map, FlatMap) is the caller's: its side effects (an HTTP call) are
// not in the transaction, and happen again when a transaction is aborted.
//
// Each transaction ends every [TransactionInterval], which replaces the
// checkpoint options of [Stream.Checkpointing] ([CheckpointInterval],
// [CheckpointRecords], [CheckpointEachBatch]): reading pauses, the
// records read are let finish (partial [Batch]es handed on, a [Window]'s
// results written), then the transactor commits. When it cannot (a
// rebalance, a fenced member), it aborts: nothing of the transaction is
// visible, the stateful stages' state goes back to the last committed
// transaction's (restored from the changelog) and the source reads again
// from the committed positions. Records that did not finish when Run ends
// (cancelled without a drain, or failed) abort the last transaction the
// same way.
func ExactlyOnce(opts ...ExactlyOnceOption) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) {
		pc.eos = eosConfig{on: true, interval: DefaultTransactionInterval}
		for _, o := range opts {
			if o != nil {
				o(&pc.eos)
			}
		}
	})
}

// Transactor is a checkpoint store that runs an [ExactlyOnce] pipeline's
// transactions: source.Kafka (its consumer group's offsets are committed
// in a Kafka transaction with the outputs and the state's changelog).
//
// Run calls BeginTransactions once, before the first Read and before any
// sink joins (TransactionalSink), and then EndTransaction at each
// checkpoint, never concurrently with itself, with a store's Save, or with
// a write of a joined sink: the pipeline is drained while it runs. State
// changes (checkpoint.ChangelogStore.SaveChanges, or SaveState of a
// checkpoint.StateStore) saved between two EndTransactions belong to the
// second one.
type Transactor interface {
	checkpoint.Store
	// BeginTransactions switches the store to transactions before
	// anything is read or written. It returns an error when it cannot
	// (named in Run's error).
	BeginTransactions(ctx context.Context) error
	// EndTransaction ends the transaction open since the previous one
	// ended (or since BeginTransactions), and opens the next. With commit
	// true it commits, atomically: what joined sinks wrote, the state
	// changes saved, and positions (the next offsets to read of the
	// partitions that moved, as a checkpoint.Store's Save has them).
	// With commit false, or when the commit cannot be made and may be
	// tried again later (a rebalance began, the member was fenced), it
	// aborts: nothing of the transaction becomes visible, and it returns
	// (false, nil). An aborting Transactor that is [Assignable] has then
	// called its hooks' Lost for every partition it owns and Assigned
	// with their committed positions (so the pipeline's state is the
	// committed one again), and reads from those positions; one that is
	// not makes Run fail with [ErrTransactionAborted]. An error is a
	// failure the transactor cannot go on from: Run stops with it.
	EndTransaction(ctx context.Context, positions []checkpoint.TopicPosition, commit bool) (committed bool, err error)
}

// TransactionalSink is a sink that can write into a [Transactor]'s
// transactions: an [ExactlyOnce] pipeline calls JoinTransaction with its
// transactor before the first record, and the sink's writes from then on
// become visible only when a transaction commits (sink.Kafka, joining
// source.Kafka's transactions). JoinTransaction returns an error when the
// sink cannot write into t's transactions (another cluster, another kind
// of transactor); Run names the sink in its error.
type TransactionalSink interface {
	JoinTransaction(t Transactor) error
}

// RewindingSource is a source that an aborted transaction rewinds to the
// committed positions (source.Kafka under ExactlyOnce). StaleRead reports
// whether the records its last Read returned were read before the latest
// rewind: they are then dropped, not handed in, since the source reads
// them again. Run calls it on the goroutine that called Read, right after
// Read returned, while no transaction can end.
type RewindingSource interface {
	StaleRead() bool
}

// ErrNotExactlyOnce is wrapped by Run's error for an [ExactlyOnce]
// pipeline of a shape it cannot make exactly once: the error names the
// part (a store, a sink, a flow) and why.
var ErrNotExactlyOnce = errors.New("stream: the pipeline cannot run exactly once")

// ErrTransactionAborted is wrapped by Run's error when a [Transactor] that
// is not [Assignable] aborted a transaction: the pipeline cannot go back to
// the committed state while it runs, and stops; a new Run starts from it.
var ErrTransactionAborted = errors.New("stream: transaction aborted")

// effect is a part of a pipeline that writes outside it (a sink, a
// dead-letter or late sink, a repartition topic, a go-streams flow), for
// ExactlyOnce's checks: what it is and the value that writes.
type effect struct {
	what string // "sink \"name\"", "dead-letter sink of stage \"map\"", ...
	sink any    // the Sink (or Through); nil for a part that can never take part
	why  string // for sink == nil: why it cannot
}

// noteSink records a sink of the pipeline for ExactlyOnce.
func (p *pipeline) noteSink(what string, sink any) {
	p.effects = append(p.effects, effect{what: what, sink: sink})
}

// noteDeadLetter records the dead-letter sink of a stage, when it has one.
func (p *pipeline) noteDeadLetter(cfg *stageConfig) {
	if cfg.deadLetter != nil {
		p.noteSink(fmt.Sprintf("dead-letter sink of stage %q", cfg.name), cfg.deadLetter)
	}
}

// noteEffect records a part that can never be exactly once, and why.
func (p *pipeline) noteEffect(what, why string) {
	p.effects = append(p.effects, effect{what: what, why: why})
}

// describe names v for an error: its String when it has one (sink.Func's
// type is unexported), else its type.
func describe(v any) string {
	if s, ok := v.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", v)
}

// oneTransactor says what store an ExactlyOnce pipeline needs.
const oneTransactor = "ExactlyOnce takes one store, the transactor: Checkpointing(src) for a source.Kafka; " +
	"for a log source, the sink: a sink.Kafka with sink.KafkaTransactionalID, or a sink.Log"

// checkExactlyOnce checks that the pipeline can run exactly once and
// returns its transactor.
func (p *pipeline) checkExactlyOnce() (Transactor, error) {
	if len(p.stores) == 0 {
		return nil, fmt.Errorf("%w: no store: %s", ErrNotExactlyOnce, oneTransactor)
	}
	var tr Transactor
	for _, st := range p.stores {
		t, ok := st.(Transactor)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: store %T does not run transactions (a stream.Transactor): its positions could not be saved with the outputs; %s", ErrNotExactlyOnce, st, oneTransactor)
		case tr != nil && t != tr:
			return nil, fmt.Errorf("%w: two transactional stores (%T and %T): one transaction cannot span both", ErrNotExactlyOnce, tr, t)
		}
		tr = t
	}
	for _, e := range p.effects {
		if e.sink == nil {
			return nil, fmt.Errorf("%w: %s: %s", ErrNotExactlyOnce, e.what, e.why)
		}
		if _, ok := e.sink.(TransactionalSink); !ok {
			return nil, fmt.Errorf("%w: %s is a %s, which cannot write into a transaction: what it wrote could not be taken back when a transaction aborts", ErrNotExactlyOnce, e.what, describe(e.sink))
		}
	}
	return tr, nil
}

// joinTransactions has every sink join tr's transactions.
func (p *pipeline) joinTransactions(tr Transactor) error {
	for _, e := range p.effects {
		if err := e.sink.(TransactionalSink).JoinTransaction(tr); err != nil {
			return fmt.Errorf("%w: %s cannot join the transactions of %T: %w", ErrNotExactlyOnce, e.what, tr, err)
		}
	}
	return nil
}

// eosCtx is the context of the calls to a Transactor: it outlives Run's
// cancellation, as saves do.
func eosCtx(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// beginTransactions begins the transactions of the pipeline's transactor
// (rt.eos, checked by checkExactlyOnce), has its sinks join them, and makes the
// checkpoint a transaction's end every TransactionInterval.
func (rt *runtime) beginTransactions(ctx context.Context) error {
	p, tr := rt.p, rt.eos
	if err := tr.BeginTransactions(ctx); err != nil {
		return fmt.Errorf("stream: ExactlyOnce: begin the transactions of %T: %w", tr, err)
	}
	if err := p.joinTransactions(tr); err != nil {
		return err
	}
	rt.eos = tr
	// A transaction ends on the timer, and once more when Run returns:
	// counting records or saving after each batch would end them at a
	// pace the commits' round trips cannot follow.
	p.cp = checkpointConfig{interval: p.cfg.eos.interval}
	return nil
}

// saveTxn is save under ExactlyOnce: with the gate held (nothing is handed
// in), it lets every record handed in finish, saves the state's changes
// and ends the transaction with the positions. It commits only when every
// record handed in finished: a record abandoned (Run cancelled without a
// drain, a failure) may have written part of its output, which must not
// become visible without it, so the transaction is aborted.
func (rt *runtime) saveTxn() error {
	rt.saveMu.Lock()
	defer rt.saveMu.Unlock()
	rt.finished.Store(0)
	ctx := eosCtx(rt.parent)
	rt.txnGate.Lock()
	defer rt.txnGate.Unlock()
	commit := rt.drainTxn()
	if rt.revokedInTxn.Load() {
		commit = false
	}
	rt.parts = rt.tracker.Partitions(rt.parts[:0])
	rt.batch, rt.batchPts = rt.batch[:0], rt.batchPts[:0]
	for _, pt := range rt.parts {
		if pt.Revoked() {
			continue // its records are the new owner's: the transaction aborts
		}
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
	if commit && len(rt.stateful) > 0 {
		if err := rt.saveState(ctx); err != nil {
			rt.saveFailed.Store(true)
			return err
		}
	}
	sctx, span, start := rt.tel.beginSave(ctx, len(rt.batch))
	committed, err := rt.eos.EndTransaction(sctx, rt.batch, commit)
	rt.tel.endSave(span, start, err)
	// Nothing ran while the transaction ended: a revocation then (or the
	// rewind's own Lost) has no output in the next one.
	rt.revokedInTxn.Store(false)
	if err != nil {
		rt.saveFailed.Store(true)
		return fmt.Errorf("stream: end the transaction of %T (%d positions): %w", rt.eos, len(rt.batch), err)
	}
	if !committed {
		rt.txnAborts.Add(1)
		if _, ok := rt.eos.(Assignable); !ok {
			rt.saveFailed.Store(true)
			return fmt.Errorf("%w: %T aborted the transaction of %d positions, and the pipeline cannot rewind its state while it runs",
				ErrTransactionAborted, rt.eos, len(rt.batch))
		}
		for pt := range rt.saved {
			if pt.Revoked() { // replaced by the rewind's assignment
				delete(rt.saved, pt)
			}
		}
		return nil
	}
	for i, tp := range rt.batch {
		rt.saved[rt.batchPts[i]] = tp.Position
		if rt.p.onCheckpoint != nil {
			rt.p.onCheckpoint(tp.Topic, tp.Partition, tp.Position)
		}
	}
	if rt.p.onSave != nil && len(rt.batch) > 0 {
		rt.p.onSave()
	}
	return nil
}

// drainTxn waits, with nothing handed in, until every record handed in has
// finished every stage and every Window's results have been handed on,
// partial Batches flushed on the way, and reports whether all finished. It
// reports false when a record was abandoned (it can never finish), or when
// the pipeline stops or has stopped first.
func (rt *runtime) drainTxn() bool {
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-rt.stop:
		case <-rt.done:
		case <-wctx.Done():
		}
		cancel()
	}()
	for {
		for i := len(rt.flushers) - 1; i >= 0; i-- { // registered downstream first
			if rt.flushers[i](rt.stageCtx) != nil {
				return false
			}
		}
		// With Batch stages, records that reach a batch meanwhile wait
		// for its linger: flush again every 20 ms, as waitRoom does.
		wait, stop := wctx, func() {}
		if len(rt.flushers) > 0 {
			wait, stop = context.WithTimeout(wctx, 20*time.Millisecond)
		}
		// Every record handed in, of revoked partitions too: a record
		// still running writes into the transaction, and must not while
		// it ends (an abort fails what is still being produced).
		settled := true
		rt.parts = rt.tracker.Partitions(rt.parts[:0])
		rt.beginMu.Lock()
		rt.parts = append(rt.parts, rt.retired...)
		waited := len(rt.retired)
		rt.beginMu.Unlock()
		for _, pt := range rt.parts {
			if pt.WaitSettled(wait) != nil {
				settled = false
				break
			}
		}
		for _, st := range rt.stateful {
			if !settled {
				break
			}
			for st.owed() > 0 && settled {
				select {
				case <-rt.settleWake:
				case <-wait.Done():
					settled = false
				}
			}
		}
		stop()
		if settled {
			rt.beginMu.Lock()
			rt.retired = slices.Delete(rt.retired, 0, waited) // settled: nothing of them runs
			rt.beginMu.Unlock()
			for _, pt := range rt.parts {
				if !pt.Revoked() && pt.InFlight() > 0 {
					return false // abandoned: settled, not finished
				}
			}
			return true
		}
		if wctx.Err() != nil {
			return false
		}
	}
}

// transactorStarts moves the starts of newly assigned partitions to the
// positions the pipeline's Transactor committed, when it is not the
// source that assigns them (a consumer group read into the log, whose
// positions the log's transactions keep): those, not the group's
// commits, are the positions that match the committed outputs.
func (rt *runtime) transactorStarts(ctx context.Context, starts []PartitionStart) error {
	if rt.eos == nil {
		return nil
	}
	if _, self := rt.eos.(Assignable); self {
		return nil
	}
	for i := range starts {
		s := &starts[i]
		pos, found, err := rt.eos.Load(ctx, s.Topic, s.Partition)
		if err != nil {
			return fmt.Errorf("stream: load the committed position of %s/%d from %T: %w", s.Topic, s.Partition, rt.eos, err)
		}
		if found {
			s.Offset = pos.Offset
		}
	}
	return nil
}
