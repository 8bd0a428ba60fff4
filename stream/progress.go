package stream

import (
	"context"
	"sync"
	"time"
)

// Progress within a batch, and stopping within one.
//
// A source hands out batches as the log gives them (256 KiB, or 500
// lines), and a sequential stage runs its function over a whole batch
// before it hands the batch on. A record counts as finished only when it
// has been through every stage, so with a handler that takes milliseconds
// a batch of thousands of records would finish, and its positions move,
// all at once, seconds after its first record: a consumer killed more
// often than that would replay from the same position forever.
//
// So a sequential stage watches the runtime's progress generation (gen)
// between records (one atomic load and a comparison, in a loop kept apart
// so it holds few values across the function's calls): one goroutine of
// the process moves it every splitTick while the pipeline runs, and a
// stage that has worked on one batch while it moved twice (10 to 20 ms)
// hands on what it has finished so far and goes on with the rest. Records
// then finish, and positions advance, every 20 ms at most whatever the
// batch size, while a fast pipeline (a batch in well under 10 ms) almost
// never splits a batch and pays one atomic load per record for the check:
// no allocation, no clock reading per record. Splitting is by wall time
// (not [WithClock]'s clock): it is about latency, not about what a
// pipeline computes, and a fake clock must not leave a pipeline stuck on
// a batch.
//
// The same word carries the halt: when the stages' context ends (Run's
// context is cancelled and the drain timeout, if any, has passed, or the
// pipeline failed), haltBit is set, and a stage stops calling its
// function at the next record: the records it finished are handed on, the
// rest are abandoned unsaved. Run then returns within one call of the
// function plus the drain timeout, instead of after the rest of the batch.
// The bit is set by context.AfterFunc, on a goroutine of its own, so a few
// fast records may still be handled in the microseconds it takes to run:
// reading the context per record instead (ctx.Err()) made the three-stage
// pipeline 91 instructions a record dearer (callgrind), a tax on every
// pipeline for a cancel that is asynchronous anyway.

const (
	// splitTick is how often gen moves while Run runs. A stage splits a
	// batch after two moves: after 10 to 20 ms of work on it.
	splitTick = 10 * time.Millisecond
	// splitAfter is how many moves of gen a stage waits before it splits.
	splitAfter = 2
	// haltBit is set in gen when the stages' context has ended. gen - g0
	// is then at least splitAfter for any g0 taken before, so the check
	// between records stays one comparison.
	haltBit = uint64(1) << 63
)

// startProgress registers rt with the process's progress ticker, which
// moves rt.gen every splitTick, and sets haltBit when the stages' context
// ends; the returned function undoes both.
func (rt *runtime) startProgress() (stop func()) {
	stopHalt := context.AfterFunc(rt.stageCtx, rt.halt)
	ticker.add(rt)
	return func() {
		stopHalt()
		ticker.remove(rt)
	}
}

// ticker is the one goroutine of the process that moves the gen of every
// running pipeline: a service running many pipelines wakes up once per
// splitTick, not once per pipeline, and not at all while none runs.
var ticker progressTicker

type progressTicker struct {
	mu   sync.Mutex
	rts  map[*runtime]struct{}
	stop chan struct{} // closes the goroutine; nil while none runs
	// changed is broadcast after every tick and every halt, for tests
	// that wait on the ticker's state (export_test.go); nil until asked.
	changed *sync.Cond
}

// changedLocked returns the condition broadcast after every tick and halt.
func (t *progressTicker) changedLocked() *sync.Cond {
	if t.changed == nil {
		t.changed = sync.NewCond(&t.mu)
	}
	return t.changed
}

func (t *progressTicker) add(rt *runtime) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.rts == nil {
		t.rts = make(map[*runtime]struct{})
	}
	t.rts[rt] = struct{}{}
	if t.stop == nil {
		t.stop = make(chan struct{})
		go t.run(t.stop)
	}
}

func (t *progressTicker) remove(rt *runtime) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.rts, rt)
	if len(t.rts) == 0 && t.stop != nil {
		close(t.stop)
		t.stop = nil
	}
}

func (t *progressTicker) run(stop <-chan struct{}) {
	tk := time.NewTicker(splitTick)
	defer tk.Stop()
	for {
		select {
		case <-tk.C:
			t.mu.Lock()
			for rt := range t.rts {
				rt.gen.Add(1)
			}
			if t.changed != nil {
				t.changed.Broadcast()
			}
			t.mu.Unlock()
		case <-stop:
			return
		}
	}
}

// halt tells the stages to stop calling their functions.
func (rt *runtime) halt() {
	for {
		g := rt.gen.Load()
		if g&haltBit != 0 || rt.gen.CompareAndSwap(g, g|haltBit) {
			break
		}
	}
	ticker.mu.Lock()
	if ticker.changed != nil {
		ticker.changed.Broadcast()
	}
	ticker.mu.Unlock()
}

// halted reports whether the stages must stop calling their functions.
func (rt *runtime) halted() bool { return rt.gen.Load()&haltBit != 0 }
