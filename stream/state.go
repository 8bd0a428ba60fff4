package stream

import (
	"bytes"
	"context"
	"encoding"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync/atomic"

	"github.com/strom-dev/strom/checkpoint"
)

// Keyed is a Stream whose values are grouped by a key, built with [KeyBy]
// for the stateful operators: [Aggregate], [Reduce] and [Window].
type Keyed[K comparable, T any] struct {
	s   *Stream[T]
	key func(T) K
	// follows: the key is known to follow the partitioning of the
	// records' source (FollowsPartitioning, Repartition).
	follows bool
}

// FollowsPartitioning declares that k's key is the one the records' source
// is partitioned by, so that all the records of a key arrive through one
// partition: the Kafka record key a producer partitioned by (Kafka's
// default partitioner hashes it), or a value derived from it that keeps
// records of different Kafka keys apart (the key itself, parsed or
// reformatted). A value that merges Kafka keys (a bucket of them, a
// prefix) does not follow the partitioning: two of its Kafka keys may sit
// in two partitions, each counted apart; send it through [Repartition].
// It returns k.
//
// On a source whose partitions move between processes (source.Kafka, a
// consumer group), a stateful stage keeps its state per partition, and a
// key whose records arrived through several partitions would be counted in
// part by several processes: Run refuses a stateful stage keyed by
// [KeyBy] there, with [ErrKeyNotPartitioned], unless the key is declared
// with FollowsPartitioning or comes from [Repartition]. On other sources
// it changes nothing.
func (k *Keyed[K, T]) FollowsPartitioning() *Keyed[K, T] {
	k.follows = true
	return k
}

// ErrNotPerPartition is returned by [Stream.Run] for a pipeline on a source
// whose partitions move between processes ([Assignable]) with a stateful
// stage fed by a [Window]'s results: they belong to no source partition,
// so that stage's state could not be saved with a partition and would be
// lost when the partitions move. Write the results to a topic and
// aggregate them in a pipeline that reads it. Run returns it too for a
// pipeline with a [Table] on such a source: a table is read whole by the
// process that joins with it, so its state belongs to no partition either.
var ErrNotPerPartition = errors.New("stream: a stateful stage's state cannot be kept per source partition")

// ErrKeyNotPartitioned is returned by [Stream.Run] for a pipeline on a
// source whose partitions move between processes (an [Assignable] source:
// source.Kafka) with a stateful stage keyed by a function not known to
// follow the source's partitioning. Records of one key could then arrive
// through several partitions, and so several processes, each of which would
// count part of them. Fix it with [Repartition] (the records go through a
// topic partitioned by the new key, as in Kafka Streams), or, when the key
// is the one the source is partitioned by, with [Keyed.FollowsPartitioning].
var ErrKeyNotPartitioned = errors.New("stream: a stateful stage's key does not follow the partitioning of its source")

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
// Add returns acc with v added; it must be deterministic. Merge returns
// the accumulator of two session windows that one record joined; only
// [Session] windows need it. The functions are called under the stage's
// lock, one at a time.
//
// The accumulator Add returns is also what goes downstream ([KV].Value,
// [WindowResult].Value), as is: with a value type (a number, a struct of
// values) that is a copy, but an A that holds a map, a slice or a pointer
// is shared with the stage, so Add must then return a new one rather than
// change acc in place, or the stages after it (on other goroutines with
// Parallel) see it change under them.
//
// Accumulators and keys are saved with encoding/gob (see the package
// doc's "State"): Run refuses, with [ErrUnsavableState], a type gob would
// not save whole (an unexported field, a func, a chan).
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
//
// On a source whose partitions move between processes ([Assignable]) the
// store must be a [checkpoint.ChangelogStore], and Run asks for one even
// without Checkpointing: the group commits positions at its rebalances
// anyway, and the next owner would start there without the state.
var ErrNoStateStore = errors.New("stream: a stateful stage needs a store for its state among the pipeline's checkpoint stores")

