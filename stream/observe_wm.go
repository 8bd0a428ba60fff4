package stream

import (
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// Watermarks for Observe.
//
// An event-time stage ([Window], [JoinWindow]) keeps its watermark and its
// partitions' event times under its own lock, which it holds while it
// hands results on: a stage downstream that blocks (a handler stuck on one
// record) holds it for as long. Observe must not wait for it, so it only
// tries the lock: when it is free, Observe copies the watermarks there and
// then; when it is not, Observe shows the last copy taken and asks the
// stage (one atomic flag) for a fresh one, which the stage takes at its
// next push, with its lock held. A pipeline nobody observes pays one
// atomic load per push.

// watermarkStage is an event-time stage, as Observe sees it.
type watermarkStage interface {
	// watermarks returns a copy of the stage's watermarks: taken now when
	// its lock is free, else the last one taken.
	watermarks() wmCopy
}

// wmCopy is a copy of an event-time stage's watermarks.
type wmCopy struct {
	idx   int   // the stage's place in pipeline.stages
	taken bool  // a copy was taken: stage and parts are the stage's
	stage int64 // the stage's watermark, ms; math.MinInt64 before any
	parts []wmPart
}

// wmPart is one source partition's watermark in an event-time stage.
type wmPart struct {
	pk   partKey
	wm   int64 // ms; math.MinInt64 before an event time of it reached the stage
	idle bool
}

// wmView is the last copy of an event-time stage's watermarks, and the
// flag that asks the stage for a fresh one.
type wmView struct {
	want atomic.Bool // Observe found the stage's lock taken
	mu   sync.Mutex  // guards last
	last wmCopy
}

// read returns the stage's watermarks: fill's copy, taken now under lock
// if it is free, else the last copy (and the stage is asked for a fresh
// one).
func (v *wmView) read(lock *sync.Mutex, fill func(*wmCopy)) wmCopy {
	if lock.TryLock() {
		v.publishLocked(fill)
		lock.Unlock()
	} else {
		v.want.Store(true)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.last
	c.parts = slices.Clone(c.parts)
	return c
}

// publishLocked takes a copy with fill; the stage's lock is held.
func (v *wmView) publishLocked(fill func(*wmCopy)) {
	v.want.Store(false)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.last.parts = v.last.parts[:0]
	fill(&v.last)
	v.last.taken = true
}

// partWatermarks appends to c the watermark of each source partition of
// core's: its greatest event time less outOfOrder, and whether the stage
// counts it idle ([Idleness]) as of its last look.
func partWatermarks(c *wmCopy, core *stateCore, outOfOrder int64) {
	for _, ps := range core.list {
		if ps.pk.topic == "" {
			continue // no source partition: an input without lineage, a join's side
		}
		wm := int64(math.MinInt64)
		if ps.maxTs != math.MinInt64 {
			wm = ps.maxTs - outOfOrder
		}
		c.parts = append(c.parts, wmPart{pk: ps.pk, wm: wm, idle: ps.idle})
	}
}

func (st *windowStage[K, T, A]) watermarks() wmCopy {
	return st.wmv.read(&st.mu, st.fillWatermarks)
}

// fillWatermarks copies the watermarks into c; st.mu is held. With a
// table per partition (an Assignable source), a partition's watermark is
// its table's, and the stage's the least of theirs.
func (st *windowStage[K, T, A]) fillWatermarks(c *wmCopy) {
	c.idx = st.core.ctr.idx
	if !st.core.partitioned {
		c.stage = st.one.wm
		partWatermarks(c, &st.core, st.cfg.outOfOrder)
		return
	}
	c.stage = math.MinInt64
	first := true
	for _, tb := range st.tables {
		if tb.wm != math.MinInt64 && (first || tb.wm < c.stage) {
			c.stage, first = tb.wm, false
		}
	}
	partWatermarks(c, &st.core, st.cfg.outOfOrder)
	for i := range c.parts {
		if tb := st.tables[c.parts[i].pk]; tb != nil && tb.wm != math.MinInt64 {
			c.parts[i].wm = tb.wm
		}
	}
}

func (st *joinStage[K, L, R, U]) watermarks() wmCopy {
	return st.wmv.read(&st.mu, st.fillWatermarks)
}

// fillWatermarks copies the watermarks into c; st.mu is held.
func (st *joinStage[K, L, R, U]) fillWatermarks(c *wmCopy) {
	c.idx = st.core.ctr.idx
	c.stage = st.wm
	partWatermarks(c, &st.core, st.cfg.outOfOrder)
}
