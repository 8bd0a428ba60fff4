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
// WriteAsync must not keep values after it returns (copy what it sends);
// it may block to bound what is in flight (back-pressure). It returns an
// error only when it could not take the batch at all; a failure of a write
// it took goes to ack. ack must be called exactly once per WriteAsync that
// returned nil, from any goroutine: ack(-1, nil) when every value is
// acknowledged, ack(i, err) with the index of a value that failed
// otherwise. Flush waits until every ack of the writes taken so far has
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
	st.sr.ctr.in.Add(int64(len(elems)))
	st.values = st.values[:0]
	g := &group{pending: len(elems) + 1, members: make([]member, 0, len(elems))}
	lineage := make([]Element[T], len(elems)) // for errors and dead letters: lineage and value
	for i := range elems {
		e := &elems[i]
		st.values = append(st.values, e.Value)
		lineage[i] = Element[T]{Value: e.Value, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch}
		if e.owner != nil {
			g.members = append(g.members, member{owner: e.owner, offset: e.Offset})
		}
		e.owner = g
	}
	rt := st.sr.rt
	err := st.sink.WriteAsync(ctx, st.values, func(failed int, err error) {
		if err != nil {
			if ferr := st.failed(lineage, failed, err); ferr != nil {
				rt.fail(ferr)
				return // the batch stays unfinished: its positions are never saved
			}
		} else {
			st.sr.ctr.out.Add(int64(len(lineage)))
		}
		g.Done(-1)
	})
	clear(st.values)
	if err != nil {
		return recordError(st.sr.cfg.name, &elems[0], err)
	}
	return st.down.push(ctx, elems)
}

// failed applies the stage's failure policy to a batch whose write failed
// at index i; nil means the batch counts as finished.
func (st *asyncSinkStage[T]) failed(lineage []Element[T], i int, err error) error {
	cfg := st.sr.cfg
	i = min(max(i, 0), len(lineage)-1)
	e := &lineage[i]
	st.sr.ctr.failed.Add(1)
	f := Failure{Stage: cfg.name, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Attempt: 1, Err: err, Value: e.Value}
	for _, h := range cfg.hooks {
		h(f)
	}
	switch cfg.onFail {
	case failSkip:
		st.sr.ctr.skipped.Add(int64(len(lineage)))
		return nil
	case failDeadLetter:
		fs := make([]Failure, len(lineage))
		for j := range lineage {
			l := &lineage[j]
			fs[j] = Failure{Stage: cfg.name, Topic: l.Topic, Partition: l.Partition, Offset: l.Offset, Attempt: 1, Err: err, Value: l.Value}
		}
		if derr := cfg.deadLetter.Write(st.sr.rt.stageCtx, fs); derr != nil {
			return fmtDeadLetter(recordError(cfg.name, e, err), derr)
		}
		st.sr.ctr.deadLettered.Add(int64(len(fs)))
		return nil
	default:
		return recordError(cfg.name, e, err)
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
