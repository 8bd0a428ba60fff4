package stream_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/stream"
)

var (
	errBoom = errors.New("boom")
	errConn = errors.New("connection reset")
	errDisk = errors.New("disk full")
)

// ints returns 0, 1, ..., n-1, so that a value equals its offset in a
// streamtest.Slice source.
func ints(n int) []int {
	v := make([]int, n)
	for i := range v {
		v[i] = i
	}
	return v
}

// funcSource is a stream.Source built from functions, for the cases
// streamtest.Slice does not cover. It does not implement stream.Resumer.
type funcSource[T any] struct {
	read  func(ctx context.Context) ([]stream.Element[T], error)
	close func() error

	mu     sync.Mutex
	closes int
}

func (s *funcSource[T]) Read(ctx context.Context) ([]stream.Element[T], error) { return s.read(ctx) }

func (s *funcSource[T]) Close() error {
	s.mu.Lock()
	s.closes++
	s.mu.Unlock()
	if s.close != nil {
		return s.close()
	}
	return nil
}

func (s *funcSource[T]) Closes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes
}

// batches returns a funcSource that returns the given batches and their
// errors in turn, then (nil, io.EOF) forever.
func batches[T any](steps ...step[T]) *funcSource[T] {
	var mu sync.Mutex
	i := 0
	return &funcSource[T]{read: func(context.Context) ([]stream.Element[T], error) {
		mu.Lock()
		defer mu.Unlock()
		if i >= len(steps) {
			return nil, io.EOF
		}
		st := steps[i]
		i++
		return st.elems, st.err
	}}
}

type step[T any] struct {
	elems []stream.Element[T]
	err   error
}

// sinkFunc is a stream.Sink built from a function.
type sinkFunc[T any] func(ctx context.Context, values []T) error

func (f sinkFunc[T]) Write(ctx context.Context, values []T) error { return f(ctx, values) }

// recoverPanic calls fn and returns what it panicked with, nil if it did not.
func recoverPanic(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// requireRunPanic requires fn (a Run) to panic with a *stream.PanicError
// whose Value is want and whose Stack holds a frame of the function named
// frame: the goroutine that panicked, not Run's.
func requireRunPanic(t *testing.T, want any, frame string, fn func()) *stream.PanicError {
	t.Helper()
	v := recoverPanic(fn)
	require.NotNil(t, v, "Run did not panic")
	pe, ok := v.(*stream.PanicError)
	require.Truef(t, ok, "Run panicked with %T %v, want a *stream.PanicError", v, v)
	assert.Equal(t, want, pe.Value)
	assert.Contains(t, string(pe.Stack), frame, "the stack of the goroutine that panicked")
	assert.Contains(t, pe.Error(), frame, "an unrecovered panic prints Error: it shows the stack")
	return pe
}
