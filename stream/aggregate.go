package stream

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/strom-dev/strom/checkpoint"
)

// Aggregate folds the values of each key of k into an accumulator with agg
// and emits the key's new accumulator after every record, as Kafka
// Streams' KGroupedStream.aggregate emits its table's updates: a Stream of
// KV, one per record, with the record's lineage. The accumulators are the
// stage's state, saved with the positions (see the package doc's "State"):
// after a restart they equal those of an uninterrupted run although
// records are delivered again. A record delivered again whose effect is
// already in the restored state is not added twice; the stage emits the
// key's current accumulator for it instead, so every key's latest value
// still reaches downstream at least once.
//
// opts: [Name] (default "aggregate", also the name the state is saved
// under). It panics if agg.Add is nil, if a [Window] option is given, or
// if a stage before it may reorder records ([Parallel], [KeyOrdered],
// [Batch], [Via]).
func Aggregate[K comparable, T, A any](k *Keyed[K, T], agg Aggregator[T, A], opts ...StateOption) *Stream[KV[K, A]] {
	mustFunc("Aggregate", agg.Add == nil)
	return aggregate(k, StageAggregate, func(v T) A { return agg.Add(agg.init(), v) }, agg.Add, opts)
}

// Reduce combines the values of each key of k with fn, the first value of
// a key being its start, and emits the key's new value after every record
// (Kafka Streams' reduce). State, restarts and options as for [Aggregate]
// (default name "reduce"). It panics if fn is nil.
func Reduce[K comparable, T any](k *Keyed[K, T], fn func(acc, v T) T, opts ...StateOption) *Stream[KV[K, T]] {
	mustFunc("Reduce", fn == nil)
	return aggregate(k, StageReduce, func(v T) T { return v }, fn, opts)
}

func aggregate[K comparable, T, A any](k *Keyed[K, T], kind string, first func(T) A, add func(A, T) A, opts []StateOption) *Stream[KV[K, A]] {
	if k == nil {
		panic("stream: " + kind + " called with a nil Keyed")
	}
	cfg := newStateConfig(kind, opts)
	if cfg.joinOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to the windowed joins (JoinWindow), not to %s", cfg.joinOnly, kind))
	}
	if cfg.windowOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to Window, not to %s", cfg.windowOnly, kind))
	}
	if cfg.tableOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to ToTable, not to %s", cfg.tableOnly, kind))
	}
	registerState(k, kind, cfg.name)
	ctr := k.s.p.counters(cfg.name)
	return chainTimed(k.s, ctr, 1, func(rt *runtime, down outlet[KV[K, A]]) outlet[T] {
		st := &aggStage[K, T, A]{kind: kind, key: k.key, first: first, add: add, down: down,
			kc: newCodec[K](), ac: newCodec[A]()}
		st.core.init(rt, cfg.name, ctr)
		st.one = st.newTable()
		st.tables = map[partKey]*aggTable[K, A]{{}: st.one}
		rt.stateful = append(rt.stateful, st)
		return st
	})
}

// aggStage is Aggregate and Reduce.
type aggStage[K comparable, T, A any] struct {
	kind  string
	key   func(T) K
	first func(T) A
	add   func(A, T) A
	down  outlet[KV[K, A]]

	mu   sync.Mutex
	core stateCore
	// tables holds the state per source partition when the pipeline's
	// source is Assignable (core.partitioned), and otherwise one table,
	// one, under the zero partKey (see partstate.go).
	tables map[partKey]*aggTable[K, A]
	one    *aggTable[K, A]
	lastK  partKey
	lastT  *aggTable[K, A]
	kc     codec[K]
	ac     codec[A]
	out    []Element[KV[K, A]]
	fin    []member
}

// aggTable is the state of one table: an accumulator per key, and, per
// partition, the keys changed since the last save.
type aggTable[K comparable, A any] struct {
	accs map[K]A
	dirtyKeys[K]
}

func (st *aggStage[K, T, A]) newTable() *aggTable[K, A] {
	tb := &aggTable[K, A]{accs: make(map[K]A)}
	if st.core.partitioned {
		tb.dirty = make(map[K]struct{})
	}
	return tb
}

