package stream

import (
	"bytes"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
)

// Keyed is a Stream whose values are grouped by a key, built with [KeyBy]
// for the stateful operators: [Aggregate], [Reduce] and [Window].
type Keyed[K comparable, T any] struct {
	s   *Stream[T]
	key func(T) K
}

// KeyBy groups the values of s by key(value) for a stateful operator that
// follows it ([Aggregate], [Reduce], [Window]). The key is computed once
// per record, on the stateful stage's goroutine; it must be deterministic,
// since a record delivered again after a restart must find the same key.
// It panics if key is nil.
func KeyBy[T any, K comparable](s *Stream[T], key func(T) K) *Keyed[K, T] {
	mustFunc("KeyBy", key == nil)
	return &Keyed[K, T]{s: s, key: key}
}

// KV is a key and its value: what [Aggregate] and [Reduce] emit.
type KV[K comparable, V any] struct {
	Key   K
	Value V
}

// Aggregator folds the values of a key (or of a window) into an
// accumulator of type A, as Kafka Streams' aggregate(initializer,
// aggregator) and Flink's AggregateFunction do.
//
// Init returns the accumulator of a new key or window (nil: the zero A).
// Add returns acc with v added; it must be deterministic and may modify
// and return acc. Merge returns the accumulator of two session windows
// that one record joined; only [Session] windows need it. The functions
// are called under the stage's lock, one at a time.
//
// Accumulators and keys are saved with encoding/gob (see the package
// doc's "State"): their exported fields are what survives a restart.
type Aggregator[T, A any] struct {
	Init  func() A
	Add   func(acc A, v T) A
	Merge func(a, b A) A
}

// Count returns the Aggregator that counts records: an int64 per key or
// window.
func Count[T any]() Aggregator[T, int64] {
	return Aggregator[T, int64]{
		Add:   func(n int64, _ T) int64 { return n + 1 },
		Merge: func(a, b int64) int64 { return a + b },
	}
}

// Number is the constraint of [Sum]'s values.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// Sum returns the Aggregator that adds fn(v) of every record.
func Sum[T any, N Number](fn func(T) N) Aggregator[T, N] {
	mustFunc("Sum", fn == nil)
	return Aggregator[T, N]{
		Add:   func(acc N, v T) N { return acc + fn(v) },
		Merge: func(a, b N) N { return a + b },
	}
}

func (a Aggregator[T, A]) init() A {
	if a.Init == nil {
		var zero A
		return zero
	}
	return a.Init()
}

// Stage names of the stateful operators, the default of [Name] for them
// and the name their state is saved under.
const (
	StageAggregate = "aggregate" // Aggregate
	StageReduce    = "reduce"    // Reduce
	StageWindow    = "window"    // Window
)

// ErrNoStateStore is returned by [Stream.Run] for a pipeline with a
// stateful stage ([Aggregate], [Reduce], [Window]) and checkpoint stores of
// which none is a [checkpoint.StateStore]: its state could not be saved
// with the positions, and a restart would count replayed records twice.
// checkpoint.FileStore and checkpoint.MemoryStore are StateStores.
var ErrNoStateStore = errors.New("stream: a stateful stage needs a checkpoint.StateStore among the pipeline's checkpoint stores")

// ErrStateMismatch is returned by [Stream.Run] when a stage's saved state
// was written by another kind of stage or another window definition (a
// tumbling window of 1 minute restored as one of 5): reading it would give
// wrong results. Rename the stage ([Name]) to start afresh, or restore the
// old definition.
var ErrStateMismatch = errors.New("stream: saved state does not match the stage")

// ErrOutOfOrder is returned by [Stream.Run] when a stateful stage receives
// a record of a partition below one it already had, which its exactness
// rule does not allow (see the package doc's "State"). Run refuses the
// stages known to reorder (Parallel, KeyOrdered, Batch, Via) before a
// stateful stage when the pipeline is built; this error is for a source
// that breaks the Source contract.
var ErrOutOfOrder = errors.New("stream: records of a partition reached a stateful stage out of offset order")

// StateOption configures a stateful stage: [Name] for all of them, and for
// [Window] the options of event time and lateness ([EventTime],
// [ProcessingTime], [OutOfOrderness], [AllowedLateness], [LateTo],
// [DropLate], [EmitUpdates]).
type StateOption interface{ applyState(*stateConfig) }

