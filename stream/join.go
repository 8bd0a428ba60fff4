package stream

import (
	"context"
	"errors"
)

// Stage names of the stream-table joins, in [StageStats].
const (
	StageJoinTable     = "jointable"     // JoinTable
	StageLeftJoinTable = "leftjointable" // LeftJoinTable
)

// ErrNotCopartitioned is returned by [Stream.Run] for a windowed join
// ([JoinWindow], [LeftJoinWindow], [OuterJoinWindow]) on a source whose
// partitions move between processes (source.Kafka, a consumer group):
// windowed joins are not supported there yet, whatever the partitioning,
// since their state is not kept per partition.
//
// The rule such a join will need, Kafka Streams' co-partitioning: on N
// processes a join sees only the records of the partitions its process
// owns, so the records of one join key must reach the same process through
// both inputs: both inputs partitioned alike by the join key (the same
// number of partitions, the same partitioner, and the key the one they are
// partitioned by, or made so with [Repartition]), and partition i of both
// assigned to one member. A stream-table join needs a table read whole by
// every process instead (a global table); strom does not keep a table on a
// consumer group either ([ErrNotPerPartition]).
var ErrNotCopartitioned = errors.New("stream: a join's inputs are not partitioned alike by the join key")

// JoinTable joins each record of k with the value its key has in t when
// the join handles it, and emits fn(record, value) in its place, keeping
// the record's lineage and timestamp; a record whose key t does not hold
// is dropped (finished). It is Kafka Streams' KStream-KTable inner join:
// only the stream's records trigger output, a table update emits nothing.
//
//	table  t (key u1):  (u1:Ann) ······················· (u1:Bob) ··········· (u1:⌫) ········
//	stream k:           ··········· (u1:c1) ·· (u2:c2) ··········· (u1:c3) ··········· (u1:c4)
//	JoinTable:          ··········· [c1,Ann] ······················ [c3,Bob] ··················
//	LeftJoinTable:      ··········· [c1,Ann] · [c2,∅] ············· [c3,Bob] ··········· [c4,∅]
//
// (⌫ is a tombstone, [Tombstone]; ∅ is "not found".)
//
// The table's branch and the stream are read by goroutines of their own,
// so "when the join handles it" is processing time: a record meets what
// the table's reader has applied by then. A table update written before a
// stream record is not always applied before the record is joined: the
// two race, and the record may meet the older value for as long as the
// table's reader lags behind its topic (a burst of updates, large values),
// as in Kafka Streams (which orders the two by timestamp, but only across
// the partitions one task reads, and not at all once max.task.idle.ms
// passes). One race is removed: the stream waits until the table has
// caught up with its topic ([Table.Ready]) before the first record is
// joined, so a pipeline started on a table topic written earlier never
// joins against a half-read table. With a table source that cannot tell
// when it caught up (one that is not a [CaughtUpReporter]: a file's lines,
// a fake that follows) that wait lasts until the table's input ends.
//
// The pipeline ends when both inputs have ended (or ctx is cancelled): a
// table that follows its topic keeps Run going after a replayed stream
// ended.
//
// fn is called outside the table's lock, so it may read the table (Get). After a restart the records of k
// delivered again are joined with the table as restored, which holds
// every update up to the checkpoint: their output may carry a newer value
// than the first delivery's (at-least-once, as every output of strom).
//
// No event-time (temporal) variant is offered yet. Joining each record
// with the version its key had at the record's event time (Flink's FOR
// SYSTEM_TIME AS OF, Kafka Streams' versioned stores) needs the table to
// keep every version for a history retention and the stream to hold each
// record back until the table's watermark has passed its event time: a
// table that stops changing then stops the stream, which needs the
// idleness rules of [Window] on the table's side. Two streams of events
// are joined by event time with a windowed join instead.
//
// t is fed by this pipeline from then on: k's pipeline and t's become one,
// run by running the returned Stream, which also reads and checkpoints the
// table's input ([Table.Run] then returns [ErrTableJoined]). One table may
// be joined several times in one pipeline, never with two pipelines. k may
// follow any stage, Parallel ones included: the join keeps no state of its
// own. It panics if k, t or fn is nil, or if t is fed by k's own pipeline.
// On a source whose partitions move between processes Run refuses a
// pipeline with a table ([ErrNotPerPartition]; see [ErrNotCopartitioned]
// for the rule).
func JoinTable[K comparable, T, V, U any](k *Keyed[K, T], t *Table[K, V], fn func(v T, tv V) U) *Stream[U] {
	mustFunc("JoinTable", fn == nil)
	return joinTable(k, t, "JoinTable", StageJoinTable, func(v T, tv V, ok bool) (U, bool) {
		if !ok {
			var zero U
			return zero, false
		}
		return fn(v, tv), true
	})
}

