package stream

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strom-dev/strom/checkpoint"
)

// DefaultStallAfter is how long a partition that is behind (it has lag, or
// records in flight) may make no progress before the pipeline marks it
// stalled: see [StallAfter].
const DefaultStallAfter = 30 * time.Second

// observeEvery is how often a running pipeline samples its counters for
// [Stream.Observe]: the rates of a [Snapshot] are over this interval, and a
// stall is flagged at most this long after passing its limit.
const observeEvery = time.Second

// keepObserved is how many checkpoints and errors a [Snapshot] holds.
const keepObserved = 10

// observeConfig holds the options of the pipeline's observation.
type observeConfig struct {
	stallAfter time.Duration // 0: DefaultStallAfter; < 0: off
	logger     *slog.Logger  // nil: slog.Default()
	monitor    *Monitor      // ObservedBy: published to at each Run
}

// StallAfter sets how long a partition that is behind may make no progress
// before the pipeline marks it stalled: its finished position did not move
// for d while it had lag (high watermark above the position, for sources
// that tell it: [HighWatermarker]) or, for sources that do not, records in
// flight. A stalled partition is marked in [Stream.Observe]'s
// [PartitionSnapshot], counted in the metric [MetricPartitionStalled], and
// logged once per episode at Warn, at most a second after passing d; the
// mark clears (logged at Info) when its position moves again or it has
// caught up. d == 0 keeps the default, [DefaultStallAfter] (30 s); d < 0
// turns stall detection off.
func StallAfter(d time.Duration) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.observe.stallAfter = d })
}

// WithLogger makes the pipeline log what it has to tell (a partition
// stalled, then resumed: [StallAfter]) to l instead of slog.Default(). A nil
// l keeps slog.Default().
func WithLogger(l *slog.Logger) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) { pc.observe.logger = l })
}

// Monitor observes the pipeline that runs now among those built with
// [ObservedBy] it: for a service whose pipeline is rebuilt after a failure
// ([ConsumeForever], [Forever]), where no single *Stream stays. Its zero
// value is ready to use and observes nothing until such a pipeline's Run
// starts. It is an [Observer], safe for concurrent use.
type Monitor struct {
	p atomic.Pointer[pipeline]
}

// Observe returns what the pipeline of the latest Run started among those
// built with [ObservedBy] this Monitor is doing (see [Stream.Observe]); a
// pipeline rebuilt after a failure starts its counts, checkpoints and
// errors anew. Before any such Run it returns a Snapshot of the time of the
// call, not running, with empty lists.
func (m *Monitor) Observe() Snapshot {
	if p := m.p.Load(); p != nil {
		return p.observe()
	}
	// No pipeline yet: now, and empty lists ([] in JSON, as a pipeline's).
	return Snapshot{Time: time.Now(), Stages: []StageSnapshot{}, Partitions: []PartitionSnapshot{},
		Checkpoints: []CheckpointSnapshot{}, Errors: []ErrorSnapshot{}}
}

// ObservedBy makes m observe the pipeline once its Run starts (and until
// another pipeline built with ObservedBy(m) starts): pass it to From, or to
// ConsumeForever with WithPipeline. A nil m is ignored.
func ObservedBy(m *Monitor) Option {
	return pipelineOptionFunc(func(pc *pipelineConfig) {
		if m != nil {
			pc.observe.monitor = m
		}
	})
}

// Snapshot is what a pipeline is doing, as [Stream.Observe] returns it: the
// chain of stages with their counts and how each spent the last second, the
// source partitions, the last checkpoints and the last errors. It is a copy:
// the caller may keep and change it. Its JSON form is what package web
// serves.
type Snapshot struct {
	// Time is when the snapshot was taken, on the pipeline's clock
	// ([WithClock]).
	Time time.Time `json:"time"`
	// Running is true while Run runs.
	Running bool `json:"running"`
	// StallAfter is the limit of [StallAfter] in force, 0 when off.
	StallAfter time.Duration `json:"stallAfterNs"`
	// Stages are the pipeline's stages in the order of [Stream.Stats].
	Stages []StageSnapshot `json:"stages"`
	// Partitions are the source partitions the pipeline has read, sorted
	// by topic and partition: those of the last sample (once a second
	// while Run runs; the last one stays after it returned), with their
	// positions, high watermarks, lags and records in flight read at the
	// call while Run runs.
	Partitions []PartitionSnapshot `json:"partitions"`
	// Checkpoints are the last 10 rounds of checkpoint saves that had a
	// position to save, or that failed, oldest first.
	Checkpoints []CheckpointSnapshot `json:"checkpoints"`
	// Errors are the last 10 failures of stage functions and sinks (each
	// failed call, retries included, whatever the policy did with it),
	// oldest first.
	Errors []ErrorSnapshot `json:"errors"`
}