// ErrStateMismatch is returned by [Stream.Run] when a stage's saved state
// was written by another kind of stage, another window definition (a
// tumbling window of 1 minute restored as one of 5) or other key or
// accumulator types: reading it would give wrong results. Restore the old
// definition, or start afresh: a new checkpoint store (or the state and
// positions removed from it) replays the input into the new definition. A
// stage renamed ([Name]) finds no state and starts empty at the saved
// positions, which gives partial first windows; a [Table] that finds no
// state while a position of its input is saved is refused with
// ErrStateMismatch too, since it would miss every key written before.
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
// [DropLate], [EmitUpdates]), for the windowed joins ([JoinWindow]) those
// of event time and lateness they share with Window and their own
// ([JoinTimes], [LateLeftTo], [LateRightTo]), for [ToTable] [Tombstone].
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
	idle           int64 // ms; 0: partitions are never idle
	lateness       int64 // ms
	lateSink       any   // Sink[T]
	dropLate       bool
	emitUpdates    bool
	windowOnly     string // the first Window-only option given, for Aggregate's check
	// The windowed joins' (joinwindow.go).
	joinTimeL, joinTimeR any    // func(L) time.Time, func(R) time.Time (JoinTimes)
	lateLeft, lateRight  any    // Sink[L], Sink[R] (LateLeftTo, LateRightTo)
	joinOnly             string // the first join-only option given, for the others' check
	// ToTable's (table.go).
	tombstone any      // func(V) bool
	tableOnly string   // the first ToTable-only option given, for the others' check
	timeOpts  []string // EventTime and ProcessingTime as given: Window refuses two
	lateOpts  []string // LateTo and DropLate as given: Window refuses two
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
func registerState[K comparable, T any](k *Keyed[K, T], op, name string) {
	s := k.s
	if !k.follows {
		s.p.unpartitioned = append(s.p.unpartitioned, name)
	}
	if s.unkeyedBy != "" {
		s.p.afterWindow = append(s.p.afterWindow, name+"\x00"+s.unkeyedBy)
	}
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
	// restore loads the stage's state from its snapshot.
	restore(data []byte) error
	// types are the key and accumulator types the state holds.
	types() (key, acc reflect.Type)
	// lock and unlock the stage's state: a stage holds its lock while it
	// pushes downstream, so the stages of one pipeline are locked
	// upstream first.
	lock()
	unlock()
	// changedLocked reports whether the state changed since the last
	// snapshot; snapshotLocked encodes it. The stage's lock is held.
	changedLocked() bool
	snapshotLocked() (data []byte, err error)

	// Per partition (an Assignable source; partstate.go), all but
	// restorer with the stage's lock held:
	// changesLocked appends to dst the changes since the last save of
	// the tables of the partitions only accepts (nil: all of them).
	changesLocked(dst []checkpoint.Change, only func(partKey) bool) ([]checkpoint.Change, error)
	// restorer returns what rebuilds partition pk's table from the
	// changes saved of it (partstate.go); called without the lock.
	restorer(pk partKey) partRestorer
	// dropPartLocked forgets partition pk's table and marks.
	dropPartLocked(pk partKey)
	// assignPartLocked tells the stage that partition pk is the
	// pipeline's (it holds a Window's watermark until it delivers).
	assignPartLocked(pk partKey)
	// owed returns how many results the stage emitted that have not yet
	// finished every stage after it (a Window's; 0 for the others), for
	// ExactlyOnce's drain. The stage's lock is not held.
	owed() int
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
	// listed: a source listed the partition (PartitionLister): while it
	// has no event time, it holds Window's watermark back.
	listed bool
	// active is the clock (ms) when the partition last delivered a record
	// to the stage, or was listed: Window's Idleness.
	active int64
	// idle: Window counts the partition idle (silent for the Idleness
	// and caught up with its source). recheck is the clock (ms) before
	// which its source is not asked again (math.MaxInt64: not until it
	// delivers).
	idle    bool
	recheck int64
	pk      partKey
}

// seen reports whether anything of the partition reached the stage.
func (ps *partState) seen() bool {
	return ps.next > 0 || ps.restored > 0 || ps.maxTs != math.MinInt64
}