type stateOptionFunc func(*stateConfig)

func (f stateOptionFunc) applyState(c *stateConfig) { f(c) }

// stateConfig holds a stateful stage's settings.
type stateConfig struct {
	name string
	// Window's (window.go).
	eventTime      any // func(T) time.Time
	processingTime bool
	outOfOrder     int64 // ms
	lateness       int64 // ms
	lateSink       any   // Sink[T]
	dropLate       bool
	emitUpdates    bool
	windowOnly     string // the first Window-only option given, for Aggregate's check
}

func newStateConfig(name string, opts []StateOption) *stateConfig {
	c := &stateConfig{name: name}
	for _, o := range opts {
		if o != nil {
			o.applyState(c)
		}
	}
	return c
}

// registerState checks a stateful stage's place in the pipeline when it is
// built: its name must be unique among the pipeline's stateful stages (it
// names the saved state), and no stage before it may reorder records.
func registerState[T any](s *Stream[T], op, name string) {
	if s.reorders != "" {
		panic(fmt.Sprintf("stream: %s %q needs the records of each partition in offset order, and the stage %q before it may reorder them: "+
			"put Parallel, KeyOrdered, Batch and Via stages after the stateful one", op, name, s.reorders))
	}
	if s.p.stateNames == nil {
		s.p.stateNames = make(map[string]bool)
	}
	if s.p.stateNames[name] {
		panic(fmt.Sprintf("stream: two stateful stages of one pipeline are named %q: their state would be saved under one name; give them distinct names with stream.Name", name))
	}
	s.p.stateNames[name] = true
}

// statefulStage is what Run needs of a stage that keeps state.
type statefulStage interface {
	stateName() string
	// restore loads the stage's state from store.
	restore(ctx context.Context, store checkpoint.StateStore) error
	// snapshot encodes the state when it changed since the last snapshot,
	// and sets aside the records it covers for release.
	snapshot() (data []byte, changed bool, err error)
	// release finishes the records the last snapshot covered: it is saved.
	release()
}

// partKey names a source partition; the zero partKey stands for records
// without lineage.
type partKey struct {
	topic     string
	partition int32
}

// partState is what a stateful stage knows of one source partition.
type partState struct {
	// restored: the offsets below it had reached the stage before the
	// snapshot it was restored from, and are in that state. A record
	// below it is a replay.
	restored int64
	// next is one past the last offset that reached the stage.
	next int64
	// maxTs is the greatest event time seen in the partition, in ms
	// (math.MinInt64: none yet); Window's watermark is built on it.
	maxTs int64
}

// stateCore is what every stateful stage keeps besides its state proper:
// the marks per partition that tell a replayed record, and the records
// held unfinished until a snapshot that covers them is saved.
type stateCore struct {
	rt      *runtime
	name    string
	ctr     *stageCounters
	persist bool // positions are saved: hold records until a snapshot covers them

	parts    map[partKey]*partState
	lastKey  partKey
	lastPart *partState

	held      []member // absorbed since the last snapshot
	releasing []member // covered by the snapshot being saved
	offs      []int64  // scratch of the stage's push, under its lock
	// relOffs is releaseHeld's scratch. releaseHeld runs on the saving
	// goroutine without the stage's lock, while a push may be using offs:
	// sharing offs raced, and a Done could get another call's offsets.
	relOffs []int64
	dirty   atomic.Bool // changed since the last snapshot
	// busy is set while the state is being changed: a panic in a user
	// function leaves it set, and a state half changed is never saved.
	busy bool
}

func (c *stateCore) init(rt *runtime, name string, ctr *stageCounters) {
	c.rt, c.name, c.ctr = rt, name, ctr
	c.persist = len(rt.p.stores) > 0
	c.parts = make(map[partKey]*partState)
}

// part returns the state of e's partition.
func (c *stateCore) part(topic string, partition int32) *partState {
	if c.lastPart != nil && c.lastKey.partition == partition && c.lastKey.topic == topic {
		return c.lastPart
	}
	k := partKey{topic, partition}
	ps := c.parts[k]
	if ps == nil {
		ps = &partState{maxTs: math.MinInt64}
		c.parts[k] = ps
	}
	c.lastKey, c.lastPart = k, ps
	return ps
}

