package stream

import "context"

// MapTo returns a Stream of U that replaces each value v of s with
// fn(ctx, v), in order, keeping its lineage, so the checkpoint follows the
// input records. It is a function rather than a method because Go methods
// cannot take type parameters. An error from fn stops Run with a
// [*RecordError] (Stage "mapto"). It panics if fn is nil.
//
// The returned Stream shares s's pipeline: run it, not s.
func MapTo[T, U any](s *Stream[T], fn func(context.Context, T) (U, error)) *Stream[U] {
	mustFunc("MapTo", fn == nil)
	return derive(s, func(ctx context.Context, elems []Element[T]) ([]Element[U], error) {
		return mapElems(ctx, StageMapTo, elems, fn)
	})
}