// stateCore is what every stateful stage keeps besides its state proper:
// the marks per partition that tell a replayed record.
type stateCore struct {
	rt   *runtime
	name string
	ctr  *stageCounters

	parts    map[partKey]*partState
	list     []*partState // parts' values, to walk without a map iteration
	lastKey  partKey
	lastPart *partState

	// partitioned: the state is kept per source partition (an
	// Assignable source; partstate.go).
	partitioned bool

	offs  []int64
	dirty atomic.Bool // changed since the last snapshot
	// checked holds the partitions refuseEmptyStart looked at.
	checked map[partKey]bool
	// busy is set while the state is being changed: a panic in a user
	// function leaves it set, and a state half changed is never saved.
	busy bool
	// failed is set once a push of the stage failed before it handed its
	// results on (failPush): it may have marked records as read (check)
	// whose effect is not in the state (a late record that stops Run, one
	// without an event time), and a state saved with those marks would
	// make the restart take them for records it holds and drop them
	// unseen. The run stops; the last checkpoint stands. (A push that
	// fails handing its results on leaves the state whole: its results
	// are pending in it, emitted again after a restart.)
	failed bool
}

// whole returns why the state must not be saved, or nil: a panic left it
// half changed (busy), or a push failed (failed).
func (c *stateCore) whole() error {
	switch {
	case c.busy:
		return errors.New("the state was left half changed by a panic")
	case c.failed:
		return errors.New("a push of the stage failed, so records it marked as read may not be in the state: the last checkpoint stands")
	}
	return nil
}

// failPush marks the state as failed (whole) when a push fails with err
// before it hands its results on: a push abandoned for a halt
// (errAbandoned: a consumer group's revocation) is not a failure. The
// stage's lock is held.
func (c *stateCore) failPush(err error) {
	if err != nil && !errors.Is(err, errAbandoned) {
		c.failed = true
	}
}

func (c *stateCore) init(rt *runtime, name string, ctr *stageCounters) {
	c.rt, c.name, c.ctr = rt, name, ctr
	c.parts = make(map[partKey]*partState)
	c.partitioned = rt.partitioned
}

// part returns the state of e's partition.
func (c *stateCore) part(topic string, partition int32) *partState {
	if c.lastPart != nil && c.lastKey.partition == partition && c.lastKey.topic == topic {
		return c.lastPart
	}
	k := partKey{topic, partition}
	ps := c.parts[k]
	if ps == nil {
		ps = &partState{maxTs: math.MinInt64, pk: k}
		c.parts[k] = ps
		c.list = append(c.list, ps)
	}
	c.lastKey, c.lastPart = k, ps
	return ps
}

// refuseEmptyStart refuses a stage that must not start empty (a table, a
// windowed join) and found no snapshot to restore while a position of
// topic/partition is saved: it would start empty there, and a table would
// miss every key written below, for good, a join every pair with a record
// below. (A Window only gets partial first windows.) It happens when the
// pipeline's stateful stages changed (their names, joined, name the saved
// state) or the stage was renamed. Each partition is looked at once, at
// its first record; what is the stage's kind, for the error.
func (c *stateCore) refuseEmptyStart(ctx context.Context, what, topic string, partition int32) error {
	rt := c.rt
	pk := partKey{topic, partition}
	if len(rt.p.stores) == 0 || topic == "" || c.checked[pk] {
		return nil
	}
	if c.checked == nil {
		c.checked = make(map[partKey]bool)
	}
	c.checked[pk] = true
	for _, store := range rt.p.stores {
		pos, found, err := store.Load(ctx, topic, partition)
		if err != nil {
			return fmt.Errorf("stream: %s %q: load the position of %s/%d: %w", what, c.name, topic, partition, err)
		}
		if found && pos.Offset > 0 {
			return fmt.Errorf("%w: %s %q found no saved state under %q, but the position of %s/%d is saved (%d): "+
				"it would start empty there and miss every record before it. The state of a pipeline is saved under its stateful "+
				"stages' names joined by \".\", so adding, removing or renaming one looks for another; restore the old stages, or start "+
				"from a store without positions for its topics",
				ErrStateMismatch, what, c.name, rt.stateName, topic, partition, pos.Offset)
		}
	}
	return nil
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
		if !ps.seen() {
			continue // listed by a source, never read: it must wait again after a restore
		}
		next := max(ps.next, ps.restored)
		out = append(out, partFile{Topic: k.topic, Partition: k.partition, Next: next, MaxTs: ps.maxTs})
	}
	return out
}

