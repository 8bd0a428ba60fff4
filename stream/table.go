package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// StageTable is the default name of a [ToTable] stage: its name in
// [StageStats] and the name its state is saved under.
const StageTable = "table"

// Table is a keyed table kept current from a stream: the latest value of
// each key, as Kafka Streams' KTable materialised in a state store. It is
// built with [ToTable], fed by a branch of a pipeline (typically a topic
// of reference data, compacted: see log.CleanupCompact), and read three
// ways:
//
//   - joined with a stream in the same pipeline ([JoinTable],
//     [LeftJoinTable]);
//   - from anywhere in the process, while the pipeline runs ([Table.Get],
//     [Table.Len], [Table.All]): an HTTP handler, another stage's
//     function. Reads take a read lock and never wait for a checkpoint's
//     snapshot longer than it takes to encode the table;
//   - on its own, as a read model served over HTTP: [Table.Run] runs the
//     pipeline that feeds it.
//
// The table is state, as an [Aggregate]'s accumulators are (see the package
// doc's "State"): saved with the positions at every checkpoint in which it
// changed, restored before a restarted pipeline reads anything, so that a
// restart reads only what was written after the last checkpoint rather
// than the whole topic, and equals a table built by one uninterrupted run.
// Its keys and values are saved with encoding/gob: Run refuses a type gob
// would not save whole ([ErrUnsavableState]).
//
// On a source whose partitions move between processes ([Assignable]: a
// consumer group) Run refuses a pipeline with a Table, with
// [ErrNotPerPartition]: a table is read whole by the process that joins
// with it (Kafka Streams' GlobalKTable), so its state belongs to no
// partition of the group. See [JoinTable] for the rule a distributed join
// follows.
type Table[K comparable, V any] struct {
	name string
	in   *Keyed[K, V]
	tomb func(V) bool
	ctr  *stageCounters
	// p is the pipeline feeding the table, until a join merges it into
	// into (then p is marked run).
	p    *pipeline
	into *pipeline
	// srcs are the sources of the table's branch (its readiness).
	srcs []io.Closer
	// wiredTo is the run the table's branch is wired into: a table
	// joined twice in one pipeline is fed once.
	wiredTo *runtime

	mu sync.RWMutex
	m  map[K]V

	ready     chan struct{}
	readyOnce sync.Once
}

// Tombstone makes a [ToTable] table delete a key when fn(value) is true,
// as Kafka deletes a key for a record with a null value (a tombstone: a
// log.Record with a nil Value; a decoding stage before the table must map
// it to a value fn recognises rather than fail on it). Without it every
// value is stored. It panics if fn is nil; ToTable panics if V is not the
// table's value type.
//
// A tombstone the log's cleaner removed while the table's pipeline was
// stopped (older than the topic's log.TombstoneRetention, Kafka's
// delete.retention.ms, 24 hours by default) is never read by the restored
// table, which keeps the deleted key: keep the retention longer than the
// pipeline may be down, as Kafka asks of its consumers.
func Tombstone[V any](fn func(V) bool) StateOption {
	mustFunc("Tombstone", fn == nil)
	return stateOptionFunc(func(c *stateConfig) {
		c.tombstone = fn
		if c.tableOnly == "" {
			c.tableOnly = "Tombstone"
		}
	})
}

// ToTable keeps the latest value of each key of k in a [Table]: a record
// replaces its key's value, or deletes the key when [Tombstone] says it
// is a tombstone. The records of k end in the table (they are finished
// once applied); k's Stream cannot be run or chained further. The table is
// read with the methods of Table, joined with [JoinTable] and
// [LeftJoinTable], and run alone with [Table.Run].
//
// opts: [Tombstone] and [Name] (default "table", also the name the state
// is saved under, unique among the pipeline's stateful stages). It panics
// if k is nil, if a [Window] option is given, or if a stage before it may
// reorder records ([Parallel], [KeyOrdered], [Batch], [Via]): a table must
// apply a key's updates in their order.
func ToTable[K comparable, V any](k *Keyed[K, V], opts ...StateOption) *Table[K, V] {
	if k == nil {
		panic("stream: ToTable called with a nil Keyed")
	}
	cfg := newStateConfig(StageTable, opts)
	if cfg.joinOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to the windowed joins (JoinWindow), not to ToTable", cfg.joinOnly))
	}
	if cfg.windowOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to Window, not to ToTable", cfg.windowOnly))
	}
	t := &Table[K, V]{name: cfg.name, in: k, p: k.s.p, m: make(map[K]V), ready: make(chan struct{})}
	if cfg.tombstone != nil {
		fn, ok := cfg.tombstone.(func(V) bool)
		if !ok {
			panic(fmt.Sprintf("stream: Tombstone's function is a %T, ToTable %q needs a func(%s) bool", cfg.tombstone, cfg.name, reflect.TypeFor[V]()))
		}
		t.tomb = fn
	}
	registerState(k, "ToTable", cfg.name)
	p := k.s.p
	t.srcs = slices.Clone(p.sources)
	p.tableSources = append(p.tableSources, p.sources...)
	p.tables = append(p.tables, cfg.name)
	t.ctr = p.counters(cfg.name)
	t.ctr.timed = true // hands nothing on: busy is the time it applies records
	return t
}

