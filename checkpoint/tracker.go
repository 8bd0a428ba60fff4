package checkpoint

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// DefaultMaxInFlight is the default bound of a [PartitionTracker]: how many
// offsets of one partition may be begun and not yet finished at once
// (65,536). Beyond it Begin blocks (back-pressure) instead of growing. At 8
// bytes a slot, a full partition tracker holds 512 KiB; see
// BenchmarkTrackerMemory for the measured figure at a million in flight.
const DefaultMaxInFlight = 1 << 16

// minSlots is the ring size a partition tracker starts with; it doubles up
// to the bound as more records are in flight at once.
const minSlots = 256

// Tracker is the completion tracker of a pipeline: for each topic-partition
// it knows which records were handed out (begun) and which finished, and
// gives the position a checkpoint may save, the lowest offset below which
// every record has finished. Records may finish in any order (parallel
// stages, filters, splits, batches); the position only ever advances over a
// prefix of finished records, so no saved position is ever past a record
// that has not finished: the at-least-once rule.
//
// The zero value is not usable; build one with [NewTracker]. A Tracker is
// safe for concurrent use.
type Tracker struct {
	maxInFlight int

	mu    sync.Mutex
	parts []*PartitionTracker // in creation order; guarded by mu
}

// NewTracker returns a tracker whose partitions hold at most maxInFlight
// unfinished records each; maxInFlight <= 0 means [DefaultMaxInFlight].
func NewTracker(maxInFlight int) *Tracker {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlight
	}
	return &Tracker{maxInFlight: maxInFlight}
}

// Partition returns the tracker of topic-partition, creating it on first
// use. Callers on a hot path keep the result rather than asking per record.
func (t *Tracker) Partition(topic string, partition int32) *PartitionTracker {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.parts {
		if p.partition == partition && p.topic == topic {
			return p
		}
	}
	p := t.newPartition(topic, partition)
	t.parts = append(t.parts, p)
	return p
}

func (t *Tracker) newPartition(topic string, partition int32) *PartitionTracker {
	p := &PartitionTracker{topic: topic, partition: partition, max: nextPow2(t.maxInFlight), limit: int64(t.maxInFlight)}
	p.room = sync.NewCond(&p.mu)
	return p
}

// Replace gives topic-partition a new, empty tracker, which [Tracker.Partition]
// returns from then on, and returns it: a consumer-group member that is
// assigned a partition again starts it afresh, at the group's commit,
// while records of its earlier assignment may still hold the old tracker
// (revoked: see [PartitionTracker.Revoke]).
func (t *Tracker) Replace(topic string, partition int32) *PartitionTracker {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.newPartition(topic, partition)
	for i, old := range t.parts {
		if old.partition == partition && old.topic == topic {
			t.parts[i] = p
			return p
		}
	}
	t.parts = append(t.parts, p)
	return p
}

// Partitions appends every partition tracker created so far to dst, in
// creation order, and returns the extended slice.
func (t *Tracker) Partitions(dst []*PartitionTracker) []*PartitionTracker {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(dst, t.parts...)
}

// PartitionTracker tracks the records of one topic-partition. Offsets are
// begun in increasing order (gaps allowed: an offset never begun counts as
// finished); each begun offset owes one completion, more after [Split]. It
// keeps a ring of 8 bytes per offset between the position and the highest
// offset begun, growing in powers of two up to the tracker's bound.
type PartitionTracker struct {
	topic     string
	partition int32
	max       int   // ring size bound, a power of two
	limit     int64 // the bound itself: offsets in flight span less than this

	mu   sync.Mutex
	room *sync.Cond // signalled when the position advances or the tracker is reset

	// Offsets in [base, end) are tracked in ring[(off)&(len(ring)-1)]:
	// count is the completions still owed (0 = finished), epoch the
	// record's epoch. Below base everything finished.
	ring    []slot
	base    int64
	end     int64
	started bool    // anything begun since creation
	moved   bool    // the position advanced at least once
	epoch   int32   // epoch of the record at base-1; NoEpoch when unknown
	begun   int64   // records begun since creation, for Progress
	topicID TopicID // SetTopicID: saved with the position; zero when unknown

	// owing counts the slots that owe completions; abandoned those of
	// them given up by Abandon. A revoked tracker is settled when they
	// are equal.
	owing, abandoned int64
	revoked          atomic.Bool
}

// abandonBit marks a slot abandoned in its count: the count stays non-zero
// whatever completions follow, so the position never passes it.
const abandonBit = 1 << 30

type slot struct {
	count int32
	epoch int32
}

// Topic returns the topic the tracker tracks.
func (p *PartitionTracker) Topic() string { return p.topic }

// ID returns the partition the tracker tracks.
func (p *PartitionTracker) ID() int32 { return p.partition }

