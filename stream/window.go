package stream

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// Windows says how [Window] assigns records to windows: [Tumbling],
// [Sliding] or [Session]. The zero Windows is invalid (Window panics).
type Windows struct {
	kind  windowKind
	size  int64 // ms: tumbling and sliding
	slide int64 // ms: sliding
	gap   int64 // ms: session
}

type windowKind uint8

const (
	kindNone windowKind = iota
	kindTumbling
	kindSliding
	kindSession
)

// Tumbling returns windows of size that do not overlap: a record with
// event time t is in [t - t mod size, that + size), aligned on the Unix
// epoch (a 1-minute window starts on the minute). It panics if size is
// under 1ms.
func Tumbling(size time.Duration) Windows {
	mustDuration("Tumbling", "size", size)
	return Windows{kind: kindTumbling, size: size.Milliseconds()}
}

// Sliding returns windows of size that start every slide (Kafka Streams'
// hopping windows, Flink's sliding ones): a record is in size/slide of
// them when slide divides size, and in one of floor or ceiling of that
// otherwise. Aligned on the Unix epoch. It panics if size or slide
// is under 1ms or slide is above size.
func Sliding(size, slide time.Duration) Windows {
	mustDuration("Sliding", "size", size)
	mustDuration("Sliding", "slide", slide)
	if slide > size {
		panic(fmt.Sprintf("stream: Sliding with a slide (%s) above the size (%s): records between windows would be in none", slide, size))
	}
	return Windows{kind: kindSliding, size: size.Milliseconds(), slide: slide.Milliseconds()}
}

// Session returns session windows of a key: a record starts a session
// [t, t+gap) and a record less than gap after the last one of a session
// extends it, so a session ends after gap without records; a record that
// bridges two sessions merges them (with the Aggregator's Merge, which
// Window then requires). It panics if gap is under 1ms.
func Session(gap time.Duration) Windows {
	mustDuration("Session", "gap", gap)
	return Windows{kind: kindSession, gap: gap.Milliseconds()}
}

func mustDuration(op, what string, d time.Duration) {
	if d < time.Millisecond {
		panic(fmt.Sprintf("stream: %s with a %s of %s: windows are counted in milliseconds, at least 1ms", op, what, d))
	}
}

// String describes w, as in "tumbling 1m0s", "sliding 1m0s every 10s",
// "session gap 30s". It is saved with a window's state, and a restore
// under another definition fails with [ErrStateMismatch].
func (w Windows) String() string {
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	switch w.kind {
	case kindTumbling:
		return "tumbling " + ms(w.size).String()
	case kindSliding:
		return "sliding " + ms(w.size).String() + " every " + ms(w.slide).String()
	case kindSession:
		return "session gap " + ms(w.gap).String()
	}
	return "invalid windows"
}

// WindowResult is what [Window] emits for a key's window.
type WindowResult[K comparable, A any] struct {
	Key   K
	Start time.Time // the window's first instant, UTC
	End   time.Time // one past its last: the window is [Start, End)
	Value A         // the accumulator
	// Final is true for the result emitted when the watermark passed End
	// (or the input ended), and for the updates of a window that was
	// already final, made by records within the allowed lateness (or by a
	// later run over more records, after an end of input): such a result
	// replaces the earlier one of the same Key, Start and End. It is false
	// for an early result ([EmitUpdates]).
	Final bool
}

// TopicPartition names a partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// PartitionLister is implemented by sources that read several partitions
// and know, once they have opened them, which they will deliver records of
// (source.Topic). An event-time [Window] holds its watermark back until an
// event time of each of them has reached it (or it is idle, [Idleness]),
// so that the first batch of one partition does not make the unread
// records of the others late. PendingPartitions returns nil until the
// source knows, then the partitions (possibly none); it is called from the
// pipeline's goroutines and must be safe for concurrent use with Read.
type PartitionLister interface {
	PendingPartitions() []TopicPartition
}

// CaughtUpReporter is implemented by sources that know whether they have
// delivered a partition up to its high watermark (source.Partition and
// source.Topic). [Idleness] counts a silent partition idle only when its
// source reports it caught up, so that a slow or blocked partition with
// records still to read keeps holding the watermark back, and its records
// are not made late.
//
// CaughtUp reports whether the partition has no record below its high
// watermark at or above next, the lowest offset of the partition the
// pipeline has not finished (every record below it has been handled, or
// filtered out, before the asking stage); next is -1 when the pipeline has
// finished none of it, and then CaughtUp is true only if the source has
// returned no record of the partition and has none to read. ok is false
// for a partition the source does not read or cannot tell about yet. It is
// called from the pipeline's goroutines and must be safe for concurrent
// use with Read.
type CaughtUpReporter interface {
	CaughtUp(topic string, partition int32, next int64) (caughtUp, ok bool)
}

// ErrNoEventTime is the error of a record that reaches an event-time
// [Window] without an event time: under the default event time, a record
// whose Timestamp is 0 (a source that sets none, such as lines of a file).
// Give the window [EventTime] to read the time from the value.
var ErrNoEventTime = errors.New("stream: record without an event time")

// ErrLateRecord is the error of a late record under [Window]'s default
// policy: a record whose every window has closed (End + allowed lateness at
// or below the watermark); and under a windowed join's ([JoinWindow]), a
// record more than the allowed lateness behind the watermark. The
// *RecordError Run returns wraps it and names the record. Route late
// records with [LateTo], drop them counted with [DropLate], or make fewer
// records late with [OutOfOrderness] and [AllowedLateness].
var ErrLateRecord = errors.New("stream: late record")

// EventTime makes [Window] read each record's event time with fn instead
// of the default, the record's Timestamp ([Element].Timestamp, as the
// source set it). fn must be deterministic: a record delivered again
// after a restart must land in the same windows. It panics if fn is nil;
// Window panics if T is not its values' type.
func EventTime[T any](fn func(T) time.Time) StateOption {
	mustFunc("EventTime", fn == nil)
	return stateOptionFunc(func(c *stateConfig) {
		c.eventTime, c.processingTime = fn, false
		c.timeOpts = append(c.timeOpts, "EventTime")
		c.windowOnly = "EventTime"
	})
}

// ProcessingTime makes [Window] use processing time: a record's time is
// the pipeline's [Clock] when the stage receives it, and the watermark is
// the clock itself, so windows close when the clock passes their end,
// records or not (on a timer goroutine). A record's time is never below
// the greatest reading so far: a wall clock that steps back (an NTP
// correction, a VM migration) holds processing time where it was until
// the clock catches up, and makes no record late. Results depend on when
// records arrive: a replay after a restart does not give the same
// windows.
func ProcessingTime() StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.processingTime, c.eventTime = true, nil
		c.timeOpts = append(c.timeOpts, "ProcessingTime")
		c.windowOnly = "ProcessingTime"
	})
}

// OutOfOrderness sets the bounded out-of-orderness of [Window]'s (and a
// windowed join's, [JoinWindow]) event time (default 0): the watermark of a
// partition is its greatest event time so far minus d, so records up to d
// behind the newest of their partition are on time. It is Flink's
// WatermarkStrategy.forBoundedOutOfOrderness. d < 0 is 0.
func OutOfOrderness(d time.Duration) StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.outOfOrder = max(d, 0).Milliseconds()
		c.windowOnly = "OutOfOrderness"
	})
}

