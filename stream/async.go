package stream

import (
	"context"

	"github.com/strom-dev/strom/checkpoint"
)

// AsyncSink is a [Sink] whose writes are acknowledged later, as a Kafka
// producer's are: [Stream.To] hands it a batch with WriteAsync and goes on
// with the next batch at once (the writes are pipelined), and the batch's
// records count as finished, so their positions may be saved, only once
// ack reported the whole batch acknowledged. It is the pipelined form of
// "flush the sink before saving the position".
//
// WriteAsync may keep the memory values point into (their byte slices)
// until their ack, as franz-go's Produce keeps a record until its promise,
// but not the values slice itself, which To reuses on return; it may block
// to bound what is in flight (back-pressure). To guarantees that memory
// does not change until the ack: strom's sources read each batch into
// fresh memory, and Run refuses a source that reuses it (source.ReuseBytes)
// before an AsyncSink with [ErrReusedBytes]. Not copying saves a second
// copy of every value in flight: the log -> Kafka relay of 20,000 1 KiB
// records allocated 73 MB per run with the copy and 50 MB without
// (internal/bench BenchmarkRelayLogToKafka, -benchmem); its throughput
// moved less than the run-to-run noise.
//
// WriteAsync returns an error only when it could not take the batch at
// all; a failure of a write it took goes to ack. ack must be called
// exactly once per WriteAsync that returned nil, from any goroutine:
// ack(-1, nil) when every value is acknowledged, ack(i, err) with the
// index of a value that failed otherwise. Flush waits until every ack of the writes taken so far has
// been called (or ctx ends). Write, from Sink, is the synchronous form,
// used outside pipelines.
//
// Under To, a failed write goes through the stage's failure policy: the
// default stops Run with a [*RecordError] naming the failed record; Skip
// finishes the batch's records, counted as skipped; DeadLetter writes each
// record of the batch to the dead-letter sink, then finishes them. Retry
// does not apply (To panics): the sink retries what can be retried itself.
type AsyncSink[T any] interface {
	Sink[T]
	WriteAsync(ctx context.Context, values []T, ack func(failed int, err error)) error
	Flush(ctx context.Context) error
}

// asyncSinkStage is To over an AsyncSink. Each batch's records get one more
// completion to wait for, the acknowledgement: they are handed downstream
// with a group as owner whose count is the batch's length plus one.
type asyncSinkStage[T any] struct {
	sr     *stageRun
	sink   AsyncSink[T]
	down   outlet[T]
	values []T
	offs   []int64
}

func (st *asyncSinkStage[T]) push(ctx context.Context, elems []Element[T]) error {
	if elems = dropRevoked(st.sr.rt, elems); len(elems) == 0 {
		return nil
	}
	st.sr.ctr.in.Add(int64(len(elems)))
	st.values = st.values[:0]
	g := &group{pending: len(elems) + 1, members: make([]member, 0, len(elems))}
	// The lineage of each record, for the error of a failed write; its value
	// too only when a policy or hook will need it (dead letters, OnError),
	// since copying every element cost as much as the write in the log ->
	// Kafka relay benchmark.
	keepValues := st.sr.cfg.onFail == failDeadLetter || len(st.sr.cfg.hooks) > 0
	b := &asyncBatch[T]{lineage: make([]lineage, len(elems))}
	if keepValues {
		b.values = make([]T, len(elems))
	}
	for i := range elems {
		e := &elems[i]
		st.values = append(st.values, e.Value)
		b.lineage[i] = lineage{topic: e.Topic, partition: e.Partition, offset: e.Offset}
		if keepValues {
			b.values[i] = e.Value
		}
		if e.owner != nil {
			g.members = append(g.members, member{owner: e.owner, offset: e.Offset})
		}
		e.owner = g
	}
	rt := st.sr.rt
	start := st.sr.timeBatch()
	err := st.sink.WriteAsync(ctx, st.values, func(failed int, err error) {
		if err != nil {
			if ferr := st.failed(b, failed, err); ferr != nil {
				rt.fail(ferr)
				return // the batch stays unfinished: its positions are never saved
			}
		} else {
			st.sr.ctr.out.Add(int64(len(b.lineage)))
		}
		st.sr.ctr.left.Add(int64(len(b.lineage)))
		g.Done(-1)
	})
	st.sr.doneBatch(start)
	clear(st.values)
	if err != nil {
		return recordError(st.sr.cfg.name, &elems[0], err)
	}
	return st.down.push(ctx, elems)
}

// lineage is where a record came from.
type lineage struct {
	topic     string
	partition int32
	offset    int64
}

// asyncBatch is what a failed write's policy needs of its batch.
type asyncBatch[T any] struct {
	lineage []lineage
	values  []T // nil unless a dead-letter sink or an OnError hook needs them
}

// failure returns the Failure of record i of b.
func (b *asyncBatch[T]) failure(stage string, i int, err error) Failure {
	l := &b.lineage[i]
	f := Failure{Stage: stage, Topic: l.topic, Partition: l.partition, Offset: l.offset, Attempt: 1, Err: err}
	if b.values != nil {
		f.Value = b.values[i]
	}
	return f
}

// failed applies the stage's failure policy to a batch whose write failed
// at index i; nil means the batch counts as finished.
func (st *asyncSinkStage[T]) failed(b *asyncBatch[T], i int, err error) error {
	cfg := st.sr.cfg
	i = min(max(i, 0), len(b.lineage)-1)
	f := b.failure(cfg.name, i, err)
	rerr := &RecordError{Stage: cfg.name, Topic: f.Topic, Partition: f.Partition, Offset: f.Offset, Err: err}
	st.sr.ctr.failed.Add(1)
	st.sr.rt.noteFailure(f)
	for _, h := range cfg.hooks {
		h(f)
	}
	switch cfg.onFail {
	case failSkip:
		st.sr.ctr.skipped.Add(int64(len(b.lineage)))
		return nil
	case failDeadLetter:
		fs := make([]Failure, len(b.lineage))
		for j := range fs {
			fs[j] = b.failure(cfg.name, j, err)
		}
		if derr := cfg.deadLetter.Write(st.sr.rt.stageCtx, fs); derr != nil {
			return deadLetterFailed(cfg, f, rerr, derr)
		}
		st.sr.ctr.deadLettered.Add(int64(len(fs)))
		return nil
	default:
		return rerr
	}
}

// close waits for every acknowledgement before passing the close on, so Run
// returns only when every record written was acknowledged.
func (st *asyncSinkStage[T]) close(ctx context.Context) error {
	if err := st.sink.Flush(ctx); err != nil && !st.sr.rt.stopped() {
		return err
	}
	return st.down.close(ctx)
}

// PositionsAware is implemented by sources that need the pipeline's
// finished positions while it runs: a Kafka consumer commits the finished
// positions of partitions revoked from it before it gives them up. Run
// calls SetPositions before the first Read, and SetPositions(nil) after
// the last.
type PositionsAware interface {
	SetPositions(p Positions)
}

// Positions gives the position a checkpoint may save now for a
// topic-partition: the lowest offset not yet finished, with the epoch of
// the record below it; ok is false when no record of it has finished in
// this run. It is safe for concurrent use.
type Positions interface {
	Position(topic string, partition int32) (pos checkpoint.Position, ok bool)
}

// trackerPositions is the Positions of a Run.
type trackerPositions struct{ t *checkpoint.Tracker }

func (tp trackerPositions) Position(topic string, partition int32) (checkpoint.Position, bool) {
	return tp.t.Partition(topic, partition).Position()
}
