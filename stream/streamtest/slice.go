package streamtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
)

// Lineage of the elements of a [Slice] source, and the topic-partition its
// Resume loads from the store.
const (
	Topic           = "streamtest"
	Partition int32 = 0
)

// ErrClosed is returned by Read of a [SliceSource] that was closed and not
// resumed since.
var ErrClosed = errors.New("streamtest: read from a closed source")

// SliceSource is a [stream.Source] and [stream.Resumer] over a slice, made by
// [Slice]. It is safe for concurrent use.
type SliceSource[T any] struct {
	mu      sync.Mutex
	values  []T
	cfg     config
	next    int64 // offset the next Read starts at
	closed  bool
	reads   int
	closes  int
	resumes int
	buf     []stream.Element[T] // the last batch, reused by the next Read
}

var (
	_ stream.Source[int] = (*SliceSource[int])(nil)
	_ stream.Resumer     = (*SliceSource[int])(nil)
)

// Slice returns a source yielding values in order, as elements with Topic
// [Topic] (or [OnTopic]'s), Partition [Partition] and Offset = index in values, in batches of
// [BatchSize] (default 100), then io.EOF ([Follow]: wait for the context to
// end). [FailAt] makes a chosen Read fail.
// The source keeps values; the caller must not modify them afterwards.
func Slice[T any](values []T, opts ...Option) *SliceSource[T] {
	return &SliceSource[T]{values: values, cfg: newConfig(opts)}
}

// Read returns the next batch, (nil, io.EOF) after the last value (with
// [Follow] it waits for ctx to be done instead), ctx.Err() when ctx is
// done, the FailAt error for the chosen call, and ErrClosed after Close
// until Resume.
func (s *SliceSource[T]) Read(ctx context.Context) ([]stream.Element[T], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err, ok := s.cfg.failAt[s.reads]; ok {
		return nil, err
	}
	if s.closed {
		return nil, ErrClosed
	}
	if s.next >= int64(len(s.values)) {
		if s.cfg.follow {
			s.mu.Unlock()
			<-ctx.Done()
			s.mu.Lock() // for the deferred Unlock
			return nil, ctx.Err()
		}
		return nil, io.EOF
	}
	end := min(s.next+int64(s.cfg.batchSize), int64(len(s.values)))
	// The pipeline owns a batch until the next Read (stream.Source), so the
	// slice is reused: a slice source allocates nothing per record.
	batch := s.buf[:0]
	for off := s.next; off < end; off++ {
		batch = append(batch, stream.Element[T]{Value: s.values[off], Topic: s.cfg.topic, Partition: Partition, Offset: off, Epoch: checkpoint.NoEpoch})
	}
	s.next = end
	s.buf = batch
	return batch, nil
}

// Close marks the source closed; Read fails with ErrClosed until Resume.
// It always returns nil.
func (s *SliceSource[T]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.closes++
	return nil
}

// Resume loads the position of ([Topic] or [OnTopic]'s, [Partition]) from store and makes the
// next Read start there (at 0 when none is saved), reopening the source if it
// was closed. It returns the store's error, wrapped, and then changes nothing.
func (s *SliceSource[T]) Resume(ctx context.Context, store checkpoint.Store) error {
	pos, found, err := store.Load(ctx, s.cfg.topic, Partition)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resumes++
	if err != nil {
		return fmt.Errorf("streamtest: resume %s/%d: %w", s.cfg.topic, Partition, err)
	}
	if !found {
		pos = checkpoint.At(0)
	}
	s.next = pos.Offset
	s.closed = false
	return nil
}

// Position returns the offset the next Read starts at.
func (s *SliceSource[T]) Position() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next
}

// Reads returns how many times Read was called.
func (s *SliceSource[T]) Reads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads
}

// Closes returns how many times Close was called.
func (s *SliceSource[T]) Closes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes
}

// Resumes returns how many times Resume was called, failed calls included.
func (s *SliceSource[T]) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resumes
}
