package stream

import (
	"context"
	"sync"
	"time"
)

// Batch returns a Stream of slices of up to size values of s, in order:
// a slice is handed on when it is full, or linger after its first value
// arrived (on the pipeline's [Clock]), or when the source ends, or when the
// source must wait for records to finish before it may read more
// ([WithMaxInFlight]): a batch never waits for records that cannot come.
// Each slice carries the lineage of its first record, and its records are
// finished when the slice is: a batch written to a sink counts only once the sink
// returned, so positions never pass a record of a batch still open. A
// size < 1 is 1, and a size above the pipeline's [WithMaxInFlight] is
// lowered to it (the source waits at that many unfinished records, so a
// larger batch would never fill); a linger <= 0 waits for a full batch (or
// the end).
//
// The stage runs on its upstream goroutine, and on a timer goroutine for
// the linger; stages downstream of it see one batch at a time.
func Batch[T any](s *Stream[T], size int, linger time.Duration) *Stream[[]T] {
	size = max(size, 1)
	ctr := s.p.counters(StageBatch)
	out := chainTimed(s, ctr, 1, func(rt *runtime, down outlet[[]T]) outlet[T] {
		// A batch holds its records unfinished until it is handed on, and
		// the source stops reading at WithMaxInFlight unfinished records of
		// a partition: a larger batch could never fill.
		size := min(size, rt.p.cfg.maxInFlight)
		rt.holds = true
		b := &batchStage[T]{rt: rt, ctr: ctr, size: size, linger: linger, down: down,
			arm: make(chan time.Time, 1), quit: make(chan struct{})}
		rt.flushers = append(rt.flushers, b.flush)
		if linger > 0 {
			rt.async = true
			rt.spawn(b.lingerLoop)
		}
		return b
	})
	// A batch carries the lineage of its first record only: a stateful
	// stage after it could not tell which offsets it absorbed.
	return reordering(out, StageBatch)
}

type batchStage[T any] struct {
	rt     *runtime
	ctr    *stageCounters
	size   int
	linger time.Duration
	down   outlet[[]T]

	mu    sync.Mutex // guards what follows, and serialises pushes downstream
	cur   []T
	grp   *group
	first Element[T] // lineage of the first value of cur
	gen   uint64     // batches handed on so far
	out   [1]Element[[]T]

	arm  chan time.Time // the start of a new batch, for the linger timer
	quit chan struct{}
}

// group is the owner of a batch's output element: it finishes its members
// when the element finishes.
type group struct {
	mu      sync.Mutex
	pending int
	members []member
	offs    []int64
}

type member struct {
	owner  acker
	offset int64
}

// Done finishes one completion of the batch's element (offsets are the
// element's, one per completion).
func (g *group) Done(offsets ...int64) {
	g.mu.Lock()
	g.pending -= len(offsets)
	last := g.pending == 0
	g.mu.Unlock()
	if last {
		g.finish()
	}
}

// Split records that the batch's element became n elements.
func (g *group) Split(_ int64, n int) {
	g.mu.Lock()
	g.pending += n - 1
	last := g.pending == 0
	g.mu.Unlock()
	if last {
		g.finish()
	}
}

func (g *group) finish() { g.offs = finishMembers(g.members, g.offs) }

// finishMembers calls Done once per run of members of one owner (a
// batch's members, a stateful stage's records); offs is scratch space,
// returned for reuse.
func finishMembers(ms []member, offs []int64) []int64 {
	for i := 0; i < len(ms); {
		o := ms[i].owner
		offs = offs[:0]
		j := i
		for ; j < len(ms) && ms[j].owner == o; j++ {
			offs = append(offs, ms[j].offset)
		}
		o.Done(offs...)
		i = j
	}
	return offs
}

func (b *batchStage[T]) push(ctx context.Context, elems []Element[T]) error {
	b.ctr.in.Add(int64(len(elems)))
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range elems {
		e := &elems[i]
		if len(b.cur) == 0 {
			b.cur = make([]T, 0, b.size)
			b.grp = &group{pending: 1}
			b.first = Element[T]{Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp}
			if b.linger > 0 {
				select {
				case b.arm <- b.rt.clock.Now():
				default:
				}
			}
		}
		b.cur = append(b.cur, e.Value)
		if e.owner != nil {
			b.grp.members = append(b.grp.members, member{owner: e.owner, offset: e.Offset})
		}
		if len(b.cur) == b.size {
			if err := b.emitLocked(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// emitLocked hands the current batch on.
func (b *batchStage[T]) emitLocked(ctx context.Context) error {
	if len(b.cur) == 0 {
		return nil
	}
	f := b.first
	b.out[0] = Element[[]T]{Value: b.cur, Topic: f.Topic, Partition: f.Partition, Offset: f.Offset, Epoch: f.Epoch, Timestamp: f.Timestamp}
	if len(b.grp.members) > 0 {
		b.out[0].owner = b.grp
	}
	b.ctr.left.Add(int64(len(b.cur)))
	b.cur, b.grp = nil, nil
	b.gen++
	b.ctr.out.Add(1)
	err := b.down.push(ctx, b.out[:])
	b.out[0] = Element[[]T]{}
	return err
}

// lingerLoop hands on a batch linger after its first value, unless it was
// handed on (full) before.
func (b *batchStage[T]) lingerLoop() error {
	for {
		var started time.Time
		select {
		case started = <-b.arm:
		case <-b.quit:
			return nil
		case <-b.rt.stop:
			return nil
		}
		b.mu.Lock()
		gen := b.gen
		b.mu.Unlock()
		t := b.rt.clock.NewTimer(b.linger - b.rt.clock.Now().Sub(started))
		select {
		case <-t.C():
		case <-b.quit:
			t.Stop()
			return nil
		case <-b.rt.stop:
			t.Stop()
			return nil
		}
		b.mu.Lock()
		var err error
		if b.gen == gen {
			err = b.emitLocked(b.rt.stageCtx)
		}
		b.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// flush hands on the current partial batch, if any.
func (b *batchStage[T]) flush(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.emitLocked(ctx)
}

func (b *batchStage[T]) close(ctx context.Context) error {
	b.mu.Lock()
	err := b.emitLocked(ctx)
	b.mu.Unlock()
	close(b.quit)
	if err != nil {
		return err
	}
	return b.down.close(ctx)
}