// Idleness makes a partition that has delivered no record to [Window] (or a
// windowed join, [JoinWindow], where an input that has delivered nothing
// since Run began is idle after d too) for d (on the pipeline's [Clock])
// stop holding the watermark back until it delivers again (Flink's
// WatermarkStrategy.withIdleness): without it, a partition of a followed
// topic that receives nothing, or whose records are all filtered out before
// the window, stops every window from firing. A timer on the pipeline's
// clock checks for idleness, so the windows the quiet partition held back
// fire d after it went quiet, whether or not another record arrives. A
// partition whose source reports records still to read ([CaughtUpReporter]:
// a slow or blocked partition with lag) is not idle however long it is
// silent. Such a source is asked every d or every second, whichever is
// less, while the partition is silent, so an idle partition that has
// records to read again holds the watermark back again; the records it
// receives while idle and the others move the watermark on may be late, as
// may those of a source that cannot tell. When every partition is idle the
// watermark advances to the greatest of their event times (less
// [OutOfOrderness]), the result of their going idle one after another with
// the one furthest ahead last, so partitions that go quiet together (a
// backlog appended at once) fire every window any of them has passed; it
// never moves back, and a partition that delivers again holds it from then
// on. Idleness applies to a pipeline that reads its partitions together
// (the embedded log, files); on a consumer-group source each partition has
// a watermark of its own and waits for no other. d <= 0 turns it off (the
// default).
func Idleness(d time.Duration) StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.idle = max(d, 0).Milliseconds()
		c.windowOnly = "Idleness"
	})
}

// AllowedLateness keeps a [Window]'s windows d past the watermark passing
// their end (default 0): a record that arrives for one in that time
// updates it and its result is emitted again (Final). Past End + d the
// window is dropped and its records are late. A windowed join
// ([JoinWindow]) holds each record d longer, and takes records up to d
// behind its watermark. d < 0 is 0.
func AllowedLateness(d time.Duration) StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.lateness = max(d, 0).Milliseconds()
		c.windowOnly = "AllowedLateness"
	})
}

// LateTo sends [Window]'s late records to sink, the side output of late
// data: one Write per batch of late records, in order; a late record is
// finished once the Write returned nil, and a failed Write stops Run with
// a [*RecordError]. Late records are counted in [StageStats].Late. It
// panics if sink is nil; Window panics if T is not its values' type.
func LateTo[T any](sink Sink[T]) StateOption {
	if sink == nil {
		panic("stream: LateTo called with a nil sink")
	}
	return stateOptionFunc(func(c *stateConfig) {
		c.lateSink, c.dropLate = sink, false
		c.lateOpts = append(c.lateOpts, "LateTo")
		c.windowOnly = "LateTo"
	})
}

// DropLate drops [Window]'s late records (or a windowed join's, of both
// inputs: [JoinWindow]), counted in [StageStats].Late and Skipped, instead
// of stopping Run with [ErrLateRecord].
func DropLate() StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.dropLate, c.lateSink = true, nil
		c.lateOpts = append(c.lateOpts, "DropLate")
		c.windowOnly = "DropLate"
	})
}

// EmitUpdates makes [Window] also emit a window's result after every
// record that changed it, before it is final (Final false): Kafka Streams'
// default of emitting every update, as opposed to emitting on the
// watermark only (Window's default, Kafka Streams' suppress(untilWindowCloses)).
// A [Session] window that a record merges into another is not retracted:
// its early results stand, and the merged window's results follow.
func EmitUpdates() StateOption {
	return stateOptionFunc(func(c *stateConfig) {
		c.emitUpdates = true
		c.windowOnly = "EmitUpdates"
	})
}

// Window aggregates the values of each key of k per window of event time,
// with agg, and emits each window's result once the watermark passes its
// end: the windows of Flink and Kafka Streams.
//
// Event time is the record's Timestamp by default ([EventTime] to read it
// from the value, [ProcessingTime] for the clock). The watermark is, per
// source partition, the greatest event time seen minus the
// [OutOfOrderness], and the stage's watermark is the least of those of
// the partitions it has seen, never going back. A partition the source
// lists ([PartitionLister]) counts from the start: until one of its event
// times arrives it holds the watermark back, so following a topic with a
// partition that receives nothing fires no window without [Idleness]. A window [Start, End)
// fires when the watermark reaches End, and is dropped [AllowedLateness]
// later. Windows that fire together come out in the order of their ends,
// across keys (ties in the order they were opened), so a Window after
// this one, whose event time is a result's last instant, finds none of
// them late. A record whose every window was dropped is late: by default Run
// stops with a *RecordError wrapping [ErrLateRecord]; [LateTo] sends late
// records to a sink, [DropLate] counts and drops them. No late record is
// dropped unseen.
//
// When the input ends (every source returned io.EOF), every window still
// open is emitted, Final, without waiting for the watermark. It stays in
// the state until the watermark passes it: a later run over more records
// goes on with it and emits it once more when the watermark passes it,
// if those records changed it (not after each record). A cancelled Run
// emits nothing early.
//
// The open windows, the watermark and the results emitted but not yet
// finished downstream are the stage's state, saved with what the stage
// has read of each partition (see the package doc's "State"): a saved
// position never passes a record whose effect on the saved state is
// missing, and after a restart every window has the records of an
// uninterrupted run, although records and results are delivered again.
// Which records are late is decided against the watermark, and with
// several partitions the watermark depends on how their batches
// interleave, which a restart may change: records within the
// OutOfOrderness are never late and give the same windows every time;
// records later than that may be late in one run and not in another, as
// in Flink.
//
// A record with no event time (Timestamp 0, from a source that sets none,
// under the default event time) stops Run with [ErrNoEventTime].
//
// The records of a partition must reach the stage in offset order: Window
// panics if a stage before it may reorder them (Parallel, KeyOrdered,
// Batch, Via), if w is the zero Windows, if agg.Add is nil, if w is a
// [Session] and agg.Merge is nil, or if an option's type parameter is not
// T. opts: the options above and [Name] (default "window", also the name
// the state is saved under).
func Window[K comparable, T, A any](k *Keyed[K, T], w Windows, agg Aggregator[T, A], opts ...StateOption) *Stream[WindowResult[K, A]] {
	if k == nil {
		panic("stream: Window called with a nil Keyed")
	}
	if w.kind == kindNone {
		panic("stream: Window called with the zero Windows: use Tumbling, Sliding or Session")
	}
	mustFunc("Window (agg.Add)", agg.Add == nil)
	if w.kind == kindSession && agg.Merge == nil {
		panic("stream: Window over Session windows needs agg.Merge, to merge the sessions a record joins")
	}
	cfg := newStateConfig(StageWindow, opts)
	if cfg.joinOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to the windowed joins (JoinWindow), not to Window", cfg.joinOnly))
	}
	if len(cfg.timeOpts) > 1 {
		panic(fmt.Sprintf("stream: Window given %s: give one of EventTime and ProcessingTime, once", strings.Join(cfg.timeOpts, " and ")))
	}
	if len(cfg.lateOpts) > 1 {
		panic(fmt.Sprintf("stream: Window given %s: give one of LateTo and DropLate, once", strings.Join(cfg.lateOpts, " and ")))
	}
	if cfg.tableOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to ToTable, not to Window", cfg.tableOnly))
	}
	var evTime func(T) time.Time
	if cfg.eventTime != nil {
		fn, ok := cfg.eventTime.(func(T) time.Time)
		if !ok {
			panic(fmt.Sprintf("stream: EventTime's function is a %T, the window's values need a func(%T) time.Time", cfg.eventTime, *new(T)))
		}
		evTime = fn
	}
	var lateSink Sink[T]
	if cfg.lateSink != nil {
		s, ok := cfg.lateSink.(Sink[T])
		if !ok {
			panic(fmt.Sprintf("stream: LateTo's sink is a %T, the window's values need a stream.Sink[%T]", cfg.lateSink, *new(T)))
		}
		lateSink = s
		k.s.p.noteSink(fmt.Sprintf("late sink of window %q (LateTo)", cfg.name), s)
	}
	registerState(k, StageWindow, cfg.name)
	ctr := k.s.p.counters(cfg.name)
	ctr.eventTime = !cfg.processingTime
	// The sources upstream of the window, taken now: a JoinWindow or
	// Merge downstream merges this pipeline with another, whose sources'
	// partitions never reach this window (listed as its own, they held
	// its watermark back to the end of the input).
	srcs := slices.Clone(k.s.p.sources)
	return unkeyed(cfg.name, chainTimed(k.s, ctr, 1, func(rt *runtime, down outlet[WindowResult[K, A]]) outlet[T] {
		st := &windowStage[K, T, A]{spec: w, cfg: cfg, key: k.key, agg: agg, evTime: evTime, lateSink: lateSink,
			down: down, kc: newCodec[K](), ac: newCodec[A](),
			wake: make(chan struct{}, 1), quit: make(chan struct{})}
		st.pend = &pendingResults[WindowResult[K, A]]{m: make(map[int64]pendingResult[WindowResult[K, A]]), dirty: &st.core.dirty, wake: rt.settleWake}
		st.core.init(rt, cfg.name, ctr)
		st.idleness = idleness{idleMs: cfg.idle, rt: rt}
		st.one = st.newTable(partKey{})
		st.tables = map[partKey]*winTable[K, A]{{}: st.one}
		st.tb = st.one
		if !cfg.processingTime {
			for _, src := range srcs {
				if rt.p.feedsTable(src) {
					continue // its records feed a Table, never this window
				}
				if l, ok := src.(PartitionLister); ok {
					st.listers = append(st.listers, l)
				}
			}
		}
		rt.stateful = append(rt.stateful, st)
		if cfg.processingTime {
			rt.async = true
			rt.spawn(st.tick)
		}
		if cfg.idle > 0 && !cfg.processingTime && !st.core.partitioned {
			for _, src := range srcs {
				if rt.p.feedsTable(src) {
					continue
				}
				if u, ok := src.(CaughtUpReporter); ok {
					st.ups = append(st.ups, u)
				}
			}
			rt.spawn(st.idleTick) // finishes no record: rt.async stays as it is
		}
		return st
	}))
}