// Name returns the table's name: its stage's name and the name its state is
// saved under.
func (t *Table[K, V]) Name() string { return t.name }

// Get returns the value of key and whether the table has it. It is safe
// for concurrent use, also while the pipeline feeding the table runs.
func (t *Table[K, V]) Get(key K) (V, bool) {
	t.mu.RLock()
	v, ok := t.m[key]
	t.mu.RUnlock()
	return v, ok
}

// Len returns the number of keys in the table.
func (t *Table[K, V]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}

// All returns an iterator over the table's keys and values, in no order.
// It holds the table's read lock while the loop runs: the pipeline feeding
// the table waits meanwhile, so a loop that does more than copy should
// copy first ([maps.Collect] of it).
func (t *Table[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		t.mu.RLock()
		defer t.mu.RUnlock()
		for k, v := range t.m {
			if !yield(k, v) {
				return
			}
		}
	}
}

// Ready returns a channel closed once the table has caught up with its
// input for the first time: after a restore, every partition of its source
// read up to the high watermark it had when the run began (its source
// reports it, [CaughtUpReporter]: source.Topic and source.Partition), or,
// with a source that cannot tell, the input ended. Until then the table
// holds only part of its topic: a read model answers "not ready" meanwhile,
// and [JoinTable] holds the stream's records back until it is closed.
func (t *Table[K, V]) Ready() <-chan struct{} { return t.ready }

func (t *Table[K, V]) markReady() { t.readyOnce.Do(func() { close(t.ready) }) }

func (t *Table[K, V]) isReady() bool {
	select {
	case <-t.ready:
		return true
	default:
		return false
	}
}

// ErrTableJoined is returned by [Table.Run] for a table a join has merged
// into another pipeline: run the join's Stream instead, which feeds the
// table too.
var ErrTableJoined = errors.New("stream: the table is fed by the pipeline of a join: run that")

// Run runs the pipeline that feeds the table, as [Stream.Run] does: the
// table's records are applied and checkpointed with the store given to
// Checkpointing on its input, and Run returns when the input ends (a
// replay) or ctx is cancelled (a follow). A table joined with a stream is
// fed by the join's pipeline: Run then returns [ErrTableJoined]; a second
// Run returns [ErrAlreadyRun].
func (t *Table[K, V]) Run(ctx context.Context) error {
	if t.into != nil {
		return ErrTableJoined
	}
	s := &Stream[struct{}]{p: t.p, connect: func(rt *runtime, _ outlet[struct{}]) { t.wire(rt) }}
	return s.Run(ctx)
}

// Stats returns the counts of every stage of the pipeline feeding the
// table, as [Stream.Stats] does; the table's own stage counts the records
// it applied as In and Out.
func (t *Table[K, V]) Stats() []StageStats {
	p := t.p
	if t.into != nil {
		p = t.into
	}
	return (&Stream[struct{}]{p: p}).Stats()
}

// joinInto merges the table's pipeline into p's (a join of a stream of p
// with the table) and returns the merged pipeline; a table already merged
// into p is not merged again.
func (t *Table[K, V]) joinInto(op string, p *pipeline) *pipeline {
	if t.into != nil {
		if t.into == p {
			return p
		}
		panic(fmt.Sprintf("stream: %s with table %q, which another pipeline already joins: a table feeds one pipeline", op, t.name))
	}
	if t.p == p {
		panic(fmt.Sprintf("stream: %s of a stream with table %q, which that stream itself feeds", op, t.name))
	}
	np := mergePipelines(op, p, t.p)
	t.into = np
	return np
}