// table returns the table of a record of topic-partition.
func (st *aggStage[K, T, A]) table(topic string, partition int32) *aggTable[K, A] {
	if !st.core.partitioned || topic == "" {
		return st.one
	}
	if st.lastT != nil && st.lastK.partition == partition && st.lastK.topic == topic {
		return st.lastT
	}
	pk := partKey{topic, partition}
	tb := st.tables[pk]
	if tb == nil {
		tb = st.newTable()
		st.tables[pk] = tb
	}
	st.lastK, st.lastT = pk, tb
	return tb
}

func (st *aggStage[K, T, A]) stateName() string { return st.core.name }

// owed is 0: an Aggregate's results are owned by the records that made them.
func (st *aggStage[K, T, A]) owed() int { return 0 }

func (st *aggStage[K, T, A]) push(ctx context.Context, elems []Element[T]) (err error) {
	if elems = dropRevoked(st.core.rt, elems); len(elems) == 0 {
		return nil
	}
	c := &st.core
	c.ctr.in.Add(int64(len(elems)))
	st.mu.Lock()
	defer st.mu.Unlock()
	absorbing := true // until the results are handed on (stateCore.failed)
	defer func() {
		if absorbing {
			c.failPush(err)
		}
	}()
	out := st.out[:0]
	st.fin = st.fin[:0]
	for i := range elems {
		e := &elems[i]
		ps := c.part(e.Topic, e.Partition)
		replay, err := c.check(ps, e.Topic, e.Partition, e.Offset)
		if err != nil {
			return err
		}
		k := st.key(e.Value)
		tb := st.table(e.Topic, e.Partition)
		if replay {
			// Its effect is in the restored state: emit the key's
			// current value in its place, if the key is still there.
			if acc, ok := tb.accs[k]; ok {
				out = append(out, Element[KV[K, A]]{Value: KV[K, A]{k, acc}, Topic: e.Topic, Partition: e.Partition,
					Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner})
			} else if e.owner != nil {
				st.fin = append(st.fin, member{e.owner, e.Offset})
			}
			continue
		}
		c.busy = true // until the record's effect is whole
		acc, ok := tb.accs[k]
		if ok {
			acc = st.add(acc, e.Value)
		} else {
			acc = st.first(e.Value)
		}
		tb.accs[k] = acc
		tb.touch(k)
		c.busy = false
		out = append(out, Element[KV[K, A]]{Value: KV[K, A]{k, acc}, Topic: e.Topic, Partition: e.Partition,
			Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner})
	}
	c.dirty.Store(true)
	st.out = out
	if len(st.fin) > 0 {
		c.offs = finishMembers(st.fin, c.offs)
		c.rt.noteFinished(len(st.fin))
		clear(st.fin)
	}
	c.ctr.out.Add(int64(len(out)))
	c.ctr.left.Add(int64(len(elems)))
	if len(out) == 0 {
		return nil
	}
	absorbing = false
	err = st.down.push(ctx, out)
	clear(out)
	return err
}

func (st *aggStage[K, T, A]) close(ctx context.Context) error { return st.down.close(ctx) }

// aggFile is an Aggregate's or Reduce's snapshot.
type aggFile[K comparable, A any] struct {
	Parts []partFile
	Keys  []aggEntry[K, A]
}

type aggEntry[K comparable, A any] struct {
	Key K
	Acc A
}

func (st *aggStage[K, T, A]) header() stateHeader {
	return stateHeader{Version: stateVersion, Kind: st.kind, Types: typeNames[K, A]()}
}

func (st *aggStage[K, T, A]) types() (key, acc reflect.Type) {
	return reflect.TypeFor[K](), reflect.TypeFor[A]()
}

func (st *aggStage[K, T, A]) lock()   { st.mu.Lock() }
func (st *aggStage[K, T, A]) unlock() { st.mu.Unlock() }

func (st *aggStage[K, T, A]) changedLocked() bool { return st.core.dirty.Load() }

