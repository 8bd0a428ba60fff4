package streamtest

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/strom-dev/strom/stream"
)

// ClockStart is the time a [Clock] starts at: 2026-01-01 00:00:00 UTC.
var ClockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a fake [stream.Clock] whose time moves only when [Clock.Advance]
// says so, for testing Batch's linger, retry backoff and the checkpoint
// interval without sleeping. Install it with stream.WithClock (or
// [WithClock] for [RunPipeline]).
//
// A test waits with [Clock.WaitForTimers] until the pipeline has armed the
// timer it means to fire, then advances past it:
//
//	clock := streamtest.NewClock()
//	... stream.From(src, stream.WithClock(clock)) ..., run in a goroutine
//	clock.WaitForTimers(1)      // the linger timer is armed
//	clock.Advance(time.Second)  // and fires
//
// Mind that every timer on the clock counts, also the checkpoint interval's
// (stream.CheckpointInterval(0) turns that one off; RunPipeline does) and a
// drain timeout's.
//
// The zero value is ready to use and starts at [ClockStart]. A Clock is
// safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	elapsed time.Duration // since ClockStart
	pending []*fakeTimer  // armed, not fired or stopped
	seq     uint64        // timers made so far, to order ties
	changed chan struct{} // closed and replaced when pending changes
}

var _ stream.Clock = (*Clock)(nil)

// NewClock returns a Clock at [ClockStart] with no timers.
func NewClock() *Clock { return &Clock{} }

// Now returns the clock's current time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ClockStart.Add(c.elapsed)
}

// NewTimer returns a timer that fires when the clock reaches d after now.
// Its channel has capacity 1, so firing never waits for a reader. A d <= 0
// fires at once, as time.NewTimer does, and is never pending.
func (c *Clock) NewTimer(d time.Duration) stream.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1), due: c.elapsed + max(d, 0), seq: c.seq}
	if d <= 0 {
		t.ch <- ClockStart.Add(t.due)
		return t
	}
	c.pending = append(c.pending, t)
	c.notifyLocked()
	return t
}

// Advance moves the clock d forward and fires every timer due by then, in
// order of due time (timers due at the same time in the order they were
// made), each sending its due time. It does not wait for anyone to receive.
// Timers made while or after it runs are relative to the new time. It
// panics if d is negative: time does not run backwards.
func (c *Clock) Advance(d time.Duration) {
	if d < 0 {
		panic("streamtest: Clock.Advance with a negative duration")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elapsed += d
	var due, rest []*fakeTimer
	for _, t := range c.pending {
		if t.due <= c.elapsed {
			due = append(due, t)
		} else {
			rest = append(rest, t)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b *fakeTimer) int {
		return cmp.Or(cmp.Compare(a.due, b.due), cmp.Compare(a.seq, b.seq))
	})
	c.pending = rest
	for _, t := range due {
		t.ch <- ClockStart.Add(t.due) // capacity 1 and fired once: never blocks
	}
	c.notifyLocked()
}

// Pending returns how many timers are armed: made, not yet fired, not
// stopped.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// WaitForTimers blocks until at least n timers are pending, so that a test
// advances the clock only once the pipeline has armed its timer. It waits
// for ever if none comes; [Clock.WaitForTimersContext] takes a deadline.
func (c *Clock) WaitForTimers(n int) {
	_ = c.WaitForTimersContext(context.Background(), n)
}

// WaitForTimersContext is [Clock.WaitForTimers] that gives up when ctx is
// done, returning ctx.Err().
func (c *Clock) WaitForTimersContext(ctx context.Context, n int) error {
	for {
		c.mu.Lock()
		if len(c.pending) >= n {
			c.mu.Unlock()
			return nil
		}
		ch := c.changedLocked()
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *Clock) changedLocked() chan struct{} {
	if c.changed == nil {
		c.changed = make(chan struct{})
	}
	return c.changed
}

func (c *Clock) notifyLocked() {
	if c.changed != nil {
		close(c.changed)
		c.changed = nil
	}
}

// fakeTimer is a [Clock]'s timer.
type fakeTimer struct {
	c   *Clock
	ch  chan time.Time
	due time.Duration // since ClockStart
	seq uint64
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer and reports whether it was pending. As with
// time.Timer since Go 1.23, no value is received from C after Stop
// returns, also when the timer had fired and its value was not read.
func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.pending, t); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
		c.notifyLocked()
		return true
	}
	select {
	case <-t.ch:
	default:
	}
	return false
}