// StageSnapshot is one stage in a [Snapshot]: its counters (exactly
// [Stream.Stats]'s at the moment of the snapshot) and its rates over the
// last sample interval (one second).
//
// Busy, back-pressured and idle are Flink's busyTimeMsPerSecond,
// backPressuredTimeMsPerSecond and idleTimeMsPerSecond, measured where the
// stage hands records on, once per batch (never per record): back-pressured
// is the time spent handing batches to the next stage (in a sequential
// pipeline, while the stages after it work on them; before a Parallel stage,
// while its queue is full), busy is the rest of the time spent in the stage
// on a batch (its own function), and idle is what is left of the second:
// waiting for input. The three add up to 1000. The stages time their
// batches from the pipeline's first Observe on (web.Pipeline calls it when
// made), so that a pipeline nobody observes pays nothing for it: until
// then, and in the sample that Observe falls in, idle reads high. For a
// Parallel or KeyOrdered
// stage (Workers > 1), whose function runs on its workers, busy is the time
// it took to accept batches (a full queue holds its upstream), and
// back-pressured the time its workers took handing results on; so for Via,
// whose flow runs on goroutines of its own: busy is the time it took the
// flow to accept records, back-pressured the time it took to hand the
// flow's output on. A join with a table ([JoinTable], [LeftJoinTable]) is
// timed as a sequential stage; a table's own stage ([ToTable]) hands
// nothing on: busy is the time it spends applying records. The windowed
// joins ([JoinWindow] and its kin), whose two inputs push on two
// goroutines and wait for each other to keep their event times together,
// are counted but not timed (Timed false: the three read 0, 0 and 1000).
//
// Its JSON form has the fields of StageStats ("name", "in", "out", ...)
// at its top level, beside its own.
type StageSnapshot struct {
	StageStats
	// InFlight is how many records are in the stage at the snapshot: they
	// entered it (In) and have not left it, that is been handed on (as
	// themselves, or in a result: a Batch's batch, a Window's or a join's
	// results are new records, and the records they absorb leave as they
	// are absorbed), nor finished in it (filtered, skipped,
	// dead-lettered, sent to a late sink); for a sink over an
	// [AsyncSink], not yet acknowledged. A sequential stage holds at most
	// the batch it works on; a Parallel or KeyOrdered stage also those
	// queued for its workers, a Batch its open batch, Via those inside its
	// flow. A record that failed and stopped the pipeline stays counted.
	// Read at the call, from counters kept once per batch.
	InFlight int64 `json:"inFlight"`
	// Timed is true for a stage whose busy, back-pressured and idle times
	// are measured.
	Timed bool `json:"timed"`
	// Index is the stage's place in the pipeline, from 0.
	Index int `json:"index"`
	// Workers is the stage's number of goroutines (Parallel, KeyOrdered),
	// 1 for a sequential stage.
	Workers int `json:"workers"`
	// EventTime is true for a stage with an event-time watermark: a
	// [Window] (not over [ProcessingTime]) or a [JoinWindow]. Its
	// watermark per source partition is in each [PartitionSnapshot]'s
	// Watermarks.
	EventTime bool `json:"eventTime"`
	// Watermark is the stage's watermark, in milliseconds since the Unix
	// epoch (as a record's Timestamp), when HasWatermark: before an event
	// time reached the stage it has none. With its state kept per source
	// partition (an [Assignable] source), each partition has a watermark
	// of its own and this is the least of them. Read while Run runs, as
	// PartitionSnapshot.Watermarks.
	Watermark    int64 `json:"watermarkMs"`
	HasWatermark bool  `json:"hasWatermark"`
	// InPerSecond and OutPerSecond are records in and out per second.
	InPerSecond  float64 `json:"inPerSecond"`
	OutPerSecond float64 `json:"outPerSecond"`
	// BusyMsPerSecond, BackPressuredMsPerSecond and IdleMsPerSecond are
	// milliseconds of each second, 0 to 1000.
	BusyMsPerSecond          float64 `json:"busyMsPerSecond"`
	BackPressuredMsPerSecond float64 `json:"backPressuredMsPerSecond"`
	IdleMsPerSecond          float64 `json:"idleMsPerSecond"`
}