// TryBegin registers the records at offsets (increasing, and above every
// offset begun before), each with the epoch at the same index of epochs,
// and returns how many of them it registered: all of them unless the
// tracker is full, in which case a prefix (possibly none). Each registered
// record owes one completion ([PartitionTracker.Done]). An offset below one
// begun earlier (a source that stepped back after the log was truncated)
// registers nothing until every record in flight has finished, then starts
// over there: call [PartitionTracker.WaitRoom] and try again.
func (p *PartitionTracker) TryBegin(offsets []int64, epochs []int32) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, off := range offsets {
		if !p.beginLocked(off, epochs[i]) {
			p.begun += int64(i)
			return i
		}
	}
	p.begun += int64(len(offsets))
	return len(offsets)
}

// beginLocked registers one record, growing the ring when it can, and
// reports whether it did.
func (p *PartitionTracker) beginLocked(off int64, epoch int32) bool {
	if !p.started {
		p.started, p.base, p.end, p.epoch = true, off, off, NoEpoch
	}
	if off < p.end {
		// The source stepped back. Only an empty tracker can start over.
		p.advanceLocked()
		if p.base < p.end {
			return false
		}
		p.base, p.end = off, off
	}
	if off-p.base >= p.limit {
		p.advanceLocked()
		if off-p.base >= p.limit && p.base < p.end {
			return false // full: the records in flight span the bound
		}
	}
	for off-p.base >= int64(len(p.ring)) {
		p.advanceLocked()
		if off-p.base < int64(len(p.ring)) {
			break
		}
		if p.base == p.end && off > p.end {
			// Nothing in flight: every offset below off finished or was
			// never begun, so the gap is crossed without slots for it. A
			// gap wider than the bound (a compacted topic) would otherwise
			// wait for room forever.
			p.base, p.end, p.epoch, p.moved = off, off, epoch, true
			continue
		}
		if !p.growLocked(off - p.base + 1) {
			return false
		}
	}
	mask := int64(len(p.ring) - 1)
	for o := p.end; o < off; o++ { // a gap: never begun, so finished
		p.ring[o&mask] = slot{count: 0, epoch: epoch}
	}
	p.ring[off&mask] = slot{count: 1, epoch: epoch}
	p.end = off + 1
	p.owing++
	return true
}

// growLocked doubles the ring until it holds need slots, keeping [base,
// end); it reports false at the bound.
func (p *PartitionTracker) growLocked(need int64) bool {
	n := max(len(p.ring), min(minSlots, p.max))
	for int64(n) < need {
		n *= 2
	}
	if n > p.max {
		return false
	}
	ring := make([]slot, n)
	if len(p.ring) > 0 {
		om, nm := int64(len(p.ring)-1), int64(n-1)
		for o := p.base; o < p.end; o++ {
			ring[o&nm] = p.ring[o&om]
		}
	}
	p.ring = ring
	return true
}

// WaitRoom blocks until the tracker can begin offset: the ring has room for
// it, or, for an offset below one begun earlier, every record in flight has
// finished. It returns ctx's error when ctx ends first.
func (p *PartitionTracker) WaitRoom(ctx context.Context, offset int64) error {
	defer p.wakeWhenDone(ctx)()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		p.advanceLocked()
		switch {
		case !p.started, p.revoked.Load():
			return nil
		case offset < p.end:
			if p.base == p.end {
				return nil
			}
		case offset-p.base < p.limit, p.base == p.end:
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		p.room.Wait()
	}
}

// wakeWhenDone wakes the waiters on p.room when ctx ends, so that they see
// ctx.Err(); the returned function stops that.
func (p *PartitionTracker) wakeWhenDone(ctx context.Context) (stop func() bool) {
	return context.AfterFunc(ctx, func() {
		p.mu.Lock()
		p.room.Broadcast()
		p.mu.Unlock()
	})
}

// Split records that the record at offset became n records downstream (a
// flat-map): it now owes n completions instead of one. n == 0 finishes it.
// Split panics for an offset that is not in flight: that is a bug in the
// caller's bookkeeping, and a guess would break at-least-once.
func (p *PartitionTracker) Split(offset int64, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.slotLocked(offset, "Split")
	s.count += int32(n) - 1
	if s.count < 0 {
		panic(fmt.Sprintf("checkpoint: Split of %s/%d offset %d below zero", p.topic, p.partition, offset))
	}
	if s.count == 0 {
		p.owing--
		if offset == p.base || p.revoked.Load() {
			p.advanceLocked()
			p.room.Broadcast()
		}
	}
}

