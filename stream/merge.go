package stream

import (
	"cmp"
	"context"
	"sync"
)

// Merge returns one Stream of the values of all of streams, each read by
// its own source goroutine(s) and interleaved as their batches arrive;
// within one input, order is kept. Stages after Merge see one batch at a
// time. The inputs' stages, stores and sources become the merged
// pipeline's: run the result, not the inputs (a merged input's Run returns
// [ErrAlreadyRun]). Positions are tracked and saved per topic-partition as
// for one source. The merged pipeline takes the options given to the first
// input's [From]. Merge panics with no streams, a nil one, or one already
// run or merged.
func Merge[T any](streams ...*Stream[T]) *Stream[T] {
	if len(streams) == 0 || streams[0] == nil {
		panic("stream: Merge called with no streams or a nil one")
	}
	p := &pipeline{cfg: streams[0].p.cfg, cp: defaultCheckpointConfig()}
	for _, s := range streams {
		if s == nil {
			panic("stream: Merge called with a nil stream")
		}
		if s.p.ran.Swap(true) {
			panic("stream: Merge called with a stream already run or merged")
		}
		p.sources = append(p.sources, s.p.sources...)
		p.stores = append(p.stores, s.p.stores...)
		p.stages = append(p.stages, s.p.stages...)
		p.nilSrc = p.nilSrc || s.p.nilSrc
		p.unpartitioned = append(p.unpartitioned, s.p.unpartitioned...)
		p.afterWindow = append(p.afterWindow, s.p.afterWindow...)
		p.buildErr = cmp.Or(p.buildErr, s.p.buildErr)
		for n := range s.p.stateNames {
			if p.stateNames == nil {
				p.stateNames = make(map[string]bool)
			}
			p.stateNames[n] = true
		}
		if len(s.p.stores) > 0 {
			p.cp = s.p.cp
		}
	}
	reorders, unkeyedBy := "", ""
	for _, s := range streams {
		reorders = cmp.Or(reorders, s.reorders)
		unkeyedBy = cmp.Or(unkeyedBy, s.unkeyedBy)
	}
	return &Stream[T]{p: p, reorders: reorders, unkeyedBy: unkeyedBy, connect: func(rt *runtime, down outlet[T]) {
		m := &mergeOutlet[T]{down: down, open: len(streams)}
		for _, s := range streams {
			s.connect(rt, m)
		}
	}}
}

// mergeOutlet serialises the pushes of several upstreams and closes
// downstream after the last of them closed.
type mergeOutlet[T any] struct {
	mu   sync.Mutex
	down outlet[T]
	open int
}

func (m *mergeOutlet[T]) push(ctx context.Context, elems []Element[T]) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.down.push(ctx, elems)
}

func (m *mergeOutlet[T]) close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open--; m.open > 0 {
		return nil
	}
	return m.down.close(ctx)
}