// PartitionSnapshot is one source partition in a [Snapshot].
type PartitionSnapshot struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Position is the partition's lowest offset not yet finished: where
	// the pipeline resumes if it stops now, what the next checkpoint saves.
	Position int64 `json:"position"`
	// HighWatermark is the next offset of the partition, when the source
	// tells it ([HighWatermarker]; HasHighWatermark), else 0.
	HighWatermark    int64 `json:"highWatermark"`
	HasHighWatermark bool  `json:"hasHighWatermark"`
	// Lag is HighWatermark minus Position (never negative), 0 when the
	// high watermark is not known.
	Lag int64 `json:"lag"`
	// InFlight is how many offsets lie between the position and one past
	// the highest offset read: the records begun and not known finished.
	InFlight int `json:"inFlight"`
	// RecordsPerSecond is how fast the position moved over the last
	// sample interval, in offsets per second.
	RecordsPerSecond float64 `json:"recordsPerSecond"`
	// LastProgress is when the position was last seen to move (on the
	// pipeline's clock), and SinceProgress how long before the snapshot.
	LastProgress  time.Time     `json:"lastProgress"`
	SinceProgress time.Duration `json:"sinceProgressNs"`
	// Stalled is set while the partition is stalled ([StallAfter]): it
	// is behind and its position has not moved for the limit, since
	// StalledSince.
	Stalled      bool      `json:"stalled"`
	StalledSince time.Time `json:"stalledSince,omitzero"`
	// Watermarks are the partition's watermarks in the pipeline's
	// event-time stages (StageSnapshot.EventTime), one per such stage in
	// pipeline order, empty in a pipeline without one.
	Watermarks []PartitionWatermark `json:"watermarks"`
}

// PartitionWatermark is one source partition's watermark in one
// event-time stage ([Window], [JoinWindow]), in a [PartitionSnapshot].
//
// A stage's watermark is the least of its partitions' (less those idle),
// so the partition whose watermark is lowest is the one holding the
// stage's windows back. They are read while Run runs, without waiting for
// a stage that is busy handing results on: then the figures are those the
// stage last gave (at most a push or a second old), and after Run returns
// those of its last snapshot.
type PartitionWatermark struct {
	// Stage and Index name the stage, as in [StageSnapshot].
	Stage string `json:"stage"`
	Index int    `json:"index"`
	// Watermark is the partition's watermark in the stage, in
	// milliseconds since the Unix epoch, when HasWatermark: its greatest
	// event time that reached the stage less [OutOfOrderness] (with the
	// state kept per partition, an [Assignable] source's: the watermark
	// its records are judged against). HasWatermark is false until an
	// event time of the partition reached the stage (its records may all
	// have been filtered out before it).
	Watermark    int64 `json:"watermarkMs"`
	HasWatermark bool  `json:"hasWatermark"`
	// Idle is true while the stage counts the partition idle
	// ([Idleness]): silent for the Idleness and caught up with its
	// source, it does not hold the stage's watermark back.
	Idle bool `json:"idle"`
}

// CheckpointSnapshot is one round of checkpoint saves in a [Snapshot].
type CheckpointSnapshot struct {
	// At is when the round began, on the pipeline's clock; Duration how
	// long it took (wall time).
	At       time.Time     `json:"at"`
	Duration time.Duration `json:"durationNs"`
	// Positions are the positions it saved (or failed to save).
	Positions []checkpoint.TopicPosition `json:"positions"`
	// StateBytes is the size of the last state snapshot saved by then, 0
	// for a pipeline without stateful stages.
	StateBytes int64 `json:"stateBytes"`
	// Err is the error of a round that failed (the pipeline then stops),
	// "" for one that saved.
	Err string `json:"error,omitempty"`
}

// ErrorSnapshot is one failure of a stage function or sink in a
// [Snapshot], with its record's lineage.
type ErrorSnapshot struct {
	// At is when it failed, on the pipeline's clock.
	At        time.Time `json:"at"`
	Stage     string    `json:"stage"`
	Topic     string    `json:"topic"` // "" when the record has no lineage
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Attempt   int       `json:"attempt"` // 1 for the first call, 2 for the first retry, ...
	Err       string    `json:"error"`
}