// check tells a replayed record (below the restored mark) and refuses one
// out of order; otherwise it records that the record reached the stage.
func (c *stateCore) check(ps *partState, topic string, partition int32, offset int64) (replay bool, err error) {
	if topic == "" {
		return false, nil // no lineage: neither replays nor order to check
	}
	if offset < ps.restored {
		return true, nil
	}
	if offset+1 < ps.next {
		// offset == next-1 is a record split upstream (FlatMap): allowed.
		return false, fmt.Errorf("%w: stage %q had %s/%d offset %d, then offset %d",
			ErrOutOfOrder, c.name, topic, partition, ps.next-1, offset)
	}
	ps.next = offset + 1
	return false, nil
}

// hold keeps e unfinished until a snapshot covering it is saved, or
// finishes it at once when nothing is saved; fin collects what to finish.
func (c *stateCore) hold(owner acker, offset int64, fin *[]member) {
	if owner == nil {
		return
	}
	if c.persist {
		c.held = append(c.held, member{owner: owner, offset: offset})
	} else {
		*fin = append(*fin, member{owner: owner, offset: offset})
	}
}

// finishMembers calls Done once per run of members of one owner.
func finishMembers(ms []member, offs []int64) []int64 {
	for i := 0; i < len(ms); {
		o := ms[i].owner
		offs = offs[:0]
		j := i
		for ; j < len(ms) && ms[j].owner == o; j++ {
			offs = append(offs, ms[j].offset)
		}
		o.Done(offs...)
		i = j
	}
	return offs
}

// takeHeld sets the held records aside for release after the snapshot.
func (c *stateCore) takeHeld() {
	c.releasing = append(c.releasing, c.held...)
	clear(c.held)
	c.held = c.held[:0]
}

// releaseHeld finishes the records of the saved snapshot. Called by the
// runtime's save, which runs one at a time.
func (c *stateCore) releaseHeld() {
	if len(c.releasing) == 0 {
		return
	}
	c.relOffs = finishMembers(c.releasing, c.relOffs)
	clear(c.releasing)
	c.releasing = c.releasing[:0]
}

// partFile is a partition's marks in a snapshot.
type partFile struct {
	Topic     string
	Partition int32
	Next      int64 // restored as partState.restored and next
	MaxTs     int64
}

func (c *stateCore) partsFile() []partFile {
	out := make([]partFile, 0, len(c.parts))
	for k, ps := range c.parts {
		next := max(ps.next, ps.restored)
		out = append(out, partFile{Topic: k.topic, Partition: k.partition, Next: next, MaxTs: ps.maxTs})
	}
	return out
}

func (c *stateCore) restoreParts(pf []partFile) {
	for _, p := range pf {
		c.parts[partKey{p.Topic, p.Partition}] = &partState{restored: p.Next, next: p.Next, maxTs: p.MaxTs}
	}
	c.lastPart = nil
}

// stateVersion is the version of the snapshot format below; a restore
// accepts no other.
const stateVersion = 1

// stateHeader opens every snapshot: what wrote it, for ErrStateMismatch.
type stateHeader struct {
	Version int
	Kind    string // StageAggregate, StageReduce, StageWindow
	Spec    string // the window definition ("" for Aggregate and Reduce)
}