// LeftJoinTable is [JoinTable] that keeps every record of k: it emits
// fn(record, value, true) when t holds the record's key, and fn(record,
// zero V, false) when it does not (Kafka Streams' KStream-KTable left
// join). Races, restarts and the rest as for JoinTable. It panics if k, t
// or fn is nil.
func LeftJoinTable[K comparable, T, V, U any](k *Keyed[K, T], t *Table[K, V], fn func(v T, tv V, found bool) U) *Stream[U] {
	mustFunc("LeftJoinTable", fn == nil)
	return joinTable(k, t, "LeftJoinTable", StageLeftJoinTable, func(v T, tv V, ok bool) (U, bool) { return fn(v, tv, ok), true })
}

func joinTable[K comparable, T, V, U any](k *Keyed[K, T], t *Table[K, V], op, name string, fn func(T, V, bool) (U, bool)) *Stream[U] {
	if k == nil {
		panic("stream: " + op + " called with a nil Keyed")
	}
	if t == nil {
		panic("stream: " + op + " called with a nil Table")
	}
	s := k.s
	p := t.joinInto(op, s.p)
	ctr := p.counters(name)
	ctr.timed = true
	up := s.connect
	return &Stream[U]{p: p, reorders: s.reorders, unkeyedBy: s.unkeyedBy, connect: func(rt *runtime, down outlet[U]) {
		t.wire(rt)
		up(rt, timeStage(rt, ctr, down, func(rt *runtime, down outlet[U]) outlet[T] {
			return &tableJoin[K, T, V, U]{rt: rt, t: t, key: k.key, fn: fn, ctr: ctr, down: down}
		}))
	}}
}

// tableJoin is the stage of JoinTable and LeftJoinTable.
type tableJoin[K comparable, T, V, U any] struct {
	rt   *runtime
	t    *Table[K, V]
	key  func(T) K
	fn   func(T, V, bool) (U, bool)
	ctr  *stageCounters
	down outlet[U]
	out  []Element[U]
	offs []int64
	drop []Element[T]
	// found is scratch: the table's value of each element's key.
	found []lookedUp[V]
}

func (j *tableJoin[K, T, V, U]) push(ctx context.Context, elems []Element[T]) error {
	if !j.t.isReady() {
		select {
		case <-j.t.ready:
		case <-j.rt.stop:
			return nil // stopping: the records stay unfinished, unsaved
		case <-j.rt.srcCtx.Done():
			return nil
		}
	}
	j.ctr.in.Add(int64(len(elems)))
	out, drop := j.out[:0], j.drop[:0]
	// Looked up under one read lock per batch, which is released before
	// pushing on: a stateful stage after the join takes its own lock, and
	// a checkpoint locks the table after it (upstream first).
	out, drop = j.lookup(elems, out, drop)
	if len(drop) > 0 {
		j.offs = finish(drop, j.offs)
		j.rt.noteFinished(len(drop))
		clear(drop)
	}
	j.drop = drop
	j.out = out
	j.ctr.out.Add(int64(len(out)))
	j.ctr.left.Add(int64(len(elems)))
	if len(out) == 0 {
		return nil
	}
	err := j.down.push(ctx, out)
	clear(out)
	return err
}

// lookup joins elems: their keys are looked up under the table's read
// lock, released (by a defer: a panic in a key function must not leave the
// table locked) before fn is called, so that fn may read the table itself
// (Get): a second read lock of one goroutine deadlocks once the table's
// writer waits between the two.
func (j *tableJoin[K, T, V, U]) lookup(elems []Element[T], out []Element[U], drop []Element[T]) ([]Element[U], []Element[T]) {
	j.found = j.lookupLocked(elems, j.found[:0])
	for i := range elems {
		e := &elems[i]
		f := &j.found[i]
		u, keep := j.fn(e.Value, f.v, f.ok)
		if !keep {
			drop = append(drop, *e)
			continue
		}
		out = append(out, Element[U]{Value: u, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset,
			Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner})
	}
	clear(j.found)
	return out, drop
}

// lookupLocked appends the table's value of each element's key to found.
func (j *tableJoin[K, T, V, U]) lookupLocked(elems []Element[T], found []lookedUp[V]) []lookedUp[V] {
	t := j.t
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i := range elems {
		v, ok := t.m[j.key(elems[i].Value)]
		found = append(found, lookedUp[V]{v, ok})
	}
	return found
}

// lookedUp is a key's value in the table, and whether it had one.
type lookedUp[V any] struct {
	v  V
	ok bool
}

func (j *tableJoin[K, T, V, U]) close(ctx context.Context) error { return j.down.close(ctx) }