// Observer is what can tell what a pipeline is doing: every *[Stream]
// (Observe's result is the same whichever Stream of a pipeline is asked).
// Package web serves it.
type Observer interface {
	Observe() Snapshot
}

// Observe returns what the pipeline is doing: its stages' counts and rates,
// its source partitions with their positions, lag and stalls, its last 10
// checkpoints and its last 10 errors (see [Snapshot]). It may be called at
// any time, from any goroutine, also before and after Run; before Run the
// rates and partitions are empty. The first call turns on the timing of
// the stages' batches (busy, back-pressured, idle): call it once before
// Run for figures from the start. Stage counts are read at the call;
// rates and partitions are those of the last sample, taken every second
// while Run runs (and once more as it returns).
func (s *Stream[T]) Observe() Snapshot {
	return s.p.observe()
}

// observer is a pipeline's observation: the last sample and the rings of
// checkpoints and errors. Its zero value is ready.
type observer struct {
	// timing is set by the first Observe: from then on the stages time
	// their batches (chainTimed), which costs a pipeline nobody observes
	// nothing but an atomic load per stage and batch.
	timing atomic.Bool

	mu     sync.Mutex
	clock  Clock
	rates  []stageRates
	wms    []wmCopy // the event-time stages' watermarks, last read
	parts  []PartitionSnapshot
	states map[telPartition]*partitionWatch
	cps    []CheckpointSnapshot
	errs   []ErrorSnapshot
}

// stageRates are a stage's rates of the last sample, and the counters they
// were taken from.
type stageRates struct {
	in, out          int64
	push, hand       timerRead
	inPS, outPS      float64
	busy, back, idle float64
}

// partitionWatch is what the observer remembers of a partition between
// samples.
type partitionWatch struct {
	pos          int64
	lastMove     time.Time // the position was last seen to move
	waitingSince time.Time // the stall clock: since it last moved or was caught up
	stalled      bool
	stalledSince time.Time
}

// stallLimit returns the stall limit in force, 0 when off.
func (c observeConfig) stallLimit() time.Duration {
	switch {
	case c.stallAfter < 0:
		return 0
	case c.stallAfter == 0:
		return DefaultStallAfter
	}
	return c.stallAfter
}

func (c observeConfig) log() *slog.Logger {
	if c.logger != nil {
		return c.logger
	}
	return slog.Default()
}

func (p *pipeline) observe() Snapshot {
	o := &p.obs
	o.timing.Store(true)
	snap := Snapshot{Running: p.running.Load() != nil}
	o.mu.Lock()
	defer o.mu.Unlock()
	clock := o.clock
	if clock == nil {
		clock = p.cfg.clock
	}
	snap.Time = clock.Now()
	snap.StallAfter = p.cfg.observe.stallLimit()
	snap.Stages = make([]StageSnapshot, len(p.stages))
	rt := p.running.Load()
	if rt != nil {
		o.wms = readWatermarks(rt, o.wms[:0])
	}
	for i, c := range p.stages {
		left := c.left.Load() // before In: In - left is never below 0
		if c.oneToOne {
			left += c.out.Load()
		}
		st := StageSnapshot{StageStats: c.snapshot(), Index: i, Workers: max(c.workers, 1), Timed: c.timed,
			IdleMsPerSecond: 1000, EventTime: c.eventTime}
		st.InFlight = max(st.In-left, 0)
		for _, w := range o.wms {
			if w.idx == i && w.stage != math.MinInt64 {
				st.Watermark, st.HasWatermark = w.stage, true
			}
		}
		if i < len(o.rates) {
			r := o.rates[i]
			st.InPerSecond, st.OutPerSecond = r.inPS, r.outPS
			st.BusyMsPerSecond, st.BackPressuredMsPerSecond, st.IdleMsPerSecond = r.busy, r.back, r.idle
		}
		snap.Stages[i] = st
	}
	snap.Partitions = append([]PartitionSnapshot{}, o.parts...) // [] in JSON before the first sample, as the others
	if rt != nil {
		refreshPartitions(rt, snap.Partitions)
	}
	for i := range snap.Partitions {
		ps := &snap.Partitions[i]
		ps.SinceProgress = max(snap.Time.Sub(ps.LastProgress), 0)
		ps.Watermarks = partitionWatermarks(p, o.wms, telPartition{ps.Topic, ps.Partition})
	}
	snap.Checkpoints = make([]CheckpointSnapshot, len(o.cps))
	for i, cp := range o.cps {
		cp.Positions = append([]checkpoint.TopicPosition(nil), cp.Positions...)
		snap.Checkpoints[i] = cp
	}
	snap.Errors = append([]ErrorSnapshot{}, o.errs...)
	return snap
}

