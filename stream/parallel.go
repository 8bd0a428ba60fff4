package stream

import (
	"context"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// maxCollect bounds the batch a parallel stage's collector hands on.
const maxCollect = 256

// parallelStage runs a one-to-one function on cfg.parallel goroutines. The
// upstream goroutine dispatches each element to a worker (any worker; with
// KeyOrdered, the one already busy with its key or the least loaded); the
// workers send results to one collector goroutine, which hands them on in
// batches of what has completed, so stages downstream run on one
// goroutine.
type parallelStage[T, U any] struct {
	sr   *stageRun
	fn   func(context.Context, T) (U, bool, error)
	down outlet[U]

	in      []chan Element[T] // one shared channel, or one per worker when keyed
	results chan result[U]
	workers sync.WaitGroup

	router keyRouter[T] // nil unless KeyOrdered
	mu     sync.Mutex   // guards router
	loads  []atomic.Int64
}

type result[U any] struct {
	e    Element[U] // the output, with the input's lineage and owner
	drop bool
}

// keyRouter assigns records to workers so that one key's records go to one
// worker at a time. Calls are made under the stage's mutex.
type keyRouter[T any] interface {
	pick(v T, loads []atomic.Int64) int
	release(v T)
}

type keyState struct {
	worker int
	n      int // records of the key dispatched and not yet done
}

// keyTable is the keyRouter of KeyOrdered: a key stays with its worker while
// any of its records is queued or running there, and goes to the least
// loaded worker otherwise.
type keyTable[T any, K comparable] struct {
	key  func(T) K
	busy map[K]keyState
}

func (t *keyTable[T, K]) pick(v T, loads []atomic.Int64) int {
	k := t.key(v)
	if s, ok := t.busy[k]; ok {
		s.n++
		t.busy[k] = s
		return s.worker
	}
	w := 0
	for i := 1; i < len(loads); i++ {
		if loads[i].Load() < loads[w].Load() {
			w = i
		}
	}
	t.busy[k] = keyState{worker: w, n: 1}
	return w
}

func (t *keyTable[T, K]) release(v T) {
	k := t.key(v)
	s := t.busy[k]
	if s.n--; s.n <= 0 {
		delete(t.busy, k)
		return
	}
	t.busy[k] = s
}

func newParallel[T, U any](sr *stageRun, fn func(context.Context, T) (U, bool, error), down outlet[U]) outlet[T] {
	n := sr.cfg.parallel
	st := &parallelStage[T, U]{sr: sr, fn: fn, down: down, results: make(chan result[U], n*sr.cfg.queuePerWorker)}
	if sr.cfg.keyed != nil {
		factory, ok := sr.cfg.keyed.(func() keyRouter[T])
		if !ok {
			panic("stream: KeyOrdered's key function takes another type than the stage's values")
		}
		st.router = factory()
		st.loads = make([]atomic.Int64, n)
		st.in = make([]chan Element[T], n)
		for i := range st.in {
			st.in[i] = make(chan Element[T], sr.cfg.queuePerWorker)
		}
	} else {
		st.in = []chan Element[T]{make(chan Element[T], n*2)}
	}
	sr.rt.async, sr.rt.holds = true, true
	st.workers.Add(n)
	for w := range n {
		ch := st.in[0]
		if st.router != nil {
			ch = st.in[w]
		}
		sr.rt.spawn(func() error {
			defer st.workers.Done()
			return st.work(w, ch)
		})
	}
	sr.rt.spawn(func() error {
		st.workers.Wait()
		close(st.results)
		return nil
	})
	sr.rt.spawn(st.collect)
	return st
}

// push dispatches every element to a worker, waiting while the workers'
// queues are full (back-pressure).
func (st *parallelStage[T, U]) push(ctx context.Context, elems []Element[T]) error {
	st.sr.ctr.in.Add(int64(len(elems)))
	stop := st.sr.rt.stop
	for i := range elems {
		ch := st.in[0]
		if st.router != nil {
			st.mu.Lock()
			w := st.router.pick(elems[i].Value, st.loads)
			st.mu.Unlock()
			st.loads[w].Add(1)
			ch = st.in[w]
		}
		select {
		case ch <- elems[i]:
		case <-stop:
			return nil
		}
	}
	return nil
}

// close ends the workers' input; the collector closes downstream once they
// have all finished.
func (st *parallelStage[T, U]) close(context.Context) error {
	for _, ch := range st.in {
		close(ch)
	}
	return nil
}

func (st *parallelStage[T, U]) work(w int, in <-chan Element[T]) error {
	rt := st.sr.rt
	for {
		var e Element[T]
		var ok bool
		select {
		case e, ok = <-in:
			if !ok {
				return nil
			}
		case <-rt.stop:
			return nil
		}
		if rt.halted() {
			// The stages' context ended: the queued records are
			// abandoned unsaved, not handed to the function.
			return nil
		}
		if rt.revokes.Load() > 0 && abandonRevoked(e.owner, e.Offset) {
			// Its partition was revoked while it waited: the new owner
			// handles it. Not started, not handed on.
			st.sr.ctr.left.Add(1)
			if st.router != nil {
				st.mu.Lock()
				st.router.release(e.Value)
				st.mu.Unlock()
				st.loads[w].Add(-1)
			}
			continue
		}
		v, oc, err := apply(rt.stageCtx, st.sr, &e, st.fn)
		if st.router != nil {
			st.mu.Lock()
			st.router.release(e.Value)
			st.mu.Unlock()
			st.loads[w].Add(-1)
		}
		if err != nil {
			return err
		}
		r := result[U]{e: Element[U]{Value: v, Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch, Timestamp: e.Timestamp, owner: e.owner}, drop: oc == dropped}
		select {
		case st.results <- r:
		case <-rt.stop:
			return nil
		}
	}
}

// collect hands the workers' results on in batches of what has completed.
func (st *parallelStage[T, U]) collect() error {
	rt := st.sr.rt
	var out, drop []Element[U]
	var offs []int64
	for {
		var r result[U]
		var ok bool
		select {
		case r, ok = <-st.results:
			if !ok {
				return st.down.close(rt.stageCtx)
			}
		case <-rt.stop:
			return nil
		}
		out, drop = out[:0], drop[:0]
		for {
			if r.drop {
				drop = append(drop, r.e)
			} else {
				out = append(out, r.e)
			}
			if len(out)+len(drop) >= maxCollect {
				break
			}
			select {
			case r, ok = <-st.results:
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if len(drop) > 0 {
			offs = finish(drop, offs)
			rt.noteFinished(len(drop))
			st.sr.ctr.left.Add(int64(len(drop))) // those handed on are Out: oneToOne
			clear(drop)
		}
		st.sr.ctr.out.Add(int64(len(out)))
		if len(out) > 0 {
			if err := st.down.push(rt.stageCtx, out); err != nil {
				return err
			}
			clear(out)
		}
	}
}

func stack() []byte { return debug.Stack() }
