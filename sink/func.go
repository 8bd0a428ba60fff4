package sink

import (
	"context"

	"github.com/strom-dev/strom/stream"
)

// funcSink is the stream.Sink built by Func.
// String names the sink as its callers wrote it, in errors
// (stream.ExactlyOnce's refusal).
func (funcSink[T]) String() string { return "sink.Func" }

type funcSink[T any] struct {
	fn func(context.Context, []T) error
}

// Func returns a sink that hands every non-empty batch to fn and returns fn's
// error unchanged. fn must not keep the slice after it returns: the pipeline
// may reuse it. An empty batch is not passed on. A nil fn makes every Write
// return [ErrNilFunc].
func Func[T any](fn func(context.Context, []T) error) stream.Sink[T] {
	return funcSink[T]{fn: fn}
}

// Write calls the function with values.
func (s funcSink[T]) Write(ctx context.Context, values []T) error {
	if s.fn == nil {
		return ErrNilFunc
	}
	if len(values) == 0 {
		return nil
	}
	return s.fn(ctx, values)
}
