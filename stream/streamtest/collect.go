package streamtest

import (
	"context"
	"sync"

	"github.com/strom-dev/strom/stream"
)

// Collector is a [stream.Sink] that keeps every value written to it, made by
// [Collect]. The zero value is ready to use. It is safe for concurrent use.
type Collector[T any] struct {
	mu     sync.Mutex
	values []T
	cfg    config
	writes int
}

var _ stream.Sink[int] = (*Collector[int])(nil)

// Collect returns an empty Collector. [FailAt] makes a chosen Write fail.
func Collect[T any](opts ...Option) *Collector[T] {
	return &Collector[T]{cfg: newConfig(opts)}
}

// Write appends a copy of values, or returns the FailAt error for the chosen
// call without collecting anything. It ignores ctx.
func (c *Collector[T]) Write(_ context.Context, values []T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if err, ok := c.cfg.failAt[c.writes]; ok {
		return err
	}
	c.values = append(c.values, values...)
	return nil
}

// Values returns a copy of every value collected, in write order.
func (c *Collector[T]) Values() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]T(nil), c.values...)
}

// Writes returns how many times Write was called, failed calls included.
func (c *Collector[T]) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}