// wire connects the table's branch into its stage for rt, once per run.
func (t *Table[K, V]) wire(rt *runtime) {
	if t.wiredTo == rt {
		return
	}
	t.wiredTo = rt
	st := &tableStage[K, V]{t: t, closed: make(chan struct{})}
	st.core.init(rt, t.name, t.ctr)
	for _, src := range t.srcs {
		if l, ok := src.(PartitionLister); ok {
			st.listers = append(st.listers, l)
		}
		if u, ok := src.(CaughtUpReporter); ok {
			st.ups = append(st.ups, u)
			if _, ok := src.(PartitionLister); !ok {
				if one, ok := src.(interface {
					Topic() string
					PartitionID() int32
				}); ok {
					st.singles = append(st.singles, one)
				}
			}
		}
	}
	rt.stateful = append(rt.stateful, st)
	t.in.s.connect(rt, newTimedOutlet[V](st, &t.ctr.push, &rt.p.obs.timing))
	rt.spawn(st.watchReady)
}

// tableStage is a Table's stage in one run: it applies the records of the
// table's branch and is the table's stateful stage.
type tableStage[K comparable, V any] struct {
	t    *Table[K, V]
	core stateCore
	offs []int64

	listers []PartitionLister
	ups     []CaughtUpReporter
	singles []interface {
		Topic() string
		PartitionID() int32
	}
	pts []*checkpoint.PartitionTracker

	closed    chan struct{} // the branch's sources all ended
	closeOnce sync.Once

	// restored: a snapshot of the table was found and restored.
	restored bool
}

func (st *tableStage[K, V]) push(ctx context.Context, elems []Element[V]) error {
	c := &st.core
	c.ctr.in.Add(int64(len(elems)))
	if !st.restored {
		if err := st.startsEmpty(ctx, elems); err != nil {
			return err
		}
	}
	if err := st.apply(elems); err != nil {
		return err
	}
	c.ctr.out.Add(int64(len(elems)))
	c.ctr.left.Add(int64(len(elems)))
	st.offs = finish(elems, st.offs)
	c.rt.noteFinished(len(elems))
	return nil
}

// startsEmpty refuses a table that found no snapshot to restore while a
// position of its input is saved (stateCore.refuseEmptyStart).
func (st *tableStage[K, V]) startsEmpty(ctx context.Context, elems []Element[V]) error {
	for i := range elems {
		if err := st.core.refuseEmptyStart(ctx, "table", elems[i].Topic, elems[i].Partition); err != nil {
			return err
		}
	}
	return nil
}

// apply applies elems to the table under its lock, released by a defer: a
// panic in the key or tombstone function must not leave the table locked
// (the busy flag then keeps the half-applied table from being saved).
func (st *tableStage[K, V]) apply(elems []Element[V]) (err error) {
	t, c := st.t, &st.core
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { c.failPush(err) }()
	for i := range elems {
		e := &elems[i]
		ps := c.part(e.Topic, e.Partition)
		replay, err := c.check(ps, e.Topic, e.Partition, e.Offset)
		if err != nil {
			return err
		}
		if replay {
			continue // its effect is in the restored table
		}
		c.busy = true // until the record's effect is whole
		k := t.in.key(e.Value)
		if t.tomb != nil && t.tomb(e.Value) {
			delete(t.m, k)
		} else {
			t.m[k] = e.Value
		}
		c.busy = false
	}
	c.dirty.Store(true)
	return nil
}

func (st *tableStage[K, V]) close(context.Context) error {
	st.closeOnce.Do(func() { close(st.closed) })
	return nil
}

// readyPoll is how often a table that has not caught up asks its sources
// again: a join's first records wait at most about this long past the
// moment the table caught up.
const readyPoll = 2 * time.Millisecond

