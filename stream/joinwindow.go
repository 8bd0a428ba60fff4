package stream

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// Stage names of the windowed stream-stream joins, in [StageStats], and the
// default of [Name] for them: the name their state is saved under.
const (
	StageJoinWindow      = "joinwindow"      // JoinWindow
	StageLeftJoinWindow  = "leftjoinwindow"  // LeftJoinWindow
	StageOuterJoinWindow = "outerjoinwindow" // OuterJoinWindow
)

// JoinTimes makes a windowed join ([JoinWindow], [LeftJoinWindow],
// [OuterJoinWindow]) read the event time of its left records with left and
// of its right records with right, instead of the default, each record's
// Timestamp ([Element].Timestamp, as its source set it). A nil function
// keeps its input's default; Go cannot infer the type of a nil, so name
// both types then: JoinTimes[Click, Impression](clickTime, nil). The
// functions must be deterministic: a record delivered again after a
// restart must have the same time. A function that returns the zero
// time.Time stops Run with [ErrNoEventTime]. It panics if both are nil;
// the join panics if L and R are not its inputs' types.
func JoinTimes[L, R any](left func(L) time.Time, right func(R) time.Time) StateOption {
	if left == nil && right == nil {
		panic("stream: JoinTimes called with two nil functions")
	}
	return stateOptionFunc(func(c *stateConfig) {
		c.joinTimeL, c.joinTimeR = left, right
		c.joinOnly, c.windowOnly = cmpOr(c.joinOnly, "JoinTimes"), "JoinTimes"
	})
}

// LateLeftTo sends a windowed join's late left records to sink, the side
// output of late data, and [LateRightTo] its late right records: one Write
// per batch of late records of the input, in order; a late record is
// finished once the Write returned nil, and a failed Write stops Run with a
// [*RecordError]. Late records are counted in [StageStats].Late. An input
// without a late sink follows the join's default: its late records stop
// Run with [ErrLateRecord]. Give either or both, or [DropLate] for both. It
// panics if sink is nil; the join panics if L is not its left input's type.
func LateLeftTo[L any](sink Sink[L]) StateOption {
	if sink == nil {
		panic("stream: LateLeftTo called with a nil sink")
	}
	return stateOptionFunc(func(c *stateConfig) {
		c.lateLeft = sink
		c.lateOpts = append(c.lateOpts, "LateLeftTo")
		c.joinOnly, c.windowOnly = cmpOr(c.joinOnly, "LateLeftTo"), "LateLeftTo"
	})
}

