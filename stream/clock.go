package stream

import "time"

// Clock is the pipeline's source of time: Batch's linger, retry backoff and
// the checkpoint interval all wait on it. The default is the wall clock;
// tests install a fake (streamtest.Clock) with [WithClock] to step time by
// hand.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d after now.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a [Clock].
type Timer interface {
	// C returns the channel the time is sent on when the timer fires.
	C() <-chan time.Time
	// Stop stops the timer; it reports whether it stopped it before it fired.
	Stop() bool
}

// WallClock is the [Clock] of package time, the default.
type WallClock struct{}

// Now returns time.Now().
func (WallClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (WallClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }
