package stream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// failAfter bounds how long a test waits for a condition before it fails:
// it only turns a hang into a failure, and is never what a test waits on.
const failAfter = 30 * time.Second

// notifyingStore is a MemoryStore that sends each saved position on a
// channel, dropping it when nobody is listening.
type notifyingStore struct {
	checkpoint.MemoryStore
	saved chan int64
}

func (s *notifyingStore) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	if err := s.MemoryStore.Save(ctx, topic, partition, pos); err != nil {
		return err
	}
	select {
	case s.saved <- pos.Offset:
	default:
	}
	return nil
}

// TestSlowHandlerSavesPositionsWithinOneBatch proves issue 17's first item:
// with a slow handler and the default checkpoint policy, positions are saved
// while the source's one batch is still being handled, not only once the
// whole batch is. The first record's call lasts until the progress ticker
// has moved twice (10 to 20 ms: a slow call), and the last record's call
// waits until a position inside the batch has been saved; before the
// change, the first save came after the last record and it waited forever.
func TestSlowHandlerSavesPositionsWithinOneBatch(t *testing.T) {
	const n = 300
	store := &notifyingStore{saved: make(chan int64, 1)}
	var midBatch atomic.Int64 // a position saved with records of the batch unhandled
	watch := make(chan struct{})
	go func() {
		defer close(watch)
		for pos := range store.saved {
			if pos > 0 && pos < n {
				midBatch.Store(pos)
				return
			}
		}
	}()
	err := stream.ConsumeForever(t.Context(), streamtest.Slice(ints(n), streamtest.BatchSize(n)), store,
		func(_ context.Context, v int) error {
			switch v {
			case 0:
				stream.WaitSplitTicks() // a call as long as a split interval
			case n - 1:
				select {
				case <-watch:
				case <-time.After(failAfter):
					t.Errorf("no position inside the batch was saved while %d of its %d records were handled", n-1, n)
				}
			}
			return nil
		})
	close(store.saved)
	require.NoError(t, err)
	pos := midBatch.Load()
	assert.Greater(t, pos, int64(0))
	assert.Less(t, pos, int64(n))
	final, ok, err := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(n), final.Offset, "the end of the source is saved when it ends")
}

// TestSlowStageHandsOnWhatItFinishedToTheNextStage proves a slow sequential
// stage hands finished records to the stages after it within a batch: the
// sink sees its first values while the Map still works on the same batch.
func TestSlowStageHandsOnWhatItFinishedToTheNextStage(t *testing.T) {
	const n = 200
	var written atomic.Int64
	sunk := make(chan struct{})
	sink := sinkFunc[int](func(_ context.Context, vs []int) error {
		if written.Add(int64(len(vs))) < n {
			select {
			case <-sunk:
			default:
				close(sunk)
			}
		}
		return nil
	})
	s := stream.From[int](streamtest.Slice(ints(n), streamtest.BatchSize(n))).
		Map(func(_ context.Context, v int) (int, error) {
			switch v {
			case 0:
				stream.WaitSplitTicks() // a call as long as a split interval
			case n - 1:
				select {
				case <-sunk:
				case <-time.After(failAfter):
					t.Errorf("the sink got nothing while the Map handled %d records of one batch", n-1)
				}
			}
			return v, nil
		}).
		Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
		To(sink)
	require.NoError(t, s.Run(t.Context()))
	assert.Equal(t, int64(n/2), written.Load(), "every even value once, none lost by the split")
}

// TestFastPipelineKeepsWholeBatches proves the split costs a fast pipeline
// nothing it can see: a batch handled in well under the split interval
// reaches the sink in one Write.
func TestFastPipelineKeepsWholeBatches(t *testing.T) {
	out := streamtest.Collect[int]()
	s := stream.From[int](streamtest.Slice(ints(100), streamtest.BatchSize(100))).
		Map(func(_ context.Context, v int) (int, error) { return v * 2, nil }).
		To(out)
	require.NoError(t, s.Run(t.Context()))
	assert.Len(t, out.Values(), 100)
}

// TestCancelStopsConsumeForeverWithinOneHandlerCall proves issue 17's
// second item: after the context is cancelled, ConsumeForever calls the
// handler no more (it used to go through the rest of the batch, one slow
// call after another), saves the position of the records it finished and
// returns nil. The third call cancels and returns once the stages have
// been told (a call that outlives the cancel by a little).
func TestCancelStopsConsumeForeverWithinOneHandlerCall(t *testing.T) {
	const n = 100
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var store checkpoint.MemoryStore
	var calls atomic.Int64
	err := stream.ConsumeForever(ctx, streamtest.Slice(ints(n), streamtest.BatchSize(n)), &store,
		func(context.Context, int) error {
			if calls.Add(1) == 3 {
				cancel() // the service is told to stop during the third call
				stream.WaitHalted()
			}
			return nil
		})
	require.NoError(t, err, "a cancel is a shutdown")
	assert.Equal(t, int64(3), calls.Load(), "the handler is not called for the rest of the batch")
	pos, ok, err := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	require.True(t, ok, "the records finished before the cancel are saved")
	assert.Equal(t, int64(3), pos.Offset)
}

// TestDeadlineIsNotAShutdown proves issue 17's seventh item, second half:
// a context whose deadline expires stops Run, ConsumeForever and Forever
// like a cancel, but they return an error wrapping ErrDeadline and
// context.DeadlineExceeded, so a test whose timeout expires cannot pass.
func TestDeadlineIsNotAShutdown(t *testing.T) {
	never := func(ctx context.Context, _ int) error { <-ctx.Done(); return nil }
	t.Run("Run", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		err := stream.From[int](streamtest.Slice(ints(10))).Tap(never).Run(ctx)
		require.ErrorIs(t, err, stream.ErrDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("ConsumeForever", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		var store checkpoint.MemoryStore
		err := stream.ConsumeForever(ctx, streamtest.Slice(ints(10)), &store, never)
		require.ErrorIs(t, err, stream.ErrDeadline)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("Forever", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		defer cancel()
		err := stream.Forever(ctx, func() stream.Runner {
			return stream.From[int](streamtest.Slice(ints(10))).Tap(never)
		})
		require.ErrorIs(t, err, stream.ErrDeadline)
	})
	t.Run("cause", func(t *testing.T) {
		errSLA := errors.New("batch window closed")
		ctx, cancel := context.WithDeadlineCause(t.Context(), time.Now().Add(time.Millisecond), errSLA)
		defer cancel()
		err := stream.From[int](streamtest.Slice(ints(10))).Tap(never).Run(ctx)
		require.ErrorIs(t, err, stream.ErrDeadline)
		require.ErrorIs(t, err, errSLA, "the deadline's cause is kept")
	})
	t.Run("a source that ended before the deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		require.NoError(t, stream.From[int](streamtest.Slice(ints(10))).Run(ctx))
	})
	t.Run("a cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.NoError(t, stream.From[int](streamtest.Slice(ints(10))).Tap(never).Run(ctx))
	})
}

// TestConsumeForeverTakesStageOptions proves issue 17's fourth item: a
// dead-letter sink and a retry policy given to ConsumeForever with
// WithStage apply to its handler, without a Forever and a build closure.
func TestConsumeForeverTakesStageOptions(t *testing.T) {
	dlq := streamtest.Collect[stream.Failure]()
	var store checkpoint.MemoryStore
	var tries atomic.Int64
	err := stream.ConsumeForever(t.Context(), streamtest.Slice(ints(10)), &store,
		func(_ context.Context, v int) error {
			switch v {
			case 4:
				if tries.Add(1) < 3 {
					return errConn // fails twice, then goes through
				}
			case 7:
				return errBoom // always
			}
			return nil
		},
		stream.WithStage(stream.Name("handle"), stream.Retry(3, time.Microsecond, time.Microsecond), stream.DeadLetter(dlq)))
	require.NoError(t, err)
	assert.Equal(t, int64(3), tries.Load(), "record 4 was retried until it went through")
	fs := dlq.Values()
	require.Len(t, fs, 1)
	assert.Equal(t, int64(7), fs[0].Offset)
	assert.Equal(t, "handle", fs[0].Stage)
	require.ErrorIs(t, fs[0].Err, errBoom)
	pos, _, err := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	assert.Equal(t, int64(10), pos.Offset, "the dead-lettered record is finished")
}

// panicky dereferences a nil pointer for the value 5: the user's bug.
func panicky(_ context.Context, v int) (int, error) {
	if v == 5 {
		var p *int
		return *p, nil
	}
	return v, nil
}

// TestPanicInParallelMapShowsTheFunctionThatPanicked proves issue 17's
// third item: a nil dereference in a Map with Parallel(2) reaches Run's
// caller as a *PanicError whose stack, and whose printed message, hold
// the user's function, not only Run; under Recover the record's error
// carries the same.
func TestPanicInParallelMapShowsTheFunctionThatPanicked(t *testing.T) {
	v := recoverPanic(func() {
		_ = stream.From[int](streamtest.Slice(ints(20))).Map(panicky, stream.Parallel(2)).Run(context.Background())
	})
	pe, ok := v.(*stream.PanicError)
	require.Truef(t, ok, "Run panicked with %T, want *stream.PanicError", v)
	assert.Contains(t, string(pe.Stack), "stream_test.panicky(")
	assert.Contains(t, pe.Error(), "stream_test.panicky(", "the crash prints the stack where the panic was")
	assert.Contains(t, pe.Error(), "invalid memory address or nil pointer dereference")
	var re interface{ RuntimeError() }
	assert.ErrorAs(t, pe, &re, "the runtime.Error is reachable with errors.As")

	var failures []stream.Failure
	s := stream.From[int](streamtest.Slice(ints(20))).
		Map(panicky, stream.Parallel(2), stream.Recover(), stream.Skip(), stream.OnError(func(f stream.Failure) { failures = append(failures, f) }))
	require.NoError(t, s.Run(context.Background()))
	require.Len(t, failures, 1)
	require.ErrorAs(t, failures[0].Err, &pe)
	assert.Contains(t, string(pe.Stack), "stream_test.panicky(")
}
