package log

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// publishLocked makes the current end visible to readers and wakes them.
func (p *Partition) publishLocked() {
	_, n := p.segs.bounds()
	p.next.Store(n)
	p.xproc.signalFollowersLocked()
	p.waits.wake()
}

// waiters is a partition's in-process wake-ups: the channel an append
// closes for readers waiting on it (Partition.wait). Its mu is a leaf: no
// other lock is taken while it is held.
type waiters struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by the append after channel handed it out; made at open
	// used says channel handed ch out since it was made. It is atomic so an
	// append with no one waiting skips mu (wake).
	used atomic.Bool
}

// wake closes the channel channel handed out, if it handed it out since
// the last wake-up, and makes a new one. Without a waiter it does nothing:
// a new channel per append was an allocation and 60 ns of a one-record
// append (BenchmarkSegmentAppend, mmap, 64 B, 2026-12-01), and it looks at
// used before taking mu. No wake-up is lost: the append stores the new next
// offset before it looks, and a waiter marks the channel used before it
// looks at the next offset (both atomic), so either the append sees the
// mark or the waiter sees the offset.
func (w *waiters) wake() {
	if !w.used.Load() {
		return
	}
	w.mu.Lock()
	if w.used.Load() {
		close(w.ch)
		w.ch = make(chan struct{})
		w.used.Store(false)
	}
	w.mu.Unlock()
}

// channel returns a channel closed by the next append.
func (w *waiters) channel() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.used.Store(true)
	return w.ch
}

// wait blocks until HighWatermark is above offset or ctx ends. In-process
// appends wake it at once; on a read-only log another process's appends
// wake it through inotify (see follow.go), and it also looks every poll
// interval.
func (p *Partition) wait(ctx context.Context, offset int64) error {
	var tick *time.Ticker
	if p.ro.Load() {
		tick = time.NewTicker(p.cfg.pollInterval)
		defer tick.Stop()
		defer p.xproc.enterWait()()
	}
	for {
		ch := p.waits.channel() // taken before the check, so no wake-up is lost
		if p.HighWatermark() > offset {
			return nil
		}
		if p.closed.Load() {
			return fmt.Errorf("%w: topic %s partition %d", ErrClosed, p.topic, p.id)
		}
		if tick != nil && p.ro.Load() {
			p.xproc.armFollow() // watch, raise the flag, look again: likewise (follow.go)
			if p.HighWatermark() > offset {
				return nil
			}
		}
		if tick == nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		select {
		case <-ch:
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