// readWatermarks appends to dst the watermarks of rt's event-time stages,
// in pipeline order.
func readWatermarks(rt *runtime, dst []wmCopy) []wmCopy {
	for _, s := range rt.stateful {
		if w, ok := s.(watermarkStage); ok {
			if c := w.watermarks(); c.taken && rt.p.stages[c.idx].eventTime {
				dst = append(dst, c)
			}
		}
	}
	slices.SortFunc(dst, func(a, b wmCopy) int { return cmp.Compare(a.idx, b.idx) })
	return dst
}

// partitionWatermarks returns partition tp's watermark in each event-time
// stage of wms, and in those whose copy does not have it yet (no record
// of it reached them) none: one per stage, so that the page's columns
// line up.
func partitionWatermarks(p *pipeline, wms []wmCopy, tp telPartition) []PartitionWatermark {
	out := []PartitionWatermark{}
	for _, w := range wms {
		pw := PartitionWatermark{Stage: p.stages[w.idx].name, Index: w.idx}
		for _, part := range w.parts {
			if part.pk.topic == tp.topic && part.pk.partition == tp.partition {
				pw.Idle = part.idle
				if part.wm != math.MinInt64 {
					pw.Watermark, pw.HasWatermark = part.wm, true
				}
				break
			}
		}
		out = append(out, pw)
	}
	return out
}

// refreshPartitions sets the position, high watermark, lag and records in
// flight of parts (those of the last sample) to what they are now, so that
// a snapshot shows a lag at once rather than up to a sample later; rates
// and stalls stay the sample's.
func refreshPartitions(rt *runtime, parts []PartitionSnapshot) {
	if len(parts) == 0 {
		return
	}
	var hws []HighWatermarker
	for _, src := range rt.p.sources {
		if hw, ok := src.(HighWatermarker); ok {
			hws = append(hws, hw)
		}
	}
	byKey := make(map[telPartition]*PartitionSnapshot, len(parts))
	for i := range parts {
		byKey[telPartition{parts[i].Topic, parts[i].Partition}] = &parts[i]
	}
	for _, pt := range rt.tracker.Partitions(nil) {
		ps := byKey[telPartition{pt.Topic(), pt.ID()}]
		if ps == nil {
			continue
		}
		low, _, ok := pt.Progress()
		if !ok {
			continue
		}
		ps.Position, ps.InFlight = low, pt.InFlight()
		for _, h := range hws {
			if hw, ok := h.HighWatermark(pt.Topic(), pt.ID()); ok {
				ps.HighWatermark, ps.HasHighWatermark, ps.Lag = hw, true, max(hw-low, 0)
				break
			}
		}
	}
}

// startObserving starts the goroutine that samples the pipeline every
// second (on a wall-clock ticker; times are read on the pipeline's clock)
// and returns the function that stops it, after one last sample.
func (rt *runtime) startObserving() (stop func()) {
	o := &rt.p.obs
	o.mu.Lock()
	o.clock = rt.clock
	o.mu.Unlock()
	if m := rt.p.cfg.observe.monitor; m != nil {
		m.p.Store(rt.p)
	}
	var hws []HighWatermarker
	for _, src := range rt.p.sources {
		if hw, ok := src.(HighWatermarker); ok {
			hws = append(hws, hw)
		}
	}
	s := &sampler{rt: rt, hws: hws, last: time.Now()}
	s.sample()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(observeEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				s.sample()
			case <-quit:
				s.sample()
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// sampler takes the samples of one Run.
type sampler struct {
	rt    *runtime
	hws   []HighWatermarker
	last  time.Time // wall time of the last sample, for the stage rates
	parts []*checkpoint.PartitionTracker
}

// sample reads every stage's counters and every partition's progress,
// computes the rates since the last sample, and flags or clears stalls.
func (s *sampler) sample() {
	rt, o := s.rt, &s.rt.p.obs
	wall := time.Now()
	elapsed := wall.Sub(s.last)
	s.last = wall
	now := rt.clock.Now()
	limit := rt.p.cfg.observe.stallLimit()
	s.parts = rt.tracker.Partitions(s.parts[:0])
	type reading struct {
		pt              *checkpoint.PartitionTracker
		low, hwm        int64
		hasHwm, started bool
		inFlight        int
	}
	reads := make([]reading, 0, len(s.parts))
	for _, pt := range s.parts {
		r := reading{pt: pt}
		r.low, _, r.started = pt.Progress()
		if !r.started {
			continue
		}
		r.inFlight = pt.InFlight()
		for _, h := range s.hws {
			if hw, ok := h.HighWatermark(pt.Topic(), pt.ID()); ok {
				r.hwm, r.hasHwm = hw, true
				break
			}
		}
		reads = append(reads, r)
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.rates) < len(rt.p.stages) {
		o.rates = append(o.rates, make([]stageRates, len(rt.p.stages)-len(o.rates))...)
	}
	// Over a second at least: the first sample and the last (as Run
	// returns) may follow the one before by a moment, and a handful of
	// records over a microsecond is no rate to show.
	elapsed = max(elapsed, observeEvery)
	secs := elapsed.Seconds()
	mono := monoNow()
	for i, c := range rt.p.stages {
		r := &o.rates[i]
		in, out := c.in.Load(), c.out.Load()
		push, hand := c.push.read(mono, &r.push), c.handOn.read(mono, &r.hand)
		r.inPS, r.outPS = float64(in-r.in)/secs, float64(out-r.out)/secs
		dPush, dHand := float64(push.ns-r.push.ns), float64(hand.ns-r.hand.ns)
		// A push that spans the whole interval (a handler blocked on a
		// record, a next stage that takes nothing) was not timed to its
		// end yet: the interval was all of it.
		if push.spanning {
			dPush = max(dPush, float64(elapsed.Nanoseconds()))
		}
		if hand.spanning {
			dHand = max(dHand, float64(elapsed.Nanoseconds()))
		}
		per := float64(time.Second.Nanoseconds()) / float64(elapsed.Nanoseconds()) / 1e6 // ns -> ms per second
		if c.workers > 1 || c.detached {
			r.busy, r.back = dPush*per, dHand*per
		} else {
			r.busy, r.back = (dPush-dHand)*per, dHand*per
		}
		r.busy, r.back = min(max(r.busy, 0), 1000), min(max(r.back, 0), 1000)
		if r.busy+r.back > 1000 {
			r.back = 1000 - r.busy
		}
		r.idle = 1000 - r.busy - r.back
		r.in, r.out, r.push, r.hand = in, out, push, hand
	}

	if o.states == nil {
		o.states = make(map[telPartition]*partitionWatch)
	}
	prev := make(map[telPartition]float64, len(o.parts))
	for _, p := range o.parts {
		prev[telPartition{p.Topic, p.Partition}] = float64(p.Position)
	}
	o.parts = o.parts[:0]
	log := rt.p.cfg.observe.log()
	for _, r := range reads {
		key := telPartition{r.pt.Topic(), r.pt.ID()}
		w, seen := o.states[key]
		if !seen {
			w = &partitionWatch{pos: r.low, lastMove: now, waitingSince: now}
			o.states[key] = w
		}
		ps := PartitionSnapshot{Topic: key.topic, Partition: key.partition, Position: r.low,
			HighWatermark: r.hwm, HasHighWatermark: r.hasHwm, InFlight: r.inFlight}
		if r.hasHwm {
			ps.Lag = max(r.hwm-r.low, 0)
		}
		if p, ok := prev[key]; ok {
			ps.RecordsPerSecond = max(float64(r.low)-p, 0) / secs
		}
		behind := ps.Lag > 0 || (!r.hasHwm && r.inFlight > 0)
		moved := r.low != w.pos
		if moved {
			w.pos, w.lastMove = r.low, now
		}
		if moved || !behind {
			w.waitingSince = now
			if w.stalled {
				w.stalled = false
				log.Info("stream: partition resumed", "topic", key.topic, "partition", key.partition,
					"position", r.low, "lag", ps.Lag, "stalledFor", now.Sub(w.stalledSince))
			}
		} else if limit > 0 && !w.stalled && now.Sub(w.waitingSince) >= limit {
			w.stalled, w.stalledSince = true, now
			log.Warn("stream: partition stalled: behind and no progress", "topic", key.topic, "partition", key.partition,
				"position", r.low, "lag", ps.Lag, "inFlight", r.inFlight, "since", w.lastMove, "limit", limit)
		}
		ps.LastProgress, ps.Stalled = w.lastMove, w.stalled
		if w.stalled {
			ps.StalledSince = w.stalledSince
		}
		o.parts = append(o.parts, ps)
	}
	sort.Slice(o.parts, func(i, j int) bool {
		a, b := o.parts[i], o.parts[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
}

// stalled reports whether the partition is marked stalled, for the metric
// MetricPartitionStalled.
func (o *observer) stalled(topic string, partition int32) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	w := o.states[telPartition{topic, partition}]
	return w != nil && w.stalled
}

// noteCheckpoint keeps a round of saves of positions that began at start
// (the pipeline's clock) and took d, with its error.
func (rt *runtime) noteCheckpoint(start time.Time, d time.Duration, positions []checkpoint.TopicPosition, err error) {
	cp := CheckpointSnapshot{At: start, Duration: d, StateBytes: rt.stateBytes.Load(),
		Positions: append([]checkpoint.TopicPosition(nil), positions...)}
	if err != nil {
		cp.Err = err.Error()
	}
	o := &rt.p.obs
	o.mu.Lock()
	o.cps = appendRing(o.cps, cp)
	o.mu.Unlock()
}

// noteFailure keeps a failed call of a stage function or sink.
func (rt *runtime) noteFailure(f Failure) {
	e := ErrorSnapshot{At: rt.clock.Now(), Stage: f.Stage, Topic: f.Topic, Partition: f.Partition,
		Offset: f.Offset, Attempt: f.Attempt}
	if f.Err != nil {
		e.Err = f.Err.Error()
	}
	o := &rt.p.obs
	o.mu.Lock()
	o.errs = appendRing(o.errs, e)
	o.mu.Unlock()
}

// appendRing appends v to s, dropping the oldest beyond keepObserved.
func appendRing[E any](s []E, v E) []E {
	if len(s) >= keepObserved {
		copy(s, s[1:])
		s = s[:keepObserved-1]
	}
	return append(s, v)
}

// chainTimed is chain for a stage with counters: it measures, once per
// batch, the time the stage spends in its push (pushNs) and the time it
// spends handing batches on to the next stage (handOnNs), for the busy,
// back-pressured and idle times of [StageSnapshot]. workers is the stage's
// number of goroutines (Parallel, KeyOrdered), 1 or 0 for a sequential one.
//
// Between two timed stages one timedOutlet does both: the time the upper
// one spends handing a batch on is the time the lower one spends in its
// push. The stages are wired from the end of the pipeline up, so the lower
// one's timer exists when the upper one is wired.
func chainTimed[T, U any](s *Stream[T], ctr *stageCounters, workers int, stage func(rt *runtime, down outlet[U]) outlet[T]) *Stream[U] {
	ctr.workers, ctr.timed = workers, true
	return chain(s, func(rt *runtime, down outlet[U]) outlet[T] {
		return timeStage(rt, ctr, down, stage)
	})
}

// timeStage builds a stage with stage, for rt, as chainTimed does: with
// its push timed into ctr.pushNs and its handing on to down into
// ctr.handOnNs. For the stages wired without chain (a join with a
// table); the caller sets ctr.timed.
func timeStage[T, U any](rt *runtime, ctr *stageCounters, down outlet[U], stage func(rt *runtime, down outlet[U]) outlet[T]) outlet[T] {
	on := &rt.p.obs.timing
	switch t := down.(type) {
	case *timedOutlet[U]:
		if t.also == nil {
			t.also = &ctr.handOn
			ctr.handOn.marks.Store(&t.marks)
		} else {
			down = newTimedOutlet(down, &ctr.handOn, on)
		}
	case *terminal[U]:
		// Handing on to Run's end takes no time worth two clock reads.
	default:
		down = newTimedOutlet(down, &ctr.handOn, on)
	}
	return newTimedOutlet(stage(rt, down), &ctr.push, on)
}

// stageTimer is one of a stage's two timers (its push, its handing on):
// the nanoseconds of the pushes timed to their end, and the marks of the
// outlet whose pushes it times, which say what push is in progress.
type stageTimer struct {
	ns    atomic.Int64
	marks atomic.Pointer[pushMarks] // set when the run is wired; a later run's replaces it
}

// pushMarks are what an outlet marks of the push in progress, for a
// sample to count a push not ended yet: since is the monotonic start of a
// timed push in progress (monoNow, 0 for none; of concurrent pushes, the first),
// entered and left count the untimed pushes begun and ended.
type pushMarks struct {
	since         atomic.Int64
	entered, left atomic.Uint32
}

// timerRead is a stageTimer read by a sample: the nanoseconds spent,
// counting a timed push in progress up to the sample, whether an untimed
// push has been in progress since the sample before, and the marks read.
type timerRead struct {
	ns            int64
	spanning      bool
	entered, left uint32
}

// read reads t at now (monoNow) against prev, the read of the sample
// before. A timed push in progress counts up to now (the next read counts
// the rest: its end adds the whole push to ns). An untimed push (a small
// quick batch, see timedOutlet) in progress at both samples, with none
// begun or ended between them, spans the interval: spanning.
func (t *stageTimer) read(now int64, prev *timerRead) timerRead {
	r := timerRead{ns: t.ns.Load()}
	m := t.marks.Load()
	if m == nil {
		return r
	}
	if since := m.since.Load(); since != 0 {
		r.ns += max(now-since, 0)
	}
	r.entered, r.left = m.entered.Load(), m.left.Load()
	r.spanning = r.entered != r.left && r.entered == prev.entered && r.left == prev.left
	return r
}

// monoBase is a time with a monotonic reading: time.Since(monoBase) reads
// only the monotonic clock, half the cost of time.Now.
var monoBase = time.Now()

// monoNow returns the monotonic clock in nanoseconds since monoBase.
func monoNow() int64 { return int64(time.Since(monoBase)) }

// timedOutlet adds the duration of each push to timer, and to also when
// set (the handing on of the stage above), once on is set (the pipeline's
// first Observe). Its cost is an atomic load per batch until then; after,
// two reads of the monotonic clock and a few atomic operations per batch
// it times, two atomic adds per batch it does not, never an allocation.
// Its marks say what push is in progress, so that a sample counts a push
// that has not ended (a handler blocked on a record) as busy, not idle.
//
// It times every batch of timeEvery records or more, and every batch while
// the last one it timed took timeSlow or more; of the other batches (small
// and quick, where two clock reads would cost as much as the stage) it
// times one in timeEvery and counts its duration timeEvery times: over the
// thousands of such batches a second makes, the sum comes out the same.
type timedOutlet[T any] struct {
	next  outlet[T]
	timer *stageTimer
	also  *stageTimer
	on    *atomic.Bool
	marks pushMarks   // the push in progress; entered doubles as the count for the one in timeEvery
	quick atomic.Bool // the last batch timed took less than timeSlow
}

// newTimedOutlet returns an outlet that times its pushes to next into
// timer, and makes timer read its marks.
func newTimedOutlet[T any](next outlet[T], timer *stageTimer, on *atomic.Bool) *timedOutlet[T] {
	t := &timedOutlet[T]{next: next, timer: timer, on: on}
	timer.marks.Store(&t.marks)
	return t
}

// timeEvery and timeSlow: see timedOutlet.
const (
	timeEvery = 16
	timeSlow  = 20 * time.Microsecond
)

func (t *timedOutlet[T]) push(ctx context.Context, elems []Element[T]) error {
	if !t.on.Load() {
		return t.next.push(ctx, elems)
	}
	weight := int64(1)
	if len(elems) < timeEvery && t.quick.Load() {
		if t.marks.entered.Add(1)%timeEvery != 0 {
			err := t.next.push(ctx, elems)
			t.marks.left.Add(1)
			return err
		}
		t.marks.left.Add(1) // timed below, with since
		weight = timeEvery
	}
	start := monoNow()
	mine := t.marks.since.CompareAndSwap(0, cmp.Or(start, 1)) // 0 is none; monoNow is negative in a synctest bubble
	err := t.next.push(ctx, elems)
	end := monoNow()
	d := end - start
	t.quick.Store(d < int64(timeSlow))
	// Ended before it is added: a sample between the two misses the
	// push, and the next sample counts it whole; the other order would
	// count its part up to the sample twice.
	if mine {
		t.marks.since.Store(0)
	}
	d *= weight
	t.timer.ns.Add(d)
	if t.also != nil {
		t.also.ns.Add(d)
	}
	return err
}

func (t *timedOutlet[T]) close(ctx context.Context) error { return t.next.close(ctx) }
