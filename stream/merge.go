package stream

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"reflect"
	"slices"
	"sync"

	"github.com/strom-dev/strom/checkpoint"
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
	ps := make([]*pipeline, len(streams))
	for i, s := range streams {
		if s == nil {
			panic("stream: Merge called with a nil stream")
		}
		ps[i] = s.p
	}
	p := mergePipelines("Merge", ps...)
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

// mergePipelines returns one pipeline with the sources, stores, stages and
// build-time findings of all of ps, which it marks run (their streams' Run
// then returns ErrAlreadyRun). It takes the options of ps[0] and the
// checkpoint settings of the last of ps that has stores; a store registered
// by several of ps is kept once. It panics, naming op, if one of ps was run
// or merged already, or if two stateful stages share a name.
func mergePipelines(op string, ps ...*pipeline) *pipeline {
	p := &pipeline{cfg: ps[0].cfg, cp: defaultCheckpointConfig()}
	for _, q := range ps {
		if q.ran.Swap(true) {
			panic("stream: " + op + " called with a stream already run or merged")
		}
		p.sources = append(p.sources, q.sources...)
		for _, st := range q.stores {
			if !slices.ContainsFunc(p.stores, func(have checkpoint.Store) bool { return sameStore(have, st) }) {
				p.stores = append(p.stores, st)
			}
		}
		p.stages = append(p.stages, q.stages...)
		p.nilSrc = p.nilSrc || q.nilSrc
		p.unpartitioned = append(p.unpartitioned, q.unpartitioned...)
		p.afterWindow = append(p.afterWindow, q.afterWindow...)
		p.effects = append(p.effects, q.effects...)
		p.tableSources = append(p.tableSources, q.tableSources...)
		p.tables = append(p.tables, q.tables...)
		p.buildErr = cmp.Or(p.buildErr, q.buildErr)
		for n := range q.stateNames {
			if p.stateNames == nil {
				p.stateNames = make(map[string]bool)
			}
			if p.stateNames[n] {
				panic(fmt.Sprintf("stream: %s joins two stateful stages named %q: their state would be saved under one name; give them distinct names with stream.Name", op, n))
			}
			p.stateNames[n] = true
		}
		if len(q.stores) > 0 {
			p.cp = q.cp
		}
	}
	return p
}

// sameStore reports whether a and b are one store (the same pointer), for
// a store given to Checkpointing on two inputs of a Merge or a join.
func sameStore(a, b checkpoint.Store) bool { return same(a, b) }

// same reports whether a and b are equal interface values without
// panicking on a dynamic type that is not comparable.
func same(a, b any) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta != nil && ta.Comparable() && a == b
}

// feedsTable reports whether src feeds only a Table of p.
func (p *pipeline) feedsTable(src io.Closer) bool {
	return slices.ContainsFunc(p.tableSources, func(t io.Closer) bool { return same(t, src) })
}