// watchReady closes the table's Ready channel once its branch has caught
// up with its sources or ended; it leaves at a stop or a cancellation.
func (st *tableStage[K, V]) watchReady() error {
	rt := st.core.rt
	if st.t.isReady() {
		return nil
	}
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	for {
		if st.caughtUp() {
			st.t.markReady()
			return nil
		}
		select {
		case <-st.closed:
			st.t.markReady()
			return nil
		case <-rt.stop:
			return nil
		case <-rt.srcCtx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// caughtUp reports whether every partition the table's sources read is
// caught up with its high watermark; false when a source cannot tell.
func (st *tableStage[K, V]) caughtUp() bool {
	if len(st.ups) == 0 || len(st.ups) < len(st.t.srcs) {
		return false // only the end of the input tells
	}
	var tps []TopicPartition
	for _, l := range st.listers {
		got := l.PendingPartitions()
		if got == nil {
			return false // not opened yet
		}
		tps = append(tps, got...)
	}
	for _, s := range st.singles {
		tps = append(tps, TopicPartition{s.Topic(), s.PartitionID()})
	}
	if len(st.listers)+len(st.singles) < len(st.ups) {
		return false
	}
	for _, tp := range tps {
		var next int64
		next, st.pts = st.core.rt.finishedTo(tp.Topic, tp.Partition, st.pts)
		answered := false
		for _, u := range st.ups {
			if c, ok := u.CaughtUp(tp.Topic, tp.Partition, next); ok {
				if !c {
					return false
				}
				answered = true
				break
			}
		}
		if !answered {
			return false
		}
	}
	return true
}

// finishedTo returns the position of a partition's tracker: the lowest
// offset of it the pipeline has not finished, -1 when it has finished none
// (or does not read it). pts is scratch space, returned for reuse.
func (rt *runtime) finishedTo(topic string, partition int32, pts []*checkpoint.PartitionTracker) (int64, []*checkpoint.PartitionTracker) {
	next := int64(-1)
	pts = rt.tracker.Partitions(pts[:0])
	for _, pt := range pts {
		if pt.ID() == partition && pt.Topic() == topic {
			if pos, ok := pt.Position(); ok {
				next = pos.Offset
			}
			break
		}
	}
	clear(pts)
	return next, pts
}

// tableFile is a Table's snapshot.
type tableFile[K comparable, V any] struct {
	Parts []partFile
	Keys  []aggEntry[K, V]
}

func (st *tableStage[K, V]) header() stateHeader {
	return stateHeader{Version: stateVersion, Kind: StageTable, Types: typeNames[K, V]()}
}

func (st *tableStage[K, V]) stateName() string { return st.core.name }

func (st *tableStage[K, V]) types() (key, acc reflect.Type) {
	return reflect.TypeFor[K](), reflect.TypeFor[V]()
}

func (st *tableStage[K, V]) lock()   { st.t.mu.Lock() }
func (st *tableStage[K, V]) unlock() { st.t.mu.Unlock() }

func (st *tableStage[K, V]) changedLocked() bool { return st.core.dirty.Load() }

func (st *tableStage[K, V]) snapshotLocked() ([]byte, error) {
	c := &st.core
	if err := c.whole(); err != nil {
		return nil, err
	}
	c.dirty.Store(false)
	f := tableFile[K, V]{Parts: c.partsFile(), Keys: make([]aggEntry[K, V], 0, len(st.t.m))}
	for k, v := range st.t.m {
		f.Keys = append(f.Keys, aggEntry[K, V]{k, v})
	}
	data, err := encodeState(st.header(), &f)
	if err != nil {
		c.dirty.Store(true)
		return nil, err
	}
	return data, nil
}

func (st *tableStage[K, V]) restore(data []byte) error {
	var f tableFile[K, V]
	if err := decodeState(st.core.name, data, st.header(), &f); err != nil {
		return err
	}
	st.t.mu.Lock()
	defer st.t.mu.Unlock()
	st.restored = true
	st.core.restoreParts(f.Parts)
	clear(st.t.m)
	for _, e := range f.Keys {
		st.t.m[e.Key] = e.Acc
	}
	return nil
}

// owed is 0: a table emits nothing.
func (st *tableStage[K, V]) owed() int { return 0 }

// A table is never kept per partition: Run refuses it on an Assignable
// source (restoreState), so these are never called.
func (st *tableStage[K, V]) changesLocked(dst []checkpoint.Change, _ func(partKey) bool) ([]checkpoint.Change, error) {
	return dst, fmt.Errorf("%w: table %q", ErrNotPerPartition, st.core.name)
}

func (st *tableStage[K, V]) restorer(partKey) partRestorer { return tableNoRestorer{st.core.name} }
func (st *tableStage[K, V]) dropPartLocked(partKey)        {}
func (st *tableStage[K, V]) assignPartLocked(partKey)      {}

type tableNoRestorer struct{ name string }

func (r tableNoRestorer) apply(_, _ []byte) error {
	return fmt.Errorf("%w: table %q", ErrNotPerPartition, r.name)
}

func (r tableNoRestorer) installLocked() (int64, error) {
	return -1, fmt.Errorf("%w: table %q", ErrNotPerPartition, r.name)
}