// LateRightTo is [LateLeftTo] for the right input's late records. It
// panics if sink is nil; the join panics if R is not its right input's
// type.
func LateRightTo[R any](sink Sink[R]) StateOption {
	if sink == nil {
		panic("stream: LateRightTo called with a nil sink")
	}
	return stateOptionFunc(func(c *stateConfig) {
		c.lateRight = sink
		c.lateOpts = append(c.lateOpts, "LateRightTo")
		c.joinOnly, c.windowOnly = cmpOr(c.joinOnly, "LateRightTo"), "LateRightTo"
	})
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// JoinWindow joins the records of left and right whose keys are equal and
// whose event times are at most within apart, |t_l - t_r| <= within, and
// emits fn(l, r) for every such pair: Kafka Streams' KStream-KStream join
// with JoinWindows.ofTimeDifferenceAndGrace(within, lateness), Flink's
// interval join between -within and +within. A pair is emitted as soon as
// the second of its two records arrives; a record that joins no record of
// the other input emits nothing. Each output's Timestamp is the later of
// the pair's event times.
//
//	within 2, event times in seconds, watermark: the least of both inputs' newest times
//	left:            (a:1) ············(b:3) ············(a:10) ···········(c:14) ···········|
//	right:           ·········(a:2) ············(b:9) ············(a:11) ···········(d:15) ··|
//	watermark:       ·········1 ·······2 ·······3 ·······9 ·······10 ······11 ······14 ······|
//	JoinWindow:      ·········[1,2] ······························[10,11] ···················|
//	LeftJoinWindow:  ·········[1,2] ·····················[3,∅] ···[10,11] ···················| [14,∅]
//	OuterJoinWindow: ·········[1,2] ·····················[3,∅] ···[10,11] ··········[∅,9] ···| [14,∅] [∅,15]
//
// (∅ is "no partner", | the end of both inputs. (b:3) found no b within 2
// of it: [3,∅] comes once the watermark has passed 3+2, when (a:10) moves
// it to 9, not before; (b:9) waits until the watermark passes 11, which
// (d:15) makes 14; [14,∅] and [∅,15] come at the end of the input, which
// emits every record still waiting.)
//
// Event time is each record's Timestamp unless [JoinTimes] reads it from
// the values. The watermark is Window's (see [Window]): per source
// partition, the greatest event time seen minus the [OutOfOrderness]; the
// join's watermark is the least over the partitions of both inputs, and
// never goes back. An input none of whose partitions has delivered an
// event time holds it back (as a partition listed by its source,
// [PartitionLister], does), unless it has ended or, with [Idleness], been
// silent that long; an input that has ended stops holding it back.
//
// A record is kept in the join's state, to meet the records of the other
// input that are still to come, until the watermark passes its event time
// plus within plus the [AllowedLateness] (default 0): no record of the
// other input that is not late can join it after that. So the state holds
// about (within + lateness + out-of-orderness) of records of each input,
// whatever the length of the stream. The two inputs are read by goroutines
// of their own, and on a replay one is often read faster (smaller records,
// a cheaper decode): the join aligns them, as Kafka Streams picks the
// record with the lowest timestamp of a task and Flink aligns its sources'
// watermarks. A push of an input more than that reach ahead of the other
// input's greatest event time waits (in chunks: a source batch may span
// seconds) while the other input still has records to read, as its
// sources tell ([CaughtUpReporter]: source.Topic and source.Partition), so
// the state holds about twice the reach of each input, not the lead of the
// faster reader. An input whose sources cannot tell is never waited for,
// nor an ended or idle one. A record whose event time is more
// than the allowed lateness behind the watermark, t + lateness <
// watermark, is late: records it would have joined may have been released
// (and, for the left and outer joins, emitted without a partner) already.
// (Kafka Streams drops a record only once its own window has closed, t +
// within + grace below its stream time, and joins one a little later than
// that with what is left; strom calls it late sooner, so that the results
// are always a nested loop's over the records that are not late.) By
// default Run stops with a [*RecordError] wrapping [ErrLateRecord];
// [LateLeftTo] and [LateRightTo] send late records to sinks, [DropLate]
// counts and drops them ([StageStats].Late). No late record is dropped
// unseen. Records within the OutOfOrderness of the newest of their
// partition are never late.
//
// When both inputs end (every source returned io.EOF), a left or outer
// join emits every record still waiting for a partner, without waiting for
// the watermark (they stay in the state until the watermark passes them,
// and a later run over more records may join them: the pair is emitted
// then too). A cancelled Run emits nothing early.
//
// The buffered records, the watermark and the results emitted but not yet
// finished downstream are the join's state, saved with the positions of
// both inputs as one snapshot with the pipeline's other stateful stages
// (see the package doc's "State"): a record is finished once it is in the
// state, a result is owned by the join until it has finished every stage
// after it, and after a crash the restored join skips the records
// delivered again that it holds already and emits again the results that
// had not finished. Results are at-least-once: after restarts, the
// results without duplicates equal an uninterrupted run's. Records are
// saved with encoding/gob: Run refuses a type gob would not save whole
// ([ErrUnsavableState]).
//
// left and right must be two pipelines (each built from its own [From],
// reading topics of its own: positions are kept per topic-partition),
// which the join merges into one, run by running the returned Stream (as
// [Merge] does). The records of each partition must reach the join in
// offset order: it panics, as [Window] does, if a stage before it may
// reorder them. On a source whose partitions move between processes
// (source.Kafka, a consumer group) Run refuses the join with
// [ErrNotCopartitioned]: its state is not yet kept per partition.
//
// opts: [JoinTimes], [OutOfOrderness], [AllowedLateness], [Idleness],
// [LateLeftTo], [LateRightTo], [DropLate] and [Name] (default
// "joinwindow"). It panics if left, right or fn is nil, if within is under
// 1ms, or if an option of Window or ToTable alone is given ([EventTime],
// [ProcessingTime], [LateTo], [EmitUpdates], [Tombstone]).
func JoinWindow[K comparable, L, R, U any](left *Keyed[K, L], right *Keyed[K, R], within time.Duration, fn func(l L, r R) U, opts ...StateOption) *Stream[U] {
	mustFunc("JoinWindow", fn == nil)
	return joinWindow(left, right, within, StageJoinWindow, "JoinWindow", joinInner,
		func(l L, _ bool, r R, _ bool) U { return fn(l, r) }, opts)
}

// LeftJoinWindow is [JoinWindow] that keeps every left record: it emits
// fn(l, r, true) for every pair, as soon as its second record arrives, and
// fn(l, zero R, false) for a left record that joined no right record, once
// the watermark has passed its event time plus within plus the allowed
// lateness (or both inputs ended): Kafka Streams' leftJoin since 3.1,
// which emits no early result without a partner. Right records without a
// partner emit nothing. Its default name is "leftjoinwindow". The rest as
// for JoinWindow.
func LeftJoinWindow[K comparable, L, R, U any](left *Keyed[K, L], right *Keyed[K, R], within time.Duration, fn func(l L, r R, found bool) U, opts ...StateOption) *Stream[U] {
	mustFunc("LeftJoinWindow", fn == nil)
	return joinWindow(left, right, within, StageLeftJoinWindow, "LeftJoinWindow", joinLeft,
		func(l L, _ bool, r R, rok bool) U { return fn(l, r, rok) }, opts)
}

// OuterJoinWindow is [JoinWindow] that keeps every record of both inputs:
// fn(l, true, r, true) for every pair, and fn(l, true, zero R, false) or
// fn(zero L, false, r, true) for a record of either input that joined
// none, once the watermark has passed its event time plus within plus the
// allowed lateness (or both inputs ended): Kafka Streams' outerJoin. Its
// default name is "outerjoinwindow". The rest as for JoinWindow.
func OuterJoinWindow[K comparable, L, R, U any](left *Keyed[K, L], right *Keyed[K, R], within time.Duration, fn func(l L, lok bool, r R, rok bool) U, opts ...StateOption) *Stream[U] {
	mustFunc("OuterJoinWindow", fn == nil)
	return joinWindow(left, right, within, StageOuterJoinWindow, "OuterJoinWindow", joinOuter, fn, opts)
}

// joinKind is which of a pair's records a join emits without a partner.
type joinKind uint8

const (
	joinInner joinKind = iota
	joinLeft
	joinOuter
)

// The inputs of a join, as indexes.
const (
	sideLeft  = 0
	sideRight = 1
)

var sideNames = [2]string{"left", "right"}

func joinWindow[K comparable, L, R, U any](left *Keyed[K, L], right *Keyed[K, R], within time.Duration, kind, op string, kj joinKind,
	fn func(L, bool, R, bool) U, opts []StateOption) *Stream[U] {
	if left == nil || right == nil {
		panic("stream: " + op + " called with a nil Keyed")
	}
	if within < time.Millisecond {
		panic(fmt.Sprintf("stream: %s with within %s: event times are compared in milliseconds, give at least 1ms", op, within))
	}
	if left.s.p == right.s.p {
		panic("stream: " + op + " of two streams of one pipeline: read the inputs with two sources (two From), on topics of their own")
	}
	cfg := newStateConfig(kind, opts)
	if len(cfg.timeOpts) > 0 {
		panic(fmt.Sprintf("stream: %s applies to Window, not to %s: a join reads its inputs' event times with stream.JoinTimes, and runs on event time only", cfg.timeOpts[0], op))
	}
	if cfg.emitUpdates {
		panic("stream: EmitUpdates applies to Window, not to " + op)
	}
	if cfg.tableOnly != "" {
		panic(fmt.Sprintf("stream: %s applies to ToTable, not to %s", cfg.tableOnly, op))
	}
	for i, o := range cfg.lateOpts {
		if o == "LateTo" {
			panic(fmt.Sprintf("stream: LateTo applies to Window, not to %s: give the late records of each input a sink with stream.LateLeftTo and stream.LateRightTo", op))
		}
		if (o == "DropLate" && len(cfg.lateOpts) > 1) || slices.Contains(cfg.lateOpts[:i], o) {
			panic(fmt.Sprintf("stream: %s given %s: give DropLate, or LateLeftTo and LateRightTo once each", op, strings.Join(cfg.lateOpts, " and ")))
		}
	}
	// proto holds the join's settings; each run works on a fresh copy.
	proto := &joinStage[K, L, R, U]{kind: kj, within: within.Milliseconds(), cfg: cfg, emitFn: fn}
	if cfg.joinTimeL != nil {
		f, ok := cfg.joinTimeL.(func(L) time.Time)
		if !ok {
			panic(fmt.Sprintf("stream: JoinTimes's left function is a %T, the left input of %s needs a func(%s) time.Time", cfg.joinTimeL, op, reflect.TypeFor[L]()))
		}
		proto.timeL = f
	}
	if cfg.joinTimeR != nil {
		f, ok := cfg.joinTimeR.(func(R) time.Time)
		if !ok {
			panic(fmt.Sprintf("stream: JoinTimes's right function is a %T, the right input of %s needs a func(%s) time.Time", cfg.joinTimeR, op, reflect.TypeFor[R]()))
		}
		proto.timeR = f
	}
	var lateL Sink[L]
	var lateR Sink[R]
	if cfg.lateLeft != nil {
		s, ok := cfg.lateLeft.(Sink[L])
		if !ok {
			panic(fmt.Sprintf("stream: LateLeftTo's sink is a %T, the left input of %s needs a stream.Sink[%s]", cfg.lateLeft, op, reflect.TypeFor[L]()))
		}
		lateL = s
	}
	if cfg.lateRight != nil {
		s, ok := cfg.lateRight.(Sink[R])
		if !ok {
			panic(fmt.Sprintf("stream: LateRightTo's sink is a %T, the right input of %s needs a stream.Sink[%s]", cfg.lateRight, op, reflect.TypeFor[R]()))
		}
		lateR = s
	}
	// The checks of a stateful stage, on each input: the name is
	// registered once, on the left, and mergePipelines carries it.
	registerState(left, op, cfg.name)
	if right.s.reorders != "" {
		panic(fmt.Sprintf("stream: %s %q needs the records of each partition in offset order, and the stage %q before its right input may reorder them: "+
			"put Parallel, KeyOrdered, Batch and Via stages after the stateful one", op, cfg.name, right.s.reorders))
	}
	if !right.follows {
		right.s.p.unpartitioned = append(right.s.p.unpartitioned, cfg.name)
	}
	srcs := [2][]io.Closer{slices.Clone(left.s.p.sources), slices.Clone(right.s.p.sources)}
	p := mergePipelines(op, left.s.p, right.s.p)
	if lateL != nil {
		p.noteSink(fmt.Sprintf("late sink of the left input of %s %q (LateLeftTo)", op, cfg.name), lateL)
	}
	if lateR != nil {
		p.noteSink(fmt.Sprintf("late sink of the right input of %s %q (LateRightTo)", op, cfg.name), lateR)
	}
	ctr := p.counters(cfg.name)
	ctr.eventTime = true
	upL, upR := left.s.connect, right.s.connect
	// An input fed by a Window (or a join) carries its results, which
	// belong to no source partition: its sources' partitions tell only
	// whether more will come (align), they hold no event time of this
	// join's.
	fedByState := [2]bool{left.s.unkeyedBy != "", right.s.unkeyedBy != ""}
	return &Stream[U]{p: p, unkeyedBy: cfg.name, connect: func(rt *runtime, down outlet[U]) {
		st := proto.fresh()
		st.fedByState = fedByState
		st.down = down
		st.core.init(rt, cfg.name, ctr)
		st.idleness = idleness{idleMs: cfg.idle, rt: rt}
		st.pend = &pendingResults[joinResult[U]]{m: make(map[int64]pendingResult[joinResult[U]]), dirty: &st.core.dirty, wake: rt.settleWake}
		for s, list := range srcs {
			for _, src := range list {
				if rt.p.feedsTable(src) {
					continue // its records feed a Table, never this join
				}
				if l, ok := src.(PartitionLister); ok {
					if fedByState[s] {
						st.upListers[s] = append(st.upListers[s], l)
					} else {
						st.listers[s] = append(st.listers[s], l)
					}
				}
				if u, ok := src.(CaughtUpReporter); ok {
					if cfg.idle > 0 {
						st.ups = append(st.ups, u)
					}
					st.aligners[s] = append(st.aligners[s], u)
					if one, ok := src.(interface {
						Topic() string
						PartitionID() int32
					}); ok {
						if _, lists := src.(PartitionLister); !lists {
							// A source of one partition (source.Partition) names
							// it before it opens: it is listed at once.
							tp := TopicPartition{one.Topic(), one.PartitionID()}
							if fedByState[s] {
								st.upParts[s] = append(st.upParts[s], tp)
							} else {
								st.singles[s] = append(st.singles[s], tp)
							}
						}
					}
				}
			}
		}
		st.born = rt.clock.Now().UnixMilli()
		st.aligned = make(chan struct{}, 2)
		rt.stateful = append(rt.stateful, st)
		if cfg.idle > 0 {
			rt.spawn(st.idleTick) // finishes no record: rt.async stays as it is
		}
		li := &joinInput[K, L, R, U, L, R]{st: st, side: sideLeft, key: left.key, evTime: st.timeL, late: lateL,
			mine: &st.left, other: &st.right,
			pair:  func(l L, r R) U { return st.emitFn(l, true, r, true) },
			alone: func(l L) (U, bool) { return st.emitFn(l, true, *new(R), false), kj != joinInner }}
		ri := &joinInput[K, L, R, U, R, L]{st: st, side: sideRight, key: right.key, evTime: st.timeR, late: lateR,
			mine: &st.right, other: &st.left,
			pair:  func(r R, l L) U { return st.emitFn(l, true, r, true) },
			alone: func(r R) (U, bool) { return st.emitFn(*new(L), false, r, true), kj == joinOuter }}
		st.inputs = [2]joinSide[K]{li, ri}
		upL(rt, li)
		upR(rt, ri)
	}}
}

// joinStage is a windowed join in one run: the state of both inputs and
// the watermark, under mu; its two inputs (joinInput) push into it.
type joinStage[K comparable, L, R, U any] struct {
	// restored: a snapshot of the join was found and restored; until
	// then each partition's first record checks that no position of it
	// is saved (stateCore.refuseEmptyStart).
	restored bool
	kind     joinKind
	within   int64 // ms
	cfg      *stateConfig
	timeL    func(L) time.Time // nil: Element.Timestamp
	timeR    func(R) time.Time
	emitFn   func(l L, lok bool, r R, rok bool) U
	down     outlet[U]
	inputs   [2]joinSide[K]

	mu   sync.Mutex // guards what follows and serialises pushes downstream
	core stateCore
	idleness
	listers [2][]PartitionLister // the sources of each input that have not listed their partitions yet
	side    map[partKey]uint8    // the input each partition arrives on
	ended   [2]bool              // the input ended: its partitions no longer hold the watermark
	closed  int                  // inputs closed
	born    int64                // the clock (ms) when the run began: an input silent since then is idle after the Idleness
	idleDue int64                // the clock (ms) idleTick waits for, math.MaxInt64 when it waits for a record

	left  joinBuf[K, L]
	right joinBuf[K, R]
	exp   joinHeap[K] // every record held, by the watermark that releases it
	wm    int64       // the watermark, ms; math.MinInt64 before any
	seq   uint64      // arrival order of the records held: ties release in it
	rseq  int64       // the Offset of the next result: its id in pend
	pend  *pendingResults[joinResult[U]]
	redo  []joinResult[U] // results pending in the restored state, to emit again first
	out   []Element[U]
	fin   []member

	wake chan struct{} // Idleness: a record arrived while idleTick waited for one

	// Input alignment (align): the sources of each input that tell
	// whether a partition has records left to read, and a wake-up for an
	// input that waits for the other to catch up in event time.
	aligners [2][]CaughtUpReporter
	aligned  chan struct{}
	// waiting: the input waits in align with the push of its event time
	// head; of two inputs waiting for each other the one behind goes on.
	waiting [2]bool
	head    [2]int64
	// singles are the partitions of each input's one-partition sources,
	// listed by watchParts' first call.
	singles [2][]TopicPartition
	// fedByState marks an input whose records are a stateful stage's
	// results (a Window's: they carry no source partition). Its sources'
	// partitions (upParts, and those of upListers once they list them)
	// are not the input's partitions: they only tell align whether more
	// records will come (upstreamMore). Listed as the input's, they would
	// hold the watermark back for good, no record of theirs ever reaching
	// the join (Nexmark q8 held every person it read).
	fedByState [2]bool
	upParts    [2][]TopicPartition
	upListers  [2][]PartitionLister
	quit       chan struct{}

	wmv wmView // the watermarks, for Observe (observe_wm.go)
}

// fresh returns a copy of the stage's settings with empty state, for one
// run.
func (st *joinStage[K, L, R, U]) fresh() *joinStage[K, L, R, U] {
	return &joinStage[K, L, R, U]{kind: st.kind, within: st.within, cfg: st.cfg, timeL: st.timeL, timeR: st.timeR, emitFn: st.emitFn,
		side: make(map[partKey]uint8), wm: math.MinInt64,
		left: joinBuf[K, L]{keys: make(map[K][]joinRec[L])}, right: joinBuf[K, R]{keys: make(map[K][]joinRec[R])},
		wake: make(chan struct{}, 1), quit: make(chan struct{})}
}

// joinRec is a record held by a join.
type joinRec[V any] struct {
	v       V
	t       int64  // event time, ms
	seq     uint64 // arrival order
	matched bool   // it joined a record of the other input
	sent    bool   // emitted without a partner at an end of the input
}

// joinBuf is the records one input of a join holds, per key in arrival
// order.
type joinBuf[K comparable, V any] struct {
	keys map[K][]joinRec[V]
	n    int // records held
}

// take removes the record seq of key k and returns it. Records leave in
// the order of their event times, which is mostly their arrival order: the
// first of the key's slice is cut off in place, in constant time (a key of
// many records would otherwise copy them all at every release).
func (b *joinBuf[K, V]) take(k K, seq uint64) (joinRec[V], bool) {
	recs := b.keys[k]
	for i := range recs {
		if recs[i].seq == seq {
			r := recs[i]
			switch {
			case len(recs) == 1:
				delete(b.keys, k)
			case i == 0:
				recs[0] = joinRec[V]{} // the value is not kept alive by the array
				b.keys[k] = recs[1:]
			default:
				b.keys[k] = slices.Delete(recs, i, i+1)
			}
			b.n--
			return r, true
		}
	}
	return joinRec[V]{}, false
}

// joinSide is what the stage needs of an input without its value type.
type joinSide[K comparable] interface {
	// release removes the record seq of key k from the state and emits it
	// without a partner if it joined none and the join emits such.
	release(k K, seq uint64)
	// sendAlone emits the record seq of key k without a partner, at the
	// end of the input, if it is owed and not sent yet; it stays held.
	// doneAlone ends a series of sendAlone calls.
	sendAlone(k K, seq uint64)
	doneAlone()
}

// joinHeap is a min-heap of the records a join holds by (at, seq): the
// watermark that passes at releases them.
type joinHeap[K comparable] []joinExp[K]

type joinExp[K comparable] struct {
	at   int64 // event time + within + lateness, ms
	seq  uint64
	key  K
	side uint8
}

func (h joinHeap[K]) less(i, j int) bool {
	return h[i].at < h[j].at || (h[i].at == h[j].at && h[i].seq < h[j].seq)
}

func (h *joinHeap[K]) push(e joinExp[K]) {
	*h = append(*h, e)
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

func (h *joinHeap[K]) pop() joinExp[K] {
	q := *h
	top := q[0]
	n := len(q) - 1
	q[0] = q[n]
	q[n] = joinExp[K]{} // let the key be collected
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

// joinInput is one input of a join: V is its value type, W the other's.
type joinInput[K comparable, L, R, U, V, W any] struct {
	st     *joinStage[K, L, R, U]
	side   uint8
	key    func(V) K
	evTime func(V) time.Time // nil: Element.Timestamp
	late   Sink[V]
	mine   *joinBuf[K, V]
	other  *joinBuf[K, W]
	pair   func(v V, w W) U
	alone  func(v V) (U, bool) // false: the join emits no result for v alone

	lateE []Element[V]
	lateV []V
	// bySeq indexes the records held by their seq while the end of the
	// input sends them (sendAlone); nil otherwise.
	bySeq  map[uint64]*joinRec[V]
	lateAt int64 // the event time of the first late record of a push, ms
	lateWm int64 // and the watermark it was judged against
}

func (in *joinInput[K, L, R, U, V, W]) push(ctx context.Context, elems []Element[V]) error {
	st := in.st
	st.core.ctr.in.Add(int64(len(elems)))
	st.mu.Lock()
	defer st.mu.Unlock()
	// In chunks that keep within the join's reach of the other input (a
	// source batch can span seconds of event time): align waits before
	// each, with st.mu released, so nothing of a chunk is kept in the
	// stage's scratch across a wait.
	for len(elems) > 0 {
		st.align(in.side, in.timeOf(&elems[0]))
		n := len(elems)
		if limit, ok := st.alignLimit(in.side); ok {
			n = 1
			for n < len(elems) && in.timeOf(&elems[n]) <= limit {
				n++
			}
		}
		if err := in.pushLocked(ctx, elems[:n]); err != nil {
			return err
		}
		elems = elems[n:]
	}
	return nil
}

// pushLocked absorbs elems, a chunk of a push. st.mu is held.
func (in *joinInput[K, L, R, U, V, W]) pushLocked(ctx context.Context, elems []Element[V]) (err error) {
	st := in.st
	c := &st.core
	absorbing := true // until the results are handed on (stateCore.failed)
	defer func() {
		if absorbing {
			c.failPush(err)
		}
	}()
	st.out, st.fin, in.lateE = st.out[:0], st.fin[:0], in.lateE[:0]
	st.redoLocked()
	if st.idleMs > 0 {
		st.now = c.rt.clock.Now().UnixMilli()
	}
	st.watchParts()
	lateness := st.cfg.lateness
	for i := range elems {
		e := &elems[i]
		ps, err := st.part(in.side, e.Topic, e.Partition)
		if err != nil {
			return recordError(c.name, e, err)
		}
		ps.active, ps.idle, ps.recheck = st.now, false, 0
		if !st.restored {
			if err := c.refuseEmptyStart(ctx, "join", e.Topic, e.Partition); err != nil {
				return err
			}
		}
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
		var t int64
		if in.evTime != nil {
			tm := in.evTime(e.Value)
			if tm.IsZero() {
				return recordError(c.name, e, fmt.Errorf("%w: stream.JoinTimes gave the %s record the zero time.Time", ErrNoEventTime, sideNames[in.side]))
			}
			t = tm.UnixMilli()
		} else if t = e.Timestamp; t == 0 {
			return recordError(c.name, e, fmt.Errorf("%w: the %s record's Timestamp is 0 (its source sets none, as lines of a file or a slice): read the event time from the value with stream.JoinTimes", ErrNoEventTime, sideNames[in.side]))
		}
		if st.wm != math.MinInt64 && t+lateness < st.wm {
			if len(in.lateE) == 0 {
				in.lateAt, in.lateWm = t, st.wm
			}
			in.lateE = append(in.lateE, *e)
			continue
		}
		c.busy = true // until the record's effect is whole
		in.absorb(in.key(e.Value), e.Value, t)
		if e.owner != nil {
			// Finished: its effect is in the state, which the next
			// checkpoint saves before the positions it read.
			st.fin = append(st.fin, member{e.owner, e.Offset})
		}
		if t > ps.maxTs {
			ps.maxTs = t
			st.raise()
		}
		c.busy = false
	}
	c.dirty.Store(true)
	if len(in.lateE) > 0 {
		if err := in.lateLocked(ctx); err != nil {
			return err
		}
	}
	if len(st.fin) > 0 {
		c.offs = finishMembers(st.fin, c.offs)
		c.rt.noteFinished(len(st.fin))
		clear(st.fin)
	}
	select { // an input waiting for this one to catch up looks again
	case st.aligned <- struct{}{}:
	default:
	}
	if st.idleMs > 0 && st.idleDue == math.MaxInt64 {
		select { // idleTick waits for a record: now it has one to time
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

// timeOf returns e's event time in ms, math.MinInt64 when it has none
// (the loop of push reports that).
func (in *joinInput[K, L, R, U, V, W]) timeOf(e *Element[V]) int64 {
	if in.evTime != nil {
		if tm := in.evTime(e.Value); !tm.IsZero() {
			return tm.UnixMilli()
		}
		return math.MinInt64
	}
	if e.Timestamp == 0 {
		return math.MinInt64
	}
	return e.Timestamp
}

// alignPoll is how often an input waiting for the other (align) looks
// again when nothing woke it: the other's sources are asked whether they
// still have records to read.
const alignPoll = 2 * time.Millisecond

// alignStuck is how many polls an aligning input waits for a checkpoint
// that is taking the stateful stages' locks before it goes on (50 polls,
// about 100 ms): a save that cannot get a lock in that time waits for a
// stage upstream of the input, which holds its lock until the push ends.
const alignStuck = 50

// align holds back a push of input side whose first event time t is more
// than the join's reach (within + lateness + out-of-orderness) ahead of
// every event time the other input has delivered, while the other input
// still has records to read: the records of the input ahead would
// otherwise wait in the state until the other catches up, and a replay
// whose one input is read faster than the other (one topic of small
// records, one of large) would hold the lead of the faster, up to its
// whole topic, instead of a reach of each (Kafka Streams picks the record
// with the lowest timestamp among the partitions of a task, Flink aligns
// the watermarks of its sources). It waits with st.mu released, before
// the push touches the stage, and gives up when the other input ended or
// cannot tell whether it has records to read (a source that is not a
// CaughtUpReporter), when it is idle, when Run stops or its context ends,
// when a checkpoint has been taking the stateful stages' locks for
// alignStuck polls (a stage upstream of this input may hold its own while
// it pushes here, and the other input may wait behind the save), and
// under ExactlyOnce when a transaction
// waits to end (the other input could not push until it did). st.mu is
// held.
func (st *joinStage[K, L, R, U]) align(side uint8, t int64) {
	rt := st.core.rt
	other := 1 - side
	reach := st.within + st.cfg.lateness + st.cfg.outOfOrder
	defer func() { st.waiting[side] = false }()
	stuck := 0 // polls spent while a checkpoint took the stages' locks
	for t != math.MinInt64 && !st.ended[other] {
		st.watchParts()
		otherMax, more := st.behind(other)
		if !more || t-reach <= otherMax {
			return
		}
		if st.waiting[other] && (st.head[other] > t || (st.head[other] == t && side == sideLeft)) {
			return // the other waits with a later record: this one is behind, it goes on
		}
		if rt.stopped() || rt.srcCtx.Err() != nil {
			return
		}
		if rt.lockingState.Load() {
			// A checkpoint is taking the stateful stages' locks, this
			// join's among them: let it (st.mu is released below) and
			// align again once it has them. If it cannot get them (a stage
			// upstream of this input holds its own lock while it pushes
			// here, and the save waits for it), go on after a while
			// rather than wait for an input the save holds back; at once
			// when a stateful stage feeds this input (it does hold its
			// lock: a Window pushes its results under it).
			if stuck++; stuck > alignStuck || st.fedByState[side] {
				return
			}
		} else {
			stuck = 0
		}
		if rt.eos != nil {
			if !rt.txnGate.TryRLock() {
				return // a transaction waits to end: the other input waits for it
			}
			rt.txnGate.RUnlock()
		}
		if !st.waiting[side] {
			st.waiting[side], st.head[side] = true, t
			select { // the other input, if it waits too, looks again
			case st.aligned <- struct{}{}:
			default:
			}
		}
		st.mu.Unlock()
		timer := time.NewTimer(alignPoll)
		select {
		case <-st.aligned:
		case <-timer.C:
		case <-rt.stop:
		}
		timer.Stop()
		st.mu.Lock()
	}
}

// alignLimit returns the greatest event time a record of input side may
// have to be absorbed without waiting for the other input (its greatest
// event time plus the join's reach), and whether there is one: false when
// the other input ended or has no record left to read, so that a push
// goes on whole.
func (st *joinStage[K, L, R, U]) alignLimit(side uint8) (int64, bool) {
	other := 1 - side
	if st.ended[other] {
		return 0, false
	}
	otherMax, more := st.behind(other)
	if !more {
		return 0, false
	}
	if otherMax == math.MinInt64 {
		return math.MinInt64, true // nothing of the other yet: one record, then align again
	}
	return otherMax + st.within + st.cfg.lateness + st.cfg.outOfOrder, true
}

// behind returns the greatest event time the input side has delivered
// (math.MinInt64: none) and whether it has records left to read: a source
// of it has not listed its partitions yet, or one of its partitions is not
// caught up and not idle, or listed and its source not open yet. A
// partition no source can tell about counts as having none, so that an
// input of such sources is never waited for.
func (st *joinStage[K, L, R, U]) behind(side uint8) (maxTs int64, more bool) {
	maxTs = math.MinInt64
	if len(st.listers[side]) > 0 {
		more = true
	}
	if st.fedByState[side] {
		more = st.upstreamMore(side)
	}
	for _, p := range st.core.list {
		if st.sideOf(p) != side {
			continue
		}
		if st.fedByState[side] {
			maxTs = max(maxTs, p.maxTs) // a result's partition is no source's
			continue
		}
		if p.pk.topic == "" {
			continue
		}
		maxTs = max(maxTs, p.maxTs)
		if more || p.idle {
			continue
		}
		var next int64
		next, st.pts = st.rt.finishedTo(p.pk.topic, p.pk.partition, st.pts)
		answered := false
		for _, u := range st.aligners[side] {
			if c, ok := u.CaughtUp(p.pk.topic, p.pk.partition, next); ok {
				more, answered = !c, true
				break
			}
		}
		if !answered && p.listed && p.maxTs == math.MinInt64 && len(st.aligners[side]) > 0 {
			more = true // listed, its source not open yet: it will deliver
		}
	}
	return maxTs, more
}

// upstreamMore reports whether the sources upstream of input side, a
// stateful stage's results (fedByState), have records left to read: one
// has not listed its partitions yet, or has not opened one it listed, or
// one of their partitions is not caught up. Their records become results
// later (a Window's when its window closes), which is all an aligning
// input needs to know: the other may wait for them.
func (st *joinStage[K, L, R, U]) upstreamMore(side uint8) bool {
	more := false
	ls := st.upListers[side]
	for i := 0; i < len(ls); {
		tps := ls[i].PendingPartitions()
		if tps == nil {
			more = true
			i++
			continue
		}
		st.upParts[side] = append(st.upParts[side], tps...)
		ls = append(ls[:i], ls[i+1:]...)
	}
	st.upListers[side] = ls
	for _, tp := range st.upParts[side] {
		if more {
			break
		}
		var next int64
		next, st.pts = st.rt.finishedTo(tp.Topic, tp.Partition, st.pts)
		answered := false
		for _, u := range st.aligners[side] {
			if c, ok := u.CaughtUp(tp.Topic, tp.Partition, next); ok {
				more, answered = !c, true
				break
			}
		}
		more = more || !answered // listed, its source not open yet: it will deliver
	}
	return more
}

// absorb joins v, of key k and event time t, with the records of the
// other input it is within reach of, emitting each pair, and holds it.
func (in *joinInput[K, L, R, U, V, W]) absorb(k K, v V, t int64) {
	st := in.st
	matched := false
	recs := in.other.keys[k]
	for i := range recs {
		o := &recs[i]
		if d := t - o.t; d <= st.within && d >= -st.within {
			st.emit(in.pair(v, o.v), max(t, o.t))
			o.matched, matched = true, true
		}
	}
	st.seq++
	in.mine.keys[k] = append(in.mine.keys[k], joinRec[V]{v: v, t: t, seq: st.seq, matched: matched})
	in.mine.n++
	st.exp.push(joinExp[K]{at: t + st.within + st.cfg.lateness, seq: st.seq, key: k, side: in.side})
}

func (in *joinInput[K, L, R, U, V, W]) release(k K, seq uint64) {
	r, ok := in.mine.take(k, seq)
	if !ok || r.matched || r.sent {
		return
	}
	if u, emit := in.alone(r.v); emit {
		in.st.emit(u, r.t)
	}
}

func (in *joinInput[K, L, R, U, V, W]) sendAlone(k K, seq uint64) {
	if in.bySeq == nil {
		// Indexed once for all the records the end of the input sends:
		// looked up in the key's slice one by one, a key of many records
		// would cost their square.
		in.bySeq = make(map[uint64]*joinRec[V], in.mine.n)
		for _, recs := range in.mine.keys {
			for i := range recs {
				in.bySeq[recs[i].seq] = &recs[i]
			}
		}
	}
	r := in.bySeq[seq]
	if r == nil || r.matched || r.sent {
		return
	}
	if u, emit := in.alone(r.v); emit {
		in.st.emit(u, r.t)
		r.sent = true
	}
}

// doneAlone drops the index sendAlone built: the slices it points into
// change as records arrive and leave.
func (in *joinInput[K, L, R, U, V, W]) doneAlone() { in.bySeq = nil }

// lateLocked hands the late records of a push to the input's late policy.
func (in *joinInput[K, L, R, U, V, W]) lateLocked(ctx context.Context) error {
	st := in.st
	c := &st.core
	c.ctr.late.Add(int64(len(in.lateE)))
	switch {
	case in.late != nil:
		in.lateV = in.lateV[:0]
		for i := range in.lateE {
			in.lateV = append(in.lateV, in.lateE[i].Value)
		}
		err := in.late.Write(ctx, in.lateV)
		clear(in.lateV)
		if err != nil {
			return recordError(c.name+" (late "+sideNames[in.side]+" records)", &in.lateE[0], err)
		}
	case st.cfg.dropLate:
		c.ctr.skipped.Add(int64(len(in.lateE)))
	default:
		opt := map[uint8]string{sideLeft: "stream.LateLeftTo", sideRight: "stream.LateRightTo"}[in.side]
		return recordError(c.name, &in.lateE[0], fmt.Errorf("%w: the %s record's event time %s is behind the join's watermark %s by more than the allowed lateness %s "+
			"(out-of-orderness %s, within %s): records it would join may have been released; route late records with %s or drop them with stream.DropLate",
			ErrLateRecord, sideNames[in.side], fmtMillis(in.lateAt), fmtMillis(in.lateWm), ms(st.cfg.lateness), ms(st.cfg.outOfOrder), ms(st.within), opt))
	}
	for i := range in.lateE {
		if o := in.lateE[i].owner; o != nil {
			st.fin = append(st.fin, member{o, in.lateE[i].Offset})
		}
	}
	clear(in.lateE)
	return nil
}

func ms(v int64) time.Duration { return time.Duration(v) * time.Millisecond }

func (in *joinInput[K, L, R, U, V, W]) close(ctx context.Context) error {
	return in.st.closeInput(ctx, in.side)
}

// part returns the marks of a partition of input side, and an error when
// the partition reached the other input before: positions are kept per
// topic-partition, so two inputs reading one partition would finish each
// other's records.
func (st *joinStage[K, L, R, U]) part(side uint8, topic string, partition int32) (*partState, error) {
	if topic == "" {
		// No lineage: one mark per input, never a replay.
		return st.core.part("", int32(side)), nil
	}
	ps := st.core.part(topic, partition)
	if s, ok := st.side[ps.pk]; !ok {
		st.side[ps.pk] = side
	} else if s != side {
		return nil, fmt.Errorf("stream: join %q: %s/%d reaches both its inputs: read the left and the right records from topics of their own (positions are kept per topic-partition)",
			st.core.name, topic, partition)
	}
	return ps, nil
}

// watchParts asks the sources that list their partitions (the first time
// they can tell) which partitions they will deliver, and marks them: a
// listed partition holds the watermark back until one of its event times
// reaches the join.
func (st *joinStage[K, L, R, U]) watchParts() {
	for s := range st.singles {
		for _, tp := range st.singles[s] {
			ps := st.core.part(tp.Topic, tp.Partition)
			ps.listed, ps.active = true, st.now
			if _, ok := st.side[ps.pk]; !ok {
				st.side[ps.pk] = uint8(s)
			}
		}
		st.singles[s] = nil
	}
	for s := range st.listers {
		ls := st.listers[s]
		for i := 0; i < len(ls); {
			tps := ls[i].PendingPartitions()
			if tps == nil {
				i++
				continue
			}
			for _, tp := range tps {
				ps := st.core.part(tp.Topic, tp.Partition)
				ps.listed, ps.active = true, st.now
				if _, ok := st.side[ps.pk]; !ok {
					st.side[ps.pk] = uint8(s)
				}
			}
			ls = append(ls[:i], ls[i+1:]...)
		}
		st.listers[s] = ls
	}
}

// raise sets the watermark from the least of the partitions' greatest
// event times, less the out-of-orderness, if that is above it, and
// releases the records it passes. An input with no event time yet holds
// it back, unless it ended or is idle.
func (st *joinStage[K, L, R, U]) raise() {
	m := int64(math.MaxInt64)
	idleMax := int64(math.MinInt64)
	var timed [2]bool // the input has a partition with an event time, or idle
	for _, p := range st.core.list {
		s := st.sideOf(p)
		if st.ended[s] {
			// It holds nothing back, but its event times count when
			// every other partition is idle, as an idle one's do.
			idleMax = max(idleMax, p.maxTs)
			continue
		}
		switch {
		case st.idle(p):
			idleMax = max(idleMax, p.maxTs)
			timed[s] = true
		case p.maxTs != math.MinInt64:
			m = min(m, p.maxTs)
			timed[s] = true
		case p.listed:
			return // listed, no event time yet: holds it back
		}
	}
	young := st.idleMs <= 0 || st.now-st.born < st.idleMs
	for s := range timed {
		if !timed[s] && !st.ended[s] && young {
			return // an input that has delivered no event time holds it back
		}
		if len(st.listers[s]) > 0 && !st.ended[s] && young {
			// A source of the input cannot tell yet which partitions it
			// will deliver: after a restore the input has event times (its
			// restored partitions), but a partition it never delivered
			// before would otherwise be passed by and its records late.
			return
		}
	}
	if m == math.MaxInt64 {
		if idleMax == math.MinInt64 {
			return // no event time yet
		}
		m = idleMax // every partition is idle: as Window's raise
	}
	if w := m - st.cfg.outOfOrder; w > st.wm {
		st.wm = w
		st.release()
	}
}

// sideOf returns the input of partition p.
func (st *joinStage[K, L, R, U]) sideOf(p *partState) uint8 {
	if p.pk.topic == "" {
		return uint8(p.pk.partition)
	}
	return st.side[p.pk]
}

// release removes the records the watermark has passed (event time +
// within + lateness below it), in that order, emitting those owed
// without a partner.
func (st *joinStage[K, L, R, U]) release() {
	for len(st.exp) > 0 && st.exp[0].at < st.wm {
		e := st.exp.pop()
		st.inputs[e.side].release(e.key, e.seq)
	}
}

// emit queues a result for downstream and keeps it pending until it has
// finished there. ts is its event time, ms.
func (st *joinStage[K, L, R, U]) emit(u U, ts int64) {
	id := st.rseq
	st.rseq++
	st.pend.mu.Lock()
	st.pend.m[id] = pendingResult[joinResult[U]]{res: joinResult[U]{u, ts}, count: 1}
	st.pend.mu.Unlock()
	st.out = append(st.out, Element[U]{Value: u, Offset: id, Epoch: checkpoint.NoEpoch, Timestamp: ts, owner: st.pend})
}

// redoLocked emits again the results that were pending in the restored
// state, before anything else.
func (st *joinStage[K, L, R, U]) redoLocked() {
	if len(st.redo) == 0 {
		return
	}
	for _, r := range st.redo {
		st.emit(r.Value, r.Ts)
	}
	clear(st.redo)
	st.redo = st.redo[:0]
}

// flushLocked hands the queued results downstream.
func (st *joinStage[K, L, R, U]) flushLocked(ctx context.Context) error {
	if len(st.out) == 0 {
		return nil
	}
	st.core.ctr.out.Add(int64(len(st.out)))
	err := st.down.push(ctx, st.out)
	clear(st.out)
	st.out = st.out[:0]
	return err
}

// closeInput is an input's close: at its end (not a cancellation) its
// partitions stop holding the watermark back, and once both inputs ended
// every record still owed a result without a partner is emitted.
func (st *joinStage[K, L, R, U]) closeInput(ctx context.Context, side uint8) error {
	rt := st.core.rt
	st.mu.Lock()
	st.closed++
	last := st.closed == 2
	st.out = st.out[:0]
	st.redoLocked()
	if rt.parent.Err() == nil && !rt.stopped() {
		st.ended[side] = true
		st.core.busy = true
		if !last {
			st.raise()
		} else if st.kind != joinInner {
			order := append(joinHeap[K](nil), st.exp...)
			for len(order) > 0 {
				e := order.pop()
				st.inputs[e.side].sendAlone(e.key, e.seq)
			}
			st.inputs[sideLeft].doneAlone()
			st.inputs[sideRight].doneAlone()
		}
		st.core.busy = false
		st.core.dirty.Store(true)
	}
	err := st.flushLocked(ctx)
	st.mu.Unlock()
	if !last {
		return err
	}
	close(st.quit)
	if err != nil {
		return err
	}
	return st.down.close(ctx)
}

// idleTick is the timer goroutine of Idleness: when a partition (or an
// input that never delivered) may have become idle it raises the
// watermark, as Window's idleTick does.
func (st *joinStage[K, L, R, U]) idleTick() error {
	rt := st.core.rt
	for {
		st.mu.Lock()
		now := rt.clock.Now().UnixMilli()
		due := int64(math.MaxInt64)
		if now-st.born < st.idleMs {
			due = st.born + st.idleMs // an input that never delivers is idle then
		}
		for _, ps := range st.core.list {
			switch {
			case now-ps.active < st.idleMs:
				due = min(due, ps.active+st.idleMs)
			case ps.recheck != math.MaxInt64:
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
			rt.txnGate.RLock() // never while a transaction drains and commits
		}
		st.mu.Lock()
		st.out = st.out[:0]
		st.redoLocked()
		st.now = rt.clock.Now().UnixMilli()
		st.watchParts()
		for _, ps := range st.core.list {
			st.idle(ps) // marks the idle ones, sets when to ask again
		}
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