// encodeState encodes a snapshot: the header, then body, with gob.
func encodeState(h stateHeader, body any) ([]byte, error) {
	var buf bytes.Buffer
	enc := gob.NewEncoder(&buf)
	if err := enc.Encode(h); err != nil {
		return nil, err
	}
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeState checks a snapshot's header against want and decodes its body.
func decodeState(name string, data []byte, want stateHeader, body any) error {
	dec := gob.NewDecoder(bytes.NewReader(data))
	var h stateHeader
	if err := dec.Decode(&h); err != nil {
		return fmt.Errorf("stream: state of stage %q: %w: cannot decode its header: %w", name, checkpoint.ErrCorrupt, err)
	}
	if h.Version != stateVersion {
		return fmt.Errorf("stream: state of stage %q: %w: format version %d, want %d", name, ErrStateMismatch, h.Version, stateVersion)
	}
	if h.Kind != want.Kind || h.Spec != want.Spec {
		return fmt.Errorf("stream: state of stage %q: %w: saved by %s %s, the stage is %s %s",
			name, ErrStateMismatch, h.Kind, h.Spec, want.Kind, want.Spec)
	}
	if err := dec.Decode(body); err != nil {
		return fmt.Errorf("stream: state of stage %q: %w: cannot decode it: %w", name, checkpoint.ErrCorrupt, err)
	}
	return nil
}

// lineageKeeper is implemented by the stateful stages whose outputs carry
// the lineage of the records they come from (Aggregate, Reduce), as
// opposed to Window, whose results have none.
type lineageKeeper interface{ keepsLineage() }

// stateSaveOrder returns the order in which saveState snapshots the stages
// of stateful, which is in wiring order: every stage after the stages
// downstream of it. Each stage's snapshot is taken, saved and released in
// turn while records flow, so the order decides which of two chained
// stages may have seen more:
//
//   - after an Aggregate (or Reduce) a stage must have saved at least what
//     the Aggregate saved: a record the Aggregate saved and the stage did
//     not comes again after a restart, and the Aggregate then emits the
//     key's current value for it, not the value the stage missed. So
//     Aggregates go first, upstream first: a stage snapshotted after an
//     upstream one has seen everything that one had (an upstream stage
//     holds its lock while it pushes downstream).
//   - after a Window a stage must not have saved a result that the
//     Window saves as pending: results have no lineage to be recognised
//     as replays by, and a pending one is emitted again after a restart.
//     So Windows go last, downstream first: the stages after a Window have
//     finished what they saved (released) before its snapshot.
//
// Snapshotting downstream first throughout, as before, saved an Aggregate
// ahead of a stage after it, and that stage counted wrong values after a
// crash (TestChainedStatefulStagesAreExactWhenTheyAdvancedBetweenTheirSaves).
func stateSaveOrder(stateful []statefulStage) []statefulStage {
	order := make([]statefulStage, 0, len(stateful))
	for i := len(stateful) - 1; i >= 0; i-- {
		if _, ok := stateful[i].(lineageKeeper); ok {
			order = append(order, stateful[i])
		}
	}
	for _, st := range stateful {
		if _, ok := st.(lineageKeeper); !ok {
			order = append(order, st)
		}
	}
	return order
}

// restoreState finds the state stores and restores every stateful stage
// from the first one, before any record is read.
func (rt *runtime) restoreState(ctx context.Context) error {
	if len(rt.stateful) == 0 {
		return nil
	}
	rt.stateOrder = stateSaveOrder(rt.stateful)
	for _, s := range rt.p.stores {
		if ss, ok := s.(checkpoint.StateStore); ok {
			rt.stateStores = append(rt.stateStores, ss)
		}
	}
	if len(rt.p.stores) == 0 {
		return nil // nothing is saved: state lives in memory for this run
	}
	if len(rt.stateStores) == 0 {
		return fmt.Errorf("%w (stage %q)", ErrNoStateStore, rt.stateful[0].stateName())
	}
	for _, st := range rt.stateful {
		if err := st.restore(ctx, rt.stateStores[0]); err != nil {
			return err
		}
	}
	return nil
}

// saveState saves the snapshot of every stateful stage that changed to
// every state store, then finishes the records the snapshots cover, one
// stage after the other in stateSaveOrder. Called by save, under saveMu,
// before the positions are computed.
func (rt *runtime) saveState(ctx context.Context) error {
	for _, st := range rt.stateOrder {
		data, changed, err := st.snapshot()
		if err != nil {
			return fmt.Errorf("stream: snapshot of stage %q: %w", st.stateName(), err)
		}
		if !changed {
			continue
		}
		for _, ss := range rt.stateStores {
			if err := ss.SaveState(ctx, st.stateName(), data); err != nil {
				return fmt.Errorf("stream: save the state of stage %q (%d bytes): %w", st.stateName(), len(data), err)
			}
		}
		rt.stateBytes.Store(int64(len(data)))
		st.release()
	}
	return nil
}

// saveWhenHeld is registered as a flusher by stateful stages: a source
// waiting for room (WithMaxInFlight) may be waiting for records a stage
// holds until the next snapshot, so take one now.
func (rt *runtime) saveWhenHeld(held func() bool) func(context.Context) error {
	return func(context.Context) error {
		if len(rt.p.stores) == 0 || !held() {
			return nil
		}
		if err := rt.failSave(); err != nil {
			return errAbandoned // failSave stopped the pipeline
		}
		return nil
	}
}
