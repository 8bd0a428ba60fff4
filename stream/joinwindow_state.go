package stream

// The state of the windowed joins (joinwindow.go): their snapshot, its
// restore, and the refusal of per-partition state.

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/strom-dev/strom/checkpoint"
)

// joinFile is a windowed join's snapshot.
type joinFile[K comparable, L, R, U any] struct {
	Parts     []partFile
	Right     []TopicPartition // the partitions of the right input (the others are the left's)
	Watermark int64
	Seq       uint64
	Lefts     []joinEntry[K, L]
	Rights    []joinEntry[K, R]
	Pending   []joinResult[U] // in the order they were emitted
}

// joinResult is a result the join owes downstream, with its event time.
type joinResult[U any] struct {
	Value U
	Ts    int64 // ms
}

type joinEntry[K comparable, V any] struct {
	Key           K
	Value         V
	T             int64
	Seq           uint64
	Matched, Sent bool
}

// joinValues holds the types a join saves, for Run's check of them.
type joinValues[L, R, U any] struct {
	Left   L
	Right  R
	Result U
}

func (st *joinStage[K, L, R, U]) header() stateHeader {
	kind := [...]string{StageJoinWindow, StageLeftJoinWindow, StageOuterJoinWindow}[st.kind]
	return stateHeader{Version: stateVersion, Kind: kind, Spec: "within " + ms(st.within).String(),
		Types: fmt.Sprintf("key %s, left %s, right %s, result %s", reflect.TypeFor[K](), reflect.TypeFor[L](), reflect.TypeFor[R](), reflect.TypeFor[U]())}
}

func (st *joinStage[K, L, R, U]) stateName() string { return st.core.name }

func (st *joinStage[K, L, R, U]) types() (key, acc reflect.Type) {
	return reflect.TypeFor[K](), reflect.TypeFor[joinValues[L, R, U]]()
}

func (st *joinStage[K, L, R, U]) lock()   { st.mu.Lock() }
func (st *joinStage[K, L, R, U]) unlock() { st.mu.Unlock() }

func (st *joinStage[K, L, R, U]) changedLocked() bool { return st.core.dirty.Load() }

func (st *joinStage[K, L, R, U]) snapshotLocked() ([]byte, error) {
	c := &st.core
	if err := c.whole(); err != nil {
		return nil, err
	}
	c.dirty.Store(false)
	f := joinFile[K, L, R, U]{Parts: c.partsFile(), Watermark: st.wm, Seq: st.seq,
		Lefts: entries(st.left), Rights: entries(st.right), Pending: slices.Clone(st.redo)}
	for pk, s := range st.side {
		if s == sideRight {
			f.Right = append(f.Right, TopicPartition{pk.topic, pk.partition})
		}
	}
	st.pend.mu.Lock()
	ids := make([]int64, 0, len(st.pend.m))
	for id := range st.pend.m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		f.Pending = append(f.Pending, st.pend.m[id].res)
	}
	st.pend.mu.Unlock()
	data, err := encodeState(st.header(), &f)
	if err != nil {
		c.dirty.Store(true)
		return nil, err
	}
	return data, nil
}

func entries[K comparable, V any](b joinBuf[K, V]) []joinEntry[K, V] {
	out := make([]joinEntry[K, V], 0, b.n)
	for k, recs := range b.keys {
		for _, r := range recs {
			out = append(out, joinEntry[K, V]{Key: k, Value: r.v, T: r.t, Seq: r.seq, Matched: r.matched, Sent: r.sent})
		}
	}
	return out
}

func (st *joinStage[K, L, R, U]) restore(data []byte) error {
	var f joinFile[K, L, R, U]
	if err := decodeState(st.core.name, data, st.header(), &f); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.restored = true
	st.core.restoreParts(f.Parts)
	for _, p := range f.Parts {
		if p.Topic != "" {
			st.side[partKey{p.Topic, p.Partition}] = sideLeft
		}
	}
	for _, tp := range f.Right {
		st.side[partKey{tp.Topic, tp.Partition}] = sideRight
	}
	st.wm, st.seq = f.Watermark, f.Seq
	restoreBuf(st, &st.left, f.Lefts, sideLeft)
	restoreBuf(st, &st.right, f.Rights, sideRight)
	st.redo = append(st.redo, f.Pending...)
	return nil
}

func restoreBuf[K comparable, L, R, U, V any](st *joinStage[K, L, R, U], b *joinBuf[K, V], es []joinEntry[K, V], side uint8) {
	// In arrival order: a key's records are matched in it.
	slices.SortFunc(es, func(a, b joinEntry[K, V]) int { return cmpU64(a.Seq, b.Seq) })
	for _, e := range es {
		b.keys[e.Key] = append(b.keys[e.Key], joinRec[V]{v: e.Value, t: e.T, seq: e.Seq, matched: e.Matched, sent: e.Sent})
		b.n++
		st.exp.push(joinExp[K]{at: e.T + st.within + st.cfg.lateness, seq: e.Seq, key: e.Key, side: side})
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// owed returns how many results are still owed downstream.
func (st *joinStage[K, L, R, U]) owed() int {
	st.pend.mu.Lock()
	defer st.pend.mu.Unlock()
	return len(st.pend.m)
}

// held returns how many records the join holds, for the tests.
func (st *joinStage[K, L, R, U]) held() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.left.n + st.right.n
}

// copartitionError is Run's refusal of the join on a source whose
// partitions move between processes (restoreState).
func (st *joinStage[K, L, R, U]) copartitionError() error {
	return fmt.Errorf("%w: join %q reads a source whose partitions move between processes (a consumer group): each process would see only the records of "+
		"the partitions it owns, so both inputs must be partitioned alike by the join key (the same partition count and partitioner, the key the one they are "+
		"partitioned by, or a stream.Repartition first) and partition i of both owned by one process, with the join's state kept per partition and moving with "+
		"them, which strom does not do yet for a windowed join. Run the join on one process: read both topics whole (source.Topic on the embedded log, or a "+
		"relay of the Kafka topics into it)", ErrNotCopartitioned, st.core.name)
}

// A join is never kept per partition: Run refuses it on an Assignable
// source (restoreState), so these are never called.
func (st *joinStage[K, L, R, U]) changesLocked(dst []checkpoint.Change, _ func(partKey) bool) ([]checkpoint.Change, error) {
	return dst, st.copartitionError()
}

func (st *joinStage[K, L, R, U]) restorer(partKey) partRestorer {
	return joinNoRestorer{st.copartitionError()}
}
func (st *joinStage[K, L, R, U]) dropPartLocked(partKey)   {}
func (st *joinStage[K, L, R, U]) assignPartLocked(partKey) {}

type joinNoRestorer struct{ err error }

func (r joinNoRestorer) apply(_, _ []byte) error       { return r.err }
func (r joinNoRestorer) installLocked() (int64, error) { return -1, r.err }