// Done records one completion of each record at offsets (any order). A
// record is finished when all the completions it owes have been recorded.
// Done panics for an offset not in flight, or completed more often than it
// owed: both are bookkeeping bugs that would otherwise move a position past
// unfinished work.
func (p *PartitionTracker) Done(offsets ...int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	atBase := false
	for _, off := range offsets {
		s := p.slotLocked(off, "Done")
		if s.count&^abandonBit <= 0 {
			panic(fmt.Sprintf("checkpoint: Done of %s/%d offset %d, which had already finished", p.topic, p.partition, off))
		}
		s.count--
		if s.count == 0 {
			p.owing--
		}
		atBase = atBase || off == p.base
	}
	if p.revoked.Load() {
		p.room.Broadcast() // WaitSettled
	}
	if atBase {
		before := p.base
		p.advanceLocked()
		if p.base-before > 0 {
			p.room.Broadcast()
		}
	}
}

// Revoke marks the tracker's partition as taken from the pipeline (a
// consumer group revoked it or lost it): [PartitionTracker.Revoked] reports
// it from then on, stages drop the records of it they have not started
// ([PartitionTracker.Abandon]), and WaitRoom returns at once. Records
// still running finish as before, and [PartitionTracker.WaitSettled]
// waits for them.
func (p *PartitionTracker) Revoke() {
	p.revoked.Store(true)
	p.mu.Lock()
	p.room.Broadcast()
	p.mu.Unlock()
}

// Revoked reports whether [PartitionTracker.Revoke] was called.
func (p *PartitionTracker) Revoked() bool { return p.revoked.Load() }

// Abandon gives up the records at offsets, unfinished: a stage dropped them
// without handling them, because their partition was revoked. The position
// never passes an abandoned record (it was not handled), whatever
// completions of it follow; abandoning one twice, or one already
// finished, does nothing. It panics for an offset not in flight.
func (p *PartitionTracker) Abandon(offsets ...int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, off := range offsets {
		s := p.slotLocked(off, "Abandon")
		if s.count == 0 || s.count&abandonBit != 0 {
			continue
		}
		s.count |= abandonBit
		p.abandoned++
	}
	p.room.Broadcast()
}

// WaitSettled waits until every record begun has finished or been
// abandoned: after a revocation, once nothing of the partition is left
// running, the position is final. It returns ctx's error when ctx ends
// first.
func (p *PartitionTracker) WaitSettled(ctx context.Context) error {
	defer p.wakeWhenDone(ctx)()
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.owing > p.abandoned {
		if err := ctx.Err(); err != nil {
			return err
		}
		p.room.Wait()
	}
	return nil
}

// slotLocked returns the slot of an offset in flight, panicking otherwise.
func (p *PartitionTracker) slotLocked(off int64, op string) *slot {
	if !p.started || off < p.base || off >= p.end {
		panic(fmt.Sprintf("checkpoint: %s of %s/%d offset %d, not in flight [%d, %d)", op, p.topic, p.partition, off, p.base, p.end))
	}
	return &p.ring[off&int64(len(p.ring)-1)]
}

// advanceLocked moves base over finished records.
func (p *PartitionTracker) advanceLocked() {
	if len(p.ring) == 0 {
		return
	}
	mask := int64(len(p.ring) - 1)
	for p.base < p.end {
		s := p.ring[p.base&mask]
		if s.count != 0 {
			return
		}
		p.epoch = s.epoch
		p.base++
		p.moved = true
	}
}

// Position returns the position a checkpoint may save: the lowest offset
// not yet finished (or one past the highest begun, when all have), with the
// epoch of the record below it. ok is false until the position has moved
// past a finished record: a position where reading began says nothing new.
func (p *PartitionTracker) Position() (pos Position, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked()
	if !p.moved {
		return Position{}, false
	}
	return Position{Offset: p.base, Epoch: p.epoch, TopicID: p.topicID}, true
}

// SetTopicID sets the topic ID that Position returns with the offset: the
// identity of the topic whose records the tracker counts (log.Topic.ID), so
// a checkpoint of this position is not trusted on a topic created again
// under the same name. The pipeline sets it from its source (see
// stream.TopicIdentifier); by default it is the zero ID, unknown.
func (p *PartitionTracker) SetTopicID(id TopicID) {
	p.mu.Lock()
	p.topicID = id
	p.mu.Unlock()
}

// Progress returns, for metrics, the lowest offset not yet finished (the
// position a consumer stopped now would resume from: what Position returns
// once it moved, and the first offset begun before that) and how many
// records were begun since the tracker was created (each record read,
// again when it was read again). ok is false before the first record was
// begun.
func (p *PartitionTracker) Progress() (low, begun int64, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return 0, 0, false
	}
	p.advanceLocked()
	return p.base, p.begun, true
}

// InFlight returns how many offsets lie between the position and one past
// the highest offset begun: the records not yet known to be finished.
func (p *PartitionTracker) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advanceLocked()
	return int(p.end - p.base)
}

// MemoryBytes returns the bytes the tracker's ring holds (8 per slot).
func (p *PartitionTracker) MemoryBytes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.ring) * 8
}

func nextPow2(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}