func (st *aggStage[K, T, A]) snapshotLocked() ([]byte, error) {
	c := &st.core
	if err := c.whole(); err != nil {
		return nil, err
	}
	c.dirty.Store(false)
	f := aggFile[K, A]{Parts: c.partsFile(), Keys: make([]aggEntry[K, A], 0, len(st.one.accs))}
	for k, a := range st.one.accs {
		f.Keys = append(f.Keys, aggEntry[K, A]{k, a})
	}
	data, err := encodeState(st.header(), &f)
	if err != nil {
		c.dirty.Store(true)
		return nil, err
	}
	return data, nil
}

func (st *aggStage[K, T, A]) restore(data []byte) error {
	var f aggFile[K, A]
	if err := decodeState(st.core.name, data, st.header(), &f); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.core.restoreParts(f.Parts)
	for _, e := range f.Keys {
		st.one.accs[e.Key] = e.Acc
	}
	return nil
}

func (st *aggStage[K, T, A]) changesLocked(dst []checkpoint.Change, only func(partKey) bool) ([]checkpoint.Change, error) {
	c := &st.core
	if err := c.whole(); err != nil {
		return dst, err
	}
	for pk, tb := range st.tables {
		if !tb.changed || pk.topic == "" || (only != nil && !only(pk)) {
			continue
		}
		var err error
		dst, err = tableChanges(dst, c, pk, &tb.dirtyKeys, st.kc,
			func(k K) ([]byte, error) {
				if acc, ok := tb.accs[k]; ok {
					return st.ac.append(make([]byte, 0, 8), acc)
				}
				return nil, nil
			},
			func() (checkpoint.Change, error) { return c.metaChange(pk, st.header(), math.MinInt64, nil) })
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func (st *aggStage[K, T, A]) restorer(pk partKey) partRestorer {
	tb := st.newTable()
	return &aggRestorer[K, T, A]{st: st, pk: pk, tb: tb, r: newTableRestore[K, A](tb.accs)}
}

// aggRestorer rebuilds an Aggregate's table of one partition (see
// partRestorer).
type aggRestorer[K comparable, T, A any] struct {
	st *aggStage[K, T, A]
	pk partKey
	tb *aggTable[K, A]
	r  tableRestore[K, A]
}

func (ar *aggRestorer[K, T, A]) apply(key, value []byte) error {
	if isMeta(key) {
		ar.r.closed(value)
		return nil
	}
	st, c := ar.st, &ar.st.core
	k, err := decodeKey(st.kc, key)
	if err != nil {
		return fmt.Errorf("stream: state of stage %q for %s/%d: %w: %w", c.name, ar.pk.topic, ar.pk.partition, checkpoint.ErrCorrupt, err)
	}
	if value == nil {
		ar.r.remove(k)
		return nil
	}
	acc, err := st.ac.decode(value)
	if err != nil {
		return fmt.Errorf("stream: state of stage %q for %s/%d: %w: cannot decode the accumulator of %v: %w", c.name, ar.pk.topic, ar.pk.partition, ErrStateMismatch, k, err)
	}
	ar.r.set(k, acc)
	return nil
}

func (ar *aggRestorer[K, T, A]) installLocked() (int64, error) {
	st, tb := ar.st, ar.tb
	// Keys a torn save changed are written again at the next save.
	for _, k := range ar.r.rollback() {
		tb.touch(k)
	}
	st.dropPartLocked(ar.pk)
	next := int64(-1)
	if ar.r.meta != nil {
		m, err := st.core.restoreMeta(ar.pk, ar.r.meta, st.header())
		if err != nil {
			return -1, err
		}
		next = m.Part.Next
	}
	st.tables[ar.pk] = tb
	st.lastT = nil
	return next, nil
}

func (st *aggStage[K, T, A]) dropPartLocked(pk partKey) {
	delete(st.tables, pk)
	st.lastT = nil
	st.core.dropPart(pk)
}

func (st *aggStage[K, T, A]) assignPartLocked(pk partKey) {}