// win is one open window of a key.
type win[A any] struct {
	start, end int64 // ms, [start, end)
	acc        A
	fired      bool // its final result was emitted
	sent       bool // its value as it is was emitted Final at an end of the input
	dropTimer  bool // a timer is set for its end plus the allowed lateness
}

// winTimer says that key has a window due at at (its end, or its end plus
// the allowed lateness once fired). Timers are not removed when a session
// merges away: a due timer looks at the key's windows as they are.
type winTimer[K comparable] struct {
	at  int64
	seq uint64 // insertion order: ties fire in the order they were set
	key K
}

// timerHeap is a min-heap of timers by (at, seq), typed so that a push or
// pop does not box a timer into an interface (container/heap's did, two
// allocations per window).
type timerHeap[K comparable] []winTimer[K]

func (h timerHeap[K]) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}

func (h *timerHeap[K]) push(t winTimer[K]) {
	*h = append(*h, t)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *timerHeap[K]) pop() winTimer[K] {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	var zero winTimer[K]
	q[n] = zero // let the key be collected
	q = q[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r := l + 1; r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// pendingResult is a result emitted and not yet finished downstream.
type pendingResult[R any] struct {
	res   R
	count int     // completions still to come
	part  partKey // the table that emitted it (per partition)
}

// pendingResults is the owner of the results a stateful stage emits (a
// window's, a windowed join's): a result is kept, and saved with the
// state, until it has finished every stage after the stage, so that a
// crash before then emits it again.
type pendingResults[R any] struct {
	mu    sync.Mutex
	m     map[int64]pendingResult[R] // by value: no allocation per result
	dirty *atomic.Bool
	wake  chan struct{} // the runtime's settleWake: signalled when m empties
}

// wakeIfEmptyLocked tells ExactlyOnce's drain that no result is owed.
func (p *pendingResults[R]) wakeIfEmptyLocked() {
	if len(p.m) == 0 && p.wake != nil {
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
}

func (p *pendingResults[R]) Done(offsets ...int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, o := range offsets {
		if r, ok := p.m[o]; ok {
			if r.count--; r.count <= 0 {
				delete(p.m, o)
			} else {
				p.m[o] = r
			}
		}
	}
	p.dirty.Store(true)
	p.wakeIfEmptyLocked()
}

func (p *pendingResults[R]) Split(offset int64, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.m[offset]; ok {
		if r.count += n - 1; r.count <= 0 {
			delete(p.m, offset)
			p.dirty.Store(true)
			p.wakeIfEmptyLocked()
		} else {
			p.m[offset] = r
		}
	}
}

// windowStage is Window.
type windowStage[K comparable, T, A any] struct {
	spec     Windows
	cfg      *stateConfig
	key      func(T) K
	agg      Aggregator[T, A]
	evTime   func(T) time.Time // nil: Element.Timestamp
	lateSink Sink[T]
	down     outlet[WindowResult[K, A]]

	mu   sync.Mutex // guards what follows and serialises pushes downstream
	core stateCore
	// tables holds the open windows per source partition when the
	// pipeline's source is Assignable (core.partitioned), each with its
	// own watermark, as Kafka Streams keeps stream time per task; and
	// otherwise one table, one, whose watermark is the least of every
	// partition's (see partstate.go). tb is the table being worked on.
	tables map[partKey]*winTable[K, A]
	one    *winTable[K, A]
	tb     *winTable[K, A]
	kc     codec[K]
	ac     codec[A]
	tseq   uint64
	seq    int64                               // the Offset of the next result: its id in pend
	redo   []pendingResult[WindowResult[K, A]] // to emit again, from the table of its part
	out    []Element[WindowResult[K, A]]
	late   []Element[T]
	lateAt int64 // the time the first of late was judged by, ms
	lateWm int64 // and the watermark it was judged against
	lateV  []T
	fin    []member

	pend *pendingResults[WindowResult[K, A]]

	// listers are the sources that list their partitions and have not yet
	// (PartitionLister).
	listers []PartitionLister
	idleness
	// idleDue is the clock (ms) idleTick waits for, math.MaxInt64 when
	// it waits for a record.
	idleDue int64

	free      []*win[A]   // dropped windows, for reuse
	freeLists [][]*win[A] // the emptied lists of windows of keys dropped, for reuse

	wake chan struct{} // processing time: a timer earlier than the one waited for
	quit chan struct{}

	wmv wmView // the watermarks, for Observe (observe_wm.go)
}

// winTable is the open windows of one table and their watermark.
type winTable[K comparable, A any] struct {
	pk     partKey
	keys   map[K][]*win[A]
	timers timerHeap[K]
	wm     int64 // the watermark, ms; math.MinInt64 before any record
	minTs  int64 // the least of the partitions' greatest event times
	// Per partition only: the keys whose windows changed since the last
	// save, and whether anything did.
	dirtyKeys[K]
}

func (st *windowStage[K, T, A]) newTable(pk partKey) *winTable[K, A] {
	tb := &winTable[K, A]{pk: pk, keys: make(map[K][]*win[A]), wm: math.MinInt64, minTs: math.MinInt64}
	if st.core.partitioned {
		tb.dirty = make(map[K]struct{})
	}
	return tb
}

// table returns the table of a record of topic-partition.
func (st *windowStage[K, T, A]) table(topic string, partition int32) *winTable[K, A] {
	if !st.core.partitioned || topic == "" {
		return st.one
	}
	if st.tb != nil && st.tb.pk.partition == partition && st.tb.pk.topic == topic {
		return st.tb
	}
	pk := partKey{topic, partition}
	tb := st.tables[pk]
	if tb == nil {
		tb = st.newTable(pk)
		st.tables[pk] = tb
	}
	return tb
}

// touch notes that k's windows changed, for the next save per partition.
func (st *windowStage[K, T, A]) touch(k K) {
	st.tb.touch(k)
}

func (st *windowStage[K, T, A]) stateName() string { return st.core.name }

// owed returns how many results are still owed downstream.
func (st *windowStage[K, T, A]) owed() int {
	st.pend.mu.Lock()
	defer st.pend.mu.Unlock()
	return len(st.pend.m)
}

func (st *windowStage[K, T, A]) push(ctx context.Context, elems []Element[T]) (err error) {
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
	st.out, st.late, st.fin = st.out[:0], st.late[:0], st.fin[:0]
	st.redoLocked()
	if st.cfg.idle > 0 {
		st.now = c.rt.clock.Now().UnixMilli()
	}
	if len(st.listers) > 0 {
		st.watchParts()
	}
	for i := range elems {
		e := &elems[i]
		ps := c.part(e.Topic, e.Partition)
		ps.active, ps.idle, ps.recheck = st.now, false, 0
		st.tb = st.table(e.Topic, e.Partition)
		replay, err := c.check(ps, e.Topic, e.Partition, e.Offset)
		if err != nil {
			return err
		}
		if replay {
			if e.owner != nil {
				st.fin = append(st.fin, member{e.owner, e.Offset})
			}
			continue
		}
		c.busy = true // until the record's effect is whole
		var t int64
		switch {
		case st.cfg.processingTime:
			// Never below the last reading, the watermark: a wall clock
			// that steps back (NTP, a VM migration) would put the record
			// in a window that has closed, and make it late.
			t = max(c.rt.clock.Now().UnixMilli(), st.tb.wm)
			st.tb.wm = t
		case st.evTime != nil:
			t = st.evTime(e.Value).UnixMilli()
		default:
			if t = e.Timestamp; t == 0 {
				return recordError(c.name, e, fmt.Errorf("%w: the record's Timestamp is 0 (its source sets none, as lines of a file or a slice): read the event time from the value with stream.EventTime", ErrNoEventTime))
			}
		}
		if !st.absorb(st.key(e.Value), e.Value, t) {
			c.busy = false
			if len(st.late) == 0 {
				st.lateAt, st.lateWm = t, st.tb.wm
			}
			st.late = append(st.late, *e)
			continue
		}
		if e.owner != nil {
			// Finished: its effect is in the state, which the next
			// checkpoint saves before the positions it read.
			st.fin = append(st.fin, member{e.owner, e.Offset})
		}
		if !st.cfg.processingTime {
			st.advance(ps, t)
		}
		c.busy = false
	}
	c.dirty.Store(true)
	if len(st.late) > 0 {
		if err := st.lateLocked(ctx); err != nil {
			return err
		}
	}
	if len(st.fin) > 0 {
		c.offs = finishMembers(st.fin, c.offs)
		c.rt.noteFinished(len(st.fin))
		clear(st.fin)
	}
	if st.cfg.idle > 0 && st.idleDue == math.MaxInt64 {
		// idleTick waits for a record: now it has one to time.
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
	c.ctr.left.Add(int64(len(elems)))
	if st.wmv.want.Load() {
		st.wmv.publishLocked(st.fillWatermarks)
	}
	absorbing = false
	return st.flushLocked(ctx)
}

// watchParts asks the sources that list their partitions (the first time
// they can tell) which partitions they will deliver, and marks them: a
// listed partition holds the watermark until an event time of it reaches
// the stage (or it is idle, with Idleness). Without that, the first batch
// of one partition would carry the watermark past the records of the
// others, still unread, and make them late.
func (st *windowStage[K, T, A]) watchParts() {
	c := &st.core
	for i := 0; i < len(st.listers); {
		tps := st.listers[i].PendingPartitions()
		if tps == nil {
			i++
			continue
		}
		for _, tp := range tps {
			ps := c.part(tp.Topic, tp.Partition)
			ps.listed, ps.active = true, st.now
		}
		st.listers = append(st.listers[:i], st.listers[i+1:]...)
	}
}

// idleness is what an event-time stage ([Window], the windowed joins)
// keeps for [Idleness]: when a silent partition stops holding the
// watermark back. The stage's lock guards it.
type idleness struct {
	idleMs int64 // the Idleness, ms; 0: off
	rt     *runtime
	now    int64 // the clock in ms, read once per push when Idleness is set
	// ups are the sources that tell whether a partition is caught up
	// (CaughtUpReporter); pts is scratch for the pipeline's trackers.
	ups []CaughtUpReporter
	pts []*checkpoint.PartitionTracker
}

// idle reports whether ps is idle: it has delivered nothing for the
// Idleness and its source has no record of it left to read. The source
// is asked again every idlePoll while the partition is silent, so an idle
// partition that has records to read again (appended, not yet read) holds
// the watermark back again; without a source that can tell, a silent
// partition is idle until it delivers.
func (st *idleness) idle(ps *partState) bool {
	if st.idleMs <= 0 || st.now-ps.active < st.idleMs {
		return false
	}
	if st.now < ps.recheck {
		return ps.idle
	}
	ps.idle = st.caughtUp(ps)
	if len(st.ups) == 0 {
		ps.recheck = math.MaxInt64 // until it delivers (push resets it)
	} else {
		ps.recheck = st.now + st.idlePoll()
	}
	return ps.idle
}

// idlePoll is how long (ms) a silent partition with records left to read
// waits before its source is asked again: the Idleness, at most a second.
func (st *idleness) idlePoll() int64 { return min(st.idleMs, 1000) }

// caughtUp asks the sources that can tell (CaughtUpReporter) whether ps's
// partition has records left to read, given what of it the pipeline has
// finished (its tracker's position: every record below it went through
// this stage or was filtered out before). Without such a source, silence
// alone decides, as before sources could tell.
func (st *idleness) caughtUp(ps *partState) bool {
	if len(st.ups) == 0 || ps.pk.topic == "" {
		return true
	}
	next := int64(-1)
	st.pts = st.rt.tracker.Partitions(st.pts[:0])
	for _, pt := range st.pts {
		if pt.ID() == ps.pk.partition && pt.Topic() == ps.pk.topic {
			if pos, ok := pt.Position(); ok {
				next = pos.Offset
			}
			break
		}
	}
	clear(st.pts)
	for _, u := range st.ups {
		if c, ok := u.CaughtUp(ps.pk.topic, ps.pk.partition, next); ok {
			return c
		}
	}
	return true
}

// idleTick is the timer goroutine of Idleness under event time: when a
// partition may have become idle it raises the watermark, so that the
// windows a quiet partition held back fire without waiting for a record
// of another.
func (st *windowStage[K, T, A]) idleTick() error {
	rt := st.core.rt
	for {
		st.mu.Lock()
		now := rt.clock.Now().UnixMilli()
		due := int64(math.MaxInt64)
		for _, ps := range st.core.list {
			switch {
			case now-ps.active < st.cfg.idle:
				due = min(due, ps.active+st.cfg.idle)
			case ps.recheck != math.MaxInt64: // silent: its source is asked at recheck
				due = min(due, max(ps.recheck, now))
			}
		}
		st.idleDue = due
		st.mu.Unlock()
		var fired <-chan time.Time
		var t Timer
		if due != math.MaxInt64 {
			t = timerAt(rt.clock, now, due)
			fired = t.C()
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case <-fired:
		case <-st.wake:
			stop()
			continue
		case <-st.quit:
			stop()
			return nil
		case <-rt.stop:
			stop()
			return nil
		}
		if rt.eos != nil {
			// As tick: never while a transaction drains and commits.
			rt.txnGate.RLock()
		}
		st.mu.Lock()
		st.out = st.out[:0]
		st.redoLocked()
		st.now = rt.clock.Now().UnixMilli()
		if len(st.listers) > 0 {
			st.watchParts()
		}
		for _, ps := range st.core.list {
			st.idle(ps) // marks the idle ones, sets when to ask again (raise may stop early)
		}
		st.tb = st.one
		st.core.busy = true
		st.raise()
		st.core.busy = false
		if st.wmv.want.Load() {
			st.wmv.publishLocked(st.fillWatermarks)
		}
		if len(st.out) > 0 {
			st.core.dirty.Store(true)
		}
		err := st.flushLocked(rt.stageCtx)
		st.mu.Unlock()
		if rt.eos != nil {
			rt.txnGate.RUnlock()
		}
		if err != nil {
			return err
		}
	}
}

// absorb adds v, of event time t, to the windows of key k, and emits what
// that changes. It returns false when the record is late.
func (st *windowStage[K, T, A]) absorb(k K, v T, t int64) bool {
	L := st.cfg.lateness
	st.touch(k)
	switch st.spec.kind {
	case kindSession:
		ws := st.tb.keys[k]
		ns, ne := t, t+st.spec.gap
		var m *win[A]
		n := 0
		for _, w := range ws {
			if w.start < ne && ns < w.end { // overlaps [t, t+gap)
				if m == nil {
					m = w
				} else {
					m.acc = st.agg.Merge(m.acc, w.acc)
					m.start, m.end = min(m.start, w.start), max(m.end, w.end)
					m.fired = m.fired || w.fired
					m.sent = false
					st.freeWin(w)
					continue // merged away
				}
			}
			ws[n] = w
			n++
		}
		clear(ws[n:])
		ws = ws[:n]
		if m == nil {
			if ne+L <= st.tb.wm {
				return false
			}
			m = st.newWin(ns, ne)
			if ws == nil {
				ws = st.newList()
			}
			ws = append(ws, m)
			st.setTimer(ne, k)
		} else {
			oldEnd := m.end
			m.start, m.end = min(m.start, ns), max(m.end, ne)
			if m.end != oldEnd {
				st.setTimer(st.due(m), k)
			}
		}
		m.acc = st.agg.Add(m.acc, v)
		m.sent = false
		st.tb.keys[k] = ws
		st.changed(k, m)
		return true
	default:
		size, slide := st.spec.size, st.spec.slide
		if st.spec.kind == kindTumbling {
			slide = size
		}
		ws := st.tb.keys[k]
		grew := false
		any := false
		for s := floorDiv(t, slide) * slide; s > t-size; s -= slide {
			e := s + size
			var w *win[A]
			for _, x := range ws {
				if x.start == s {
					w = x
					break
				}
			}
			if w == nil {
				if e+L <= st.tb.wm {
					continue // closed: late for this window
				}
				w = st.newWin(s, e)
				if ws == nil {
					ws = st.newList()
				}
				ws = append(ws, w)
				grew = true
				st.setTimer(e, k)
			}
			w.acc = st.agg.Add(w.acc, v)
			w.sent = false
			any = true
			st.changed(k, w)
		}
		if grew {
			st.tb.keys[k] = ws
		}
		return any
	}
}

// newWin returns an open window [start, end) with a new accumulator,
// reusing one dropped earlier.
func (st *windowStage[K, T, A]) newWin(start, end int64) *win[A] {
	var w *win[A]
	if n := len(st.free); n > 0 {
		w = st.free[n-1]
		st.free[n-1] = nil
		st.free = st.free[:n-1]
	} else {
		w = new(win[A])
	}
	*w = win[A]{start: start, end: end, acc: st.agg.init()}
	return w
}

// freeWin keeps a dropped window for reuse, without its accumulator.
func (st *windowStage[K, T, A]) freeWin(w *win[A]) {
	*w = win[A]{}
	if len(st.free) < maxFreeWindows {
		st.free = append(st.free, w)
	}
}

// newList returns an empty list for a key's windows, reusing one.
func (st *windowStage[K, T, A]) newList() []*win[A] {
	if n := len(st.freeLists); n > 0 {
		ws := st.freeLists[n-1]
		st.freeLists[n-1] = nil
		st.freeLists = st.freeLists[:n-1]
		return ws
	}
	return make([]*win[A], 0, 2)
}

// due is when w's timer is due: its end, or its end plus the allowed
// lateness once it fired.
func (st *windowStage[K, T, A]) due(w *win[A]) int64 {
	if w.fired {
		return w.end + st.cfg.lateness
	}
	return w.end
}

// changed emits w's result after a record changed it when that is asked
// for: an early result, or the update of a window already final.
func (st *windowStage[K, T, A]) changed(k K, w *win[A]) {
	if w.fired {
		st.emit(k, w, true)
	} else if st.cfg.emitUpdates {
		st.emit(k, w, false)
	}
}

func (st *windowStage[K, T, A]) setTimer(at int64, k K) {
	st.tseq++
	first := len(st.tb.timers) == 0 || at < st.tb.timers[0].at
	st.tb.timers.push(winTimer[K]{at: at, seq: st.tseq, key: k})
	if first && st.cfg.processingTime {
		select {
		case st.wake <- struct{}{}:
		default:
		}
	}
}

// advance raises the watermark with a record of event time t of the
// partition ps, and fires the windows it passes.
func (st *windowStage[K, T, A]) advance(ps *partState, t int64) {
	if t <= ps.maxTs {
		return
	}
	old := ps.maxTs
	ps.maxTs = t
	if st.cfg.idle == 0 && old != math.MinInt64 && old != st.tb.minTs {
		return // another partition holds the least (or a listed one holds it back)
	}
	// A partition's first event time (the least may fall, or a listed
	// partition stops holding it back), or the partition that held the
	// least moved (it may rise); with Idleness, any record may make
	// another partition idle.
	st.raise()
}

// raise sets the watermark from the least of the partitions' greatest
// event times, if that is above it, and fires the windows it passes.
func (st *windowStage[K, T, A]) raise() {
	m := int64(math.MaxInt64)
	parts := st.core.list
	if st.core.partitioned && st.tb.pk.topic != "" {
		ps := st.core.parts[st.tb.pk]
		if ps == nil {
			return
		}
		parts = []*partState{ps} // does not escape: no allocation
	}
	idleMax := int64(math.MinInt64) // the greatest event time of the idle partitions
	for _, p := range parts {
		switch {
		case st.idle(p):
			// Delivers nothing: does not hold the watermark.
			idleMax = max(idleMax, p.maxTs)
		case p.maxTs != math.MinInt64:
			m = min(m, p.maxTs)
		case p.listed:
			st.tb.minTs = math.MinInt64 // listed, no event time yet: holds it back
			return
		}
	}
	if m == math.MaxInt64 {
		if idleMax == math.MinInt64 {
			return // no event time yet
		}
		// Every partition is idle: the watermark goes to the greatest of
		// their event times, as if the one furthest ahead had gone quiet
		// last, so that partitions that go quiet together (a backlog
		// appended at once) fire what they would one after another.
		// Keeping it where it was made that depend on which went quiet
		// a moment sooner. It never falls: wm only rises below.
		m = idleMax
	}
	st.tb.minTs = m
	if w := st.tb.minTs - st.cfg.outOfOrder; w > st.tb.wm {
		st.tb.wm = w
		st.fire()
	}
}

// fire emits the windows whose end the watermark reached and drops those
// past their allowed lateness. Each timer fires only the windows of its
// key that end by its own time, not by the watermark, so that when the
// watermark jumps past several windows of several keys they come out in
// the order of their ends across keys (ties in the order their timers
// were set: the order the windows were opened). Firing every window of a
// key at its first timer emitted a key's later windows before another
// key's earlier ones, and a Window after this one (or any stage that
// reads a result's end as its event time) then found those late.
func (st *windowStage[K, T, A]) fire() {
	for len(st.tb.timers) > 0 && st.tb.timers[0].at <= st.tb.wm {
		t := st.tb.timers.pop()
		st.fireKey(t.key, t.at)
	}
}

// fireKey fires the windows of k that end by upTo, the time of the timer
// that is due, and drops those past their allowed lateness at the
// watermark. A window not fired always has a timer at its end (set when
// it opened or its end moved), so a window that ends after upTo but by
// the watermark fires at its own timer, in the same pass of fire.
func (st *windowStage[K, T, A]) fireKey(k K, upTo int64) {
	ws, ok := st.tb.keys[k]
	if !ok {
		return
	}
	st.touch(k)
	L := st.cfg.lateness
	n := 0
	for _, w := range ws {
		if !w.fired && w.end <= upTo {
			if !w.sent { // not already emitted as it is, at an end of the input
				st.emit(k, w, true)
			}
			w.fired = true
		}
		if w.fired && w.end+L <= st.tb.wm {
			st.freeWin(w)
			continue
		}
		if w.fired && !w.dropTimer && w.end <= st.tb.wm {
			// Kept for the allowed lateness: drop it when that ends.
			st.setTimer(w.end+L, k)
			w.dropTimer = true
		}
		ws[n] = w
		n++
	}
	clear(ws[n:])
	if n == 0 {
		delete(st.tb.keys, k)
		if cap(ws) <= 4 && len(st.freeLists) < maxFreeWindows {
			st.freeLists = append(st.freeLists, ws[:0])
		}
	} else {
		st.tb.keys[k] = ws[:n]
	}
}

// maxFreeWindows bounds the dropped windows (and lists of a key's windows)
// kept for reuse: a window per key per window length is dropped and made
// again in the steady state, and reusing them saved two of the five
// allocations per window in internal/bench's BenchmarkWindow.
const maxFreeWindows = 4096

// emitAtEnd emits, at the end of the input, the windows of k that end by
// upTo and were not emitted as they are. They stay open: the watermark
// has not passed them, and a later run over more records goes on with
// them (and emits them again when they change).
func (st *windowStage[K, T, A]) emitAtEnd(k K, upTo int64) {
	st.touch(k)
	for _, w := range st.tb.keys[k] {
		if !w.fired && !w.sent && w.end <= upTo {
			st.emit(k, w, true)
			w.sent = true
		}
	}
}

// emit queues w's result for downstream and keeps it pending until it
// finishes there.
func (st *windowStage[K, T, A]) emit(k K, w *win[A], final bool) {
	st.emitResult(WindowResult[K, A]{Key: k, Start: time.UnixMilli(w.start).UTC(), End: time.UnixMilli(w.end).UTC(), Value: w.acc, Final: final})
}

func (st *windowStage[K, T, A]) emitResult(r WindowResult[K, A]) {
	id := st.seq
	st.seq++
	st.pend.mu.Lock()
	st.pend.m[id] = pendingResult[WindowResult[K, A]]{res: r, count: 1, part: st.tb.pk}
	st.pend.mu.Unlock()
	// The result's event time is the window's last instant, as Flink
	// stamps it, so a window after this one works on it by default.
	st.out = append(st.out, Element[WindowResult[K, A]]{Value: r, Offset: id, Epoch: checkpoint.NoEpoch,
		Timestamp: r.End.UnixMilli() - 1, owner: st.pend})
}

// redoLocked emits again the results that were pending in the restored
// state, before anything else.
func (st *windowStage[K, T, A]) redoLocked() {
	if len(st.redo) == 0 {
		return
	}
	tb := st.tb
	for _, r := range st.redo {
		st.tb = st.tables[r.part]
		if st.tb == nil {
			st.tb = st.one // its partition was dropped meanwhile: it is still owed downstream
		}
		st.emitResult(r.res)
	}
	st.tb = tb
	clear(st.redo)
	st.redo = st.redo[:0]
}

// lateLocked hands the late records of a push to the late policy.
func (st *windowStage[K, T, A]) lateLocked(ctx context.Context) error {
	c := &st.core
	c.ctr.late.Add(int64(len(st.late)))
	switch {
	case st.lateSink != nil:
		st.lateV = st.lateV[:0]
		for i := range st.late {
			st.lateV = append(st.lateV, st.late[i].Value)
		}
		err := st.lateSink.Write(ctx, st.lateV)
		clear(st.lateV)
		if err != nil {
			return recordError(c.name+" (late records)", &st.late[0], err)
		}
	case st.cfg.dropLate:
		c.ctr.skipped.Add(int64(len(st.late)))
	default:
		what := "event time"
		if st.cfg.processingTime {
			what = "processing time"
		}
		return recordError(c.name, &st.late[0], fmt.Errorf("%w: %s %s is in %s windows that closed at watermark %s (out-of-orderness %s, allowed lateness %s); route late records with stream.LateTo or drop them with stream.DropLate",
			ErrLateRecord, what, fmtMillis(st.lateAt), st.spec, fmtMillis(st.lateWm),
			time.Duration(st.cfg.outOfOrder)*time.Millisecond, time.Duration(st.cfg.lateness)*time.Millisecond))
	}
	for i := range st.late {
		if o := st.late[i].owner; o != nil {
			st.fin = append(st.fin, member{o, st.late[i].Offset})
		}
	}
	clear(st.late)
	return nil
}

func fmtMillis(ms int64) string {
	if ms == math.MinInt64 {
		return "(none yet)"
	}
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// flushLocked hands the queued results downstream.
func (st *windowStage[K, T, A]) flushLocked(ctx context.Context) error {
	if len(st.out) == 0 {
		return nil
	}
	st.core.ctr.out.Add(int64(len(st.out)))
	err := st.down.push(ctx, st.out)
	clear(st.out)
	st.out = st.out[:0]
	return err
}

func (st *windowStage[K, T, A]) close(ctx context.Context) error {
	rt := st.core.rt
	st.mu.Lock()
	st.out = st.out[:0]
	st.redoLocked()
	if rt.parent.Err() == nil && !rt.stopped() {
		// The end of the input: every open window is as complete as it
		// will be in this run. Emit them, in the order of their ends,
		// and keep them until the watermark passes them. Every window
		// not fired has a timer at its end; each timer fires only the
		// windows of its key that end by its time. (Firing all of a
		// key's windows at its first timer emitted a key's later windows
		// before other keys' earlier ones, and a Window after this one,
		// whose event time is a result's end, then found those late.)
		st.core.busy = true
		for _, tb := range st.sortedTables() {
			st.tb = tb
			order := append(timerHeap[K](nil), tb.timers...)
			for len(order) > 0 {
				t := order.pop()
				st.emitAtEnd(t.key, t.at)
			}
			for k := range tb.keys { // none is left unsent: a guard against losing one
				st.emitAtEnd(k, math.MaxInt64)
			}
		}
		st.core.busy = false
		st.core.dirty.Store(true)
	}
	err := st.flushLocked(ctx)
	st.mu.Unlock()
	close(st.quit)
	if err != nil {
		return err
	}
	return st.down.close(ctx)
}

// tick is the timer goroutine of processing time: it fires windows when
// the clock passes their end.
func (st *windowStage[K, T, A]) tick() error {
	rt := st.core.rt
	for {
		st.mu.Lock()
		now := rt.clock.Now().UnixMilli()
		due := now + time.Hour.Milliseconds()
		for _, tb := range st.tables {
			if len(tb.timers) > 0 {
				due = min(due, tb.timers[0].at)
			}
		}
		st.mu.Unlock()
		t := timerAt(rt.clock, now, due)
		select {
		case <-t.C():
		case <-st.wake:
			t.Stop()
			continue
		case <-st.quit:
			t.Stop()
			return nil
		case <-rt.stop:
			t.Stop()
			return nil
		}
		if rt.eos != nil {
			// Windows fire between two transactions' ends, never while
			// one drains and commits (runtime.saveTxn).
			rt.txnGate.RLock()
		}
		st.mu.Lock()
		st.out = st.out[:0]
		st.redoLocked()
		now = rt.clock.Now().UnixMilli()
		for _, tb := range st.sortedTables() {
			if now > tb.wm {
				st.tb = tb
				tb.wm = now
				st.core.busy = true
				st.fire()
				st.core.busy = false
				st.core.dirty.Store(true)
			}
		}
		err := st.flushLocked(rt.stageCtx)
		st.mu.Unlock()
		if rt.eos != nil {
			rt.txnGate.RUnlock()
		}
		if err != nil {
			return err
		}
	}
}

// timerAt arms a timer on clock for the instant due (ms), read against
// now (ms), the clock's reading when due was chosen. A timer is relative:
// had the clock moved between that reading and the arming (a fake clock
// advanced by a test, a wall clock stepped), the timer would wait the move
// again, and a window due in the move would not fire until the clock
// moved once more (a test that advanced once hung for 10 minutes under
// load). So it reads the clock again after arming and re-arms against
// that reading until the two agree to the ms; a real clock crosses a ms
// boundary there seldom, so this loops about once.
func timerAt(clock Clock, now, due int64) Timer {
	for {
		t := clock.NewTimer(time.Duration(max(due-now, 0)) * time.Millisecond)
		after := clock.Now().UnixMilli()
		if after == now {
			return t
		}
		t.Stop()
		now = after
	}
}

// sortedTables returns the tables in the order of their partitions, so
// that what they emit together comes out in the same order every time.
func (st *windowStage[K, T, A]) sortedTables() []*winTable[K, A] {
	if len(st.tables) == 1 {
		return []*winTable[K, A]{st.one}
	}
	tbs := make([]*winTable[K, A], 0, len(st.tables))
	for _, tb := range st.tables {
		tbs = append(tbs, tb)
	}
	slices.SortFunc(tbs, func(a, b *winTable[K, A]) int {
		if c := strings.Compare(a.pk.topic, b.pk.topic); c != 0 {
			return c
		}
		return int(a.pk.partition) - int(b.pk.partition)
	})
	return tbs
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// winFile is a Window's snapshot.
type winFile[K comparable, A any] struct {
	Parts     []partFile
	Watermark int64
	Seq       int64
	Windows   []winEntry[K, A]
	Pending   []WindowResult[K, A]
}

type winEntry[K comparable, A any] struct {
	Key        K
	Start, End int64
	Acc        A
	Fired      bool
	Sent       bool
}

func (st *windowStage[K, T, A]) header() stateHeader {
	spec := st.spec.String()
	if st.cfg.processingTime {
		spec += ", processing time"
	}
	return stateHeader{Version: stateVersion, Kind: StageWindow, Spec: spec, Types: typeNames[K, A]()}
}

func (st *windowStage[K, T, A]) types() (key, acc reflect.Type) {
	return reflect.TypeFor[K](), reflect.TypeFor[A]()
}

func (st *windowStage[K, T, A]) lock()   { st.mu.Lock() }
func (st *windowStage[K, T, A]) unlock() { st.mu.Unlock() }

func (st *windowStage[K, T, A]) changedLocked() bool { return st.core.dirty.Load() }

func (st *windowStage[K, T, A]) snapshotLocked() ([]byte, error) {
	c := &st.core
	if err := c.whole(); err != nil {
		return nil, err
	}
	c.dirty.Store(false)
	st.tb = st.one
	f := winFile[K, A]{Parts: c.partsFile(), Watermark: st.tb.wm, Seq: st.seq}
	for k, ws := range st.tb.keys {
		for _, w := range ws {
			f.Windows = append(f.Windows, winEntry[K, A]{Key: k, Start: w.start, End: w.end, Acc: w.acc, Fired: w.fired, Sent: w.sent})
		}
	}
	// In the order they were emitted, those still to emit again first: a
	// restore emits them in this order, and a Window after this one needs
	// a window's early results before its final one.
	for _, r := range st.redo {
		f.Pending = append(f.Pending, r.res)
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

func (st *windowStage[K, T, A]) restore(data []byte) error {
	var f winFile[K, A]
	if err := decodeState(st.core.name, data, st.header(), &f); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.tb = st.one
	st.core.restoreParts(f.Parts)
	st.tb.wm, st.seq = f.Watermark, f.Seq
	st.tb.minTs = math.MinInt64
	first := true
	for _, p := range st.core.list {
		if p.maxTs != math.MinInt64 && (first || p.maxTs < st.tb.minTs) {
			st.tb.minTs, first = p.maxTs, false
		}
	}
	for _, e := range f.Windows {
		w := &win[A]{start: e.Start, end: e.End, acc: e.Acc, fired: e.Fired, sent: e.Sent, dropTimer: e.Fired}
		st.tb.keys[e.Key] = append(st.tb.keys[e.Key], w)
		st.setTimer(st.due(w), e.Key)
	}
	for _, r := range f.Pending {
		st.redo = append(st.redo, pendingResult[WindowResult[K, A]]{res: r})
	}
	return nil
}

// Per partition (partstate.go): a key's change holds its open windows,
// each as varint start and end (ms), a flags byte (1: fired, 2: sent) and
// the accumulator's encoding after its uvarint length.

const (
	winFired byte = 1 << iota
	winSent
)

func (st *windowStage[K, T, A]) encodeWindows(ws []*win[A]) ([]byte, error) {
	b := binary.AppendUvarint(make([]byte, 0, 16*len(ws)+1), uint64(len(ws)))
	var acc []byte
	for _, w := range ws {
		b = binary.AppendVarint(b, w.start)
		b = binary.AppendVarint(b, w.end)
		var f byte
		if w.fired {
			f |= winFired
		}
		if w.sent {
			f |= winSent
		}
		b = append(b, f)
		var err error
		if acc, err = st.ac.append(acc[:0], w.acc); err != nil {
			return nil, err
		}
		b = binary.AppendUvarint(b, uint64(len(acc)))
		b = append(b, acc...)
	}
	return b, nil
}

func (st *windowStage[K, T, A]) decodeWindows(b []byte) ([]*win[A], error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, errors.New("bad window count")
	}
	b = b[k:]
	ws := make([]*win[A], 0, n)
	for range n {
		start, k1 := binary.Varint(b)
		if k1 <= 0 {
			return nil, errors.New("bad window start")
		}
		end, k2 := binary.Varint(b[k1:])
		if k2 <= 0 || len(b) < k1+k2+1 {
			return nil, errors.New("bad window end")
		}
		b = b[k1+k2:]
		f := b[0]
		l, k3 := binary.Uvarint(b[1:])
		if k3 <= 0 || uint64(len(b)-1-k3) < l {
			return nil, errors.New("bad accumulator length")
		}
		b = b[1+k3:]
		acc, err := st.ac.decode(b[:l])
		if err != nil {
			return nil, err
		}
		b = b[l:]
		ws = append(ws, &win[A]{start: start, end: end, acc: acc, fired: f&winFired != 0, sent: f&winSent != 0, dropTimer: f&winFired != 0})
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%d bytes after the windows", len(b))
	}
	return ws, nil
}

// pendingOf returns the results of partition pk still owed downstream, in
// the order they were emitted (those to emit again first).
func (st *windowStage[K, T, A]) pendingOf(pk partKey) []WindowResult[K, A] {
	var out []WindowResult[K, A]
	for _, r := range st.redo {
		if r.part == pk {
			out = append(out, r.res)
		}
	}
	st.pend.mu.Lock()
	ids := make([]int64, 0)
	for id, r := range st.pend.m {
		if r.part == pk {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		out = append(out, st.pend.m[id].res)
	}
	st.pend.mu.Unlock()
	return out
}

func (st *windowStage[K, T, A]) changesLocked(dst []checkpoint.Change, only func(partKey) bool) ([]checkpoint.Change, error) {
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
				if ws := tb.keys[k]; len(ws) > 0 {
					return st.encodeWindows(ws)
				}
				return nil, nil
			},
			func() (checkpoint.Change, error) {
				var extra []byte
				if pend := st.pendingOf(pk); len(pend) > 0 {
					var buf bytes.Buffer
					if err := gob.NewEncoder(&buf).Encode(pend); err != nil {
						return checkpoint.Change{}, err
					}
					extra = buf.Bytes()
				}
				return c.metaChange(pk, st.header(), tb.wm, extra)
			})
		if err != nil {
			return dst, err
		}
	}
	return dst, nil
}

func (st *windowStage[K, T, A]) restorer(pk partKey) partRestorer {
	tb := st.newTable(pk)
	return &winRestorer[K, T, A]{st: st, pk: pk, tb: tb, r: newTableRestore[K, []*win[A]](tb.keys)}
}

// winRestorer rebuilds a Window's table of one partition (see
// partRestorer).
type winRestorer[K comparable, T, A any] struct {
	st *windowStage[K, T, A]
	pk partKey
	tb *winTable[K, A]
	r  tableRestore[K, []*win[A]]
}

func (wr *winRestorer[K, T, A]) apply(key, value []byte) error {
	if isMeta(key) {
		wr.r.closed(value)
		return nil
	}
	st, c, pk := wr.st, &wr.st.core, wr.pk
	k, err := decodeKey(st.kc, key)
	if err != nil {
		return fmt.Errorf("stream: state of stage %q for %s/%d: %w: %w", c.name, pk.topic, pk.partition, checkpoint.ErrCorrupt, err)
	}
	if value == nil {
		wr.r.remove(k)
		return nil
	}
	ws, err := st.decodeWindows(value)
	if err != nil {
		return fmt.Errorf("stream: state of stage %q for %s/%d: %w: cannot decode the windows of %v: %w", c.name, pk.topic, pk.partition, ErrStateMismatch, k, err)
	}
	wr.r.set(k, ws)
	return nil
}

func (wr *winRestorer[K, T, A]) installLocked() (int64, error) {
	st, c, pk, tb := wr.st, &wr.st.core, wr.pk, wr.tb
	for _, k := range wr.r.rollback() {
		tb.touch(k)
	}
	st.dropPartLocked(pk)
	st.tables[pk] = tb
	next := int64(-1)
	if wr.r.meta != nil {
		m, err := c.restoreMeta(pk, wr.r.meta, st.header())
		if err != nil {
			return -1, err
		}
		next = m.Part.Next
		tb.wm, tb.minTs = m.Watermark, m.Part.MaxTs
		if len(m.Extra) > 0 {
			var pend []WindowResult[K, A]
			if err := gob.NewDecoder(bytes.NewReader(m.Extra)).Decode(&pend); err != nil {
				return -1, fmt.Errorf("stream: state of stage %q for %s/%d: %w: cannot decode its pending results: %w", c.name, pk.topic, pk.partition, ErrStateMismatch, err)
			}
			for _, r := range pend {
				st.redo = append(st.redo, pendingResult[WindowResult[K, A]]{res: r, part: pk})
			}
		}
	}
	prev := st.tb
	st.tb = tb
	for k, ws := range tb.keys {
		for _, w := range ws {
			st.setTimer(st.due(w), k)
		}
	}
	st.tb = prev
	if st.tb == nil || st.tb.pk == pk {
		st.tb = st.one
	}
	return next, nil
}

func (st *windowStage[K, T, A]) dropPartLocked(pk partKey) {
	if pk == (partKey{}) {
		return
	}
	delete(st.tables, pk)
	if st.tb != nil && st.tb.pk == pk {
		st.tb = st.one
	}
	st.redo = slices.DeleteFunc(st.redo, func(r pendingResult[WindowResult[K, A]]) bool { return r.part == pk })
	st.pend.mu.Lock()
	for id, r := range st.pend.m {
		if r.part == pk {
			delete(st.pend.m, id)
		}
	}
	st.pend.mu.Unlock()
	st.core.dropPart(pk)
}

func (st *windowStage[K, T, A]) assignPartLocked(pk partKey) {
	var now int64
	if st.cfg.idle > 0 {
		now = st.core.rt.clock.Now().UnixMilli()
	}
	st.core.assignPart(pk, now)
}

// unkeyed marks s as carrying the results of the Window named name, which
// belong to no source partition (see ErrNotPerPartition), and returns it.
func unkeyed[T any](name string, s *Stream[T]) *Stream[T] {
	s.unkeyedBy = name
	return s
}