func (c *stateCore) restoreParts(pf []partFile) {
	for _, p := range pf {
		ps := &partState{restored: p.Next, next: p.Next, maxTs: p.MaxTs, pk: partKey{p.Topic, p.Partition}}
		c.parts[partKey{p.Topic, p.Partition}] = ps
		c.list = append(c.list, ps)
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
	Types   string // the key and accumulator types, as "key string, accumulator int64"
}

// typeNames describes the key and accumulator types of a stage.
func typeNames[K comparable, A any]() string {
	return fmt.Sprintf("key %s, accumulator %s", reflect.TypeFor[K](), reflect.TypeFor[A]())
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
	if h.Kind != want.Kind || h.Spec != want.Spec || h.Types != want.Types {
		return fmt.Errorf("stream: state of stage %q: %w: saved by %s %s (%s), the stage is %s %s (%s)",
			name, ErrStateMismatch, h.Kind, h.Spec, h.Types, want.Kind, want.Spec, want.Types)
	}
	if err := dec.Decode(body); err != nil {
		// The store checked the bytes (a FileStore's CRC): what does not
		// decode was written for other types.
		return fmt.Errorf("stream: state of stage %q: %w: cannot decode it as %s: %w", name, ErrStateMismatch, want.Types, err)
	}
	return nil
}

// restoreState finds the state stores and restores every stateful stage
// from the first one, before any record is read.
func (rt *runtime) restoreState(ctx context.Context) error {
	if len(rt.stateful) == 0 {
		return nil
	}
	for _, s := range rt.p.stores {
		if ss, ok := s.(checkpoint.StateStore); ok {
			rt.stateStores = append(rt.stateStores, ss)
		}
		if cl, ok := s.(checkpoint.ChangelogStore); ok && rt.changelog == nil {
			rt.changelog = cl
		}
	}
	if rt.partitioned {
		for _, st := range rt.stateful {
			if j, ok := st.(interface{ copartitionError() error }); ok {
				return j.copartitionError()
			}
		}
	}
	if rt.partitioned && len(rt.p.tables) > 0 {
		return fmt.Errorf("%w: table %q is read whole by every process that joins with it (a global table), so its state belongs to no partition of the consumer group "+
			"the pipeline reads, and it could not move with them: tables are not supported on a source whose partitions move between processes; "+
			"run the join on log topics (source.Topic, source.Partition), relaying a Kafka topic into the log first (examples/relay) if it lives in Kafka", ErrNotPerPartition, rt.p.tables[0])
	}
	if rt.partitioned && len(rt.p.afterWindow) > 0 {
		stage, window, _ := strings.Cut(rt.p.afterWindow[0], "\x00")
		return fmt.Errorf("%w: stage %q is fed by the results of window %q, which belong to no source partition: on a source whose partitions move between processes "+
			"its state could not follow them and would be lost at a rebalance; write the window's results to a topic and aggregate them in a pipeline reading it",
			ErrNotPerPartition, stage, window)
	}
	if rt.partitioned && len(rt.p.unpartitioned) > 0 {
		return fmt.Errorf("%w: stage %q reads a source whose partitions move between processes (a consumer group) and keys records with stream.KeyBy, "+
			"whose key strom cannot tell follows the source's partitioning: records of one key could reach several processes, each counting part of them. "+
			"Send the records through a topic partitioned by the key first (stream.Repartition), or, if the key is the one the source is partitioned by "+
			"(the Kafka record key), declare it: stream.KeyBy(s, key).FollowsPartitioning()", ErrKeyNotPartitioned, rt.p.unpartitioned[0])
	}
	if rt.partitioned && rt.changelog == nil {
		// Per partition, the state is restored when a partition is
		// assigned (Assigned), from a changelog. Without one, the group
		// still commits positions at its rebalances (source.Kafka does),
		// and the next owner would start there with empty windows: a
		// count too low, silently. So even without Checkpointing.
		return fmt.Errorf("%w: stage %q reads a source whose partitions move between processes (a consumer group), and its state must move with them: "+
			"checkpoint to a checkpoint.ChangelogStore (a source.Kafka source is one: Checkpointing(src))", ErrNoStateStore, rt.stateful[0].stateName())
	}
	if rt.partitioned {
		// A changelog that cannot be named for a stage (a group or stage
		// name its topic name would break) fails now, not at the first
		// assignment, where it would look like a source failure to retry.
		if n, ok := rt.changelog.(interface{ ChangelogTopic(string) (string, error) }); ok {
			for _, st := range rt.stateful {
				if _, err := n.ChangelogTopic(st.stateName()); err != nil {
					return fmt.Errorf("stream: stage %q: %w", st.stateName(), err)
				}
			}
		}
	}
	if len(rt.p.stores) == 0 {
		return nil // nothing is saved: state lives in memory for this run
	}
	if !rt.partitioned && len(rt.stateStores) == 0 {
		return fmt.Errorf("%w (stage %q)", ErrNoStateStore, rt.stateful[0].stateName())
	}
	for _, st := range rt.stateful {
		k, a := st.types()
		for _, t := range []reflect.Type{k, a} {
			if err := checkSavable(t, map[reflect.Type]bool{}); err != nil {
				return fmt.Errorf("stream: stage %q: %w: %s %w", st.stateName(), ErrUnsavableState, t, err)
			}
		}
	}
	if rt.partitioned {
		return nil
	}
	names := make([]string, len(rt.stateful))
	for i, st := range rt.stateful {
		names[len(names)-1-i] = st.stateName() // upstream first
	}
	rt.stateName = strings.Join(names, ".")
	data, found, err := rt.stateStores[0].LoadState(ctx, rt.stateName)
	if err != nil {
		return fmt.Errorf("stream: load the state %q: %w", rt.stateName, err)
	}
	if !found {
		return nil
	}
	var f pipelineState
	if err := gob.NewDecoder(bytes.NewReader(data)).Decode(&f); err != nil {
		return fmt.Errorf("stream: state %q: %w: not a state snapshot strom wrote: %w", rt.stateName, checkpoint.ErrCorrupt, err)
	}
	for _, st := range rt.stateful {
		for _, sn := range f.Stages {
			if sn.Name == st.stateName() {
				if err := st.restore(sn.Data); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ErrUnsavableState is returned by [Stream.Run] for a pipeline with
// checkpoint stores whose stateful stage has a key or accumulator type
// that encoding/gob would not save whole: a struct with an unexported
// field (gob drops it silently: after a restart it would be zero), a
// func or a chan. Export the field, or give the type a GobEncode and
// GobDecode (or MarshalBinary and UnmarshalBinary) of its own.
var ErrUnsavableState = errors.New("stream: the state of a stateful stage cannot be saved whole")

// checkSavable reports what of t encoding/gob would not save: an
// unexported struct field, a func or a chan, searched through structs,
// pointers, arrays, slices and maps. A type that encodes itself (gob's
// GobEncoder, encoding.BinaryMarshaler) is trusted; interfaces cannot be
// checked (their values must be gob.Register'ed).
func checkSavable(t reflect.Type, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	if t.Implements(gobEncoder) || reflect.PointerTo(t).Implements(gobEncoder) ||
		t.Implements(binaryMarshaler) || reflect.PointerTo(t).Implements(binaryMarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer:
		return fmt.Errorf("is or holds a %s", t.Kind())
	case reflect.Pointer, reflect.Array, reflect.Slice:
		return checkSavable(t.Elem(), seen)
	case reflect.Map:
		if err := checkSavable(t.Key(), seen); err != nil {
			return err
		}
		return checkSavable(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				return fmt.Errorf("has the unexported field %s.%s, which gob would not save (it would be zero after a restart)", t, f.Name)
			}
			if err := checkSavable(f.Type, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

var (
	gobEncoder      = reflect.TypeFor[gob.GobEncoder]()
	binaryMarshaler = reflect.TypeFor[encoding.BinaryMarshaler]()
)

// pipelineState is what a pipeline saves of its stateful stages: one
// snapshot each, upstream first, all taken at one cut and saved in one
// piece, under the stages' names joined by ".".
type pipelineState struct {
	Stages []stateSnap
}

// saveState saves the snapshot of every stateful stage that changed to
// every state store. Called by save, under saveMu, after it read the
// positions to save and before it saves them: every record below those
// positions had finished, so its effect on the state was in, before the
// snapshot was taken.
func (rt *runtime) saveState(ctx context.Context) error {
	rt.stateMu.Lock()
	defer rt.stateMu.Unlock()
	if rt.partitioned {
		return rt.saveChanges(ctx)
	}
	// One cut across every stateful stage: all of them locked at once,
	// upstream first as pushes lock them (rt.stateful is in wiring order,
	// downstream first), so that no record or result is between two of
	// them. Saved one after another while records flow, an Aggregate
	// saved ahead of a stage after it would, after a crash, hand that
	// stage its current value for a replayed record instead of the one
	// the record made; a Window saved ahead of the stage after it would
	// lose a result the stage had absorbed after its own save.
	rt.lockingState.Store(true) // a join's input waiting to align gives up (joinStage.align)
	for i := len(rt.stateful) - 1; i >= 0; i-- {
		rt.stateful[i].lock()
	}
	rt.lockingState.Store(false)
	changed := false
	for _, st := range rt.stateful {
		changed = changed || st.changedLocked()
	}
	var data []byte
	var err error
	if changed {
		f := pipelineState{Stages: make([]stateSnap, 0, len(rt.stateful))}
		for i := len(rt.stateful) - 1; i >= 0; i-- { // upstream first
			st := rt.stateful[i]
			sd, serr := st.snapshotLocked()
			if serr != nil {
				err = fmt.Errorf("stream: snapshot of stage %q: %w", st.stateName(), serr)
				break
			}
			f.Stages = append(f.Stages, stateSnap{st.stateName(), sd})
		}
		if err == nil {
			var buf bytes.Buffer
			err = gob.NewEncoder(&buf).Encode(&f)
			data = buf.Bytes()
		}
	}
	for _, st := range rt.stateful {
		st.unlock()
	}
	if err != nil || !changed {
		return err
	}
	// One piece: saved one file per stage, a crash between two saves
	// would restore them from two cuts.
	for _, ss := range rt.stateStores {
		if err := ss.SaveState(ctx, rt.stateName, data); err != nil {
			return fmt.Errorf("stream: save the state %q (%d bytes): %w", rt.stateName, len(data), err)
		}
	}
	rt.stateBytes.Store(int64(len(data)))
	return nil
}

// stateSnap is a stage's snapshot.
type stateSnap struct {
	Name string
	Data []byte
}

// saveChanges saves, per partition, the changes of every stateful stage
// since the last save to the changelog store: one cut across the stages,
// as saveState's.
func (rt *runtime) saveChanges(ctx context.Context) error {
	if rt.changelog == nil {
		return nil
	}
	rt.lockStates()
	var err error
	changes := rt.changes[:0]
	for i := len(rt.stateful) - 1; i >= 0 && err == nil; i-- { // upstream first
		changes, err = rt.stateful[i].changesLocked(changes, nil)
		if err != nil {
			err = fmt.Errorf("stream: changes of stage %q: %w", rt.stateful[i].stateName(), err)
		}
	}
	rt.unlockStates()
	if err != nil || len(changes) == 0 {
		return err
	}
	n := 0
	for _, c := range changes {
		n += len(c.Key) + len(c.Value)
	}
	if err := rt.changelog.SaveChanges(ctx, changes); err != nil {
		return fmt.Errorf("stream: save %d state changes (%d bytes): %w", len(changes), n, err)
	}
	rt.stateBytes.Store(int64(n))
	clear(changes)
	rt.changes = changes[:0]
	return nil
}
