package stream_test

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

func saves(positions ...int64) []streamtest.Save {
	out := make([]streamtest.Save, len(positions))
	for i, p := range positions {
		out[i] = streamtest.Save{Topic: streamtest.Topic, Partition: streamtest.Partition, Position: p, Epoch: checkpoint.NoEpoch}
	}
	return out
}

// TestChainProducesValuesInOrder ensures Map, Filter, Tap, MapTo and To each
// see and produce the right values in source order, across batches.
func TestChainProducesValuesInOrder(t *testing.T) {
	src := streamtest.Slice(ints(25), streamtest.BatchSize(10))
	var store streamtest.RecordingStore
	var tapped []int
	out := streamtest.Collect[string]()

	s := stream.From[int](src).
		Map(func(_ context.Context, v int) (int, error) { return v * 2, nil }).
		Filter(func(_ context.Context, v int) (bool, error) { return v%3 == 0, nil }).
		Tap(func(_ context.Context, v int) error { tapped = append(tapped, v); return nil }).
		Checkpointing(&store, stream.CheckpointEachBatch())
	strs := stream.MapTo(s, func(_ context.Context, v int) (string, error) { return "v" + strconv.Itoa(v), nil })
	require.NoError(t, strs.To(out).Run(context.Background()))

	assert.Equal(t, []int{0, 6, 12, 18, 24, 30, 36, 42, 48}, tapped)
	assert.Equal(t, []string{"v0", "v6", "v12", "v18", "v24", "v30", "v36", "v42", "v48"}, out.Values())
	assert.Equal(t, saves(10, 20, 25), store.Saves())
	assert.Equal(t, 3, out.Writes(), "one Write per batch")
	assert.Equal(t, 1, src.Closes())
}

// TestStagesKeepLineage ensures an element keeps its source offset through
// Filter, Map and MapTo, so an error names the record the source gave.
func TestStagesKeepLineage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(s *stream.Stream[int]) interface{ Run(context.Context) error }
		stage string
	}{
		{"map", func(s *stream.Stream[int]) interface{ Run(context.Context) error } {
			return s.Map(failOn(16, errBoom))
		}, stream.StageMap},
		{"filter", func(s *stream.Stream[int]) interface{ Run(context.Context) error } {
			return s.Filter(func(_ context.Context, v int) (bool, error) {
				if v == 16 {
					return false, errBoom
				}
				return true, nil
			})
		}, stream.StageFilter},
		{"tap", func(s *stream.Stream[int]) interface{ Run(context.Context) error } {
			return s.Tap(func(_ context.Context, v int) error {
				if v == 16 {
					return errBoom
				}
				return nil
			})
		}, stream.StageTap},
		{"mapto", func(s *stream.Stream[int]) interface{ Run(context.Context) error } {
			return stream.MapTo(s, func(_ context.Context, v int) (string, error) {
				if v == 16 {
					return "", errBoom
				}
				return strconv.Itoa(v), nil
			})
		}, stream.StageMapTo},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := streamtest.Slice(ints(30), streamtest.BatchSize(7))
			// Drop odd values and shift the rest, so values and offsets differ
			// before the stage under test: value 16 comes from offset 8.
			s := stream.From[int](src).
				Filter(func(_ context.Context, v int) (bool, error) { return v%2 == 0, nil }).
				Map(func(_ context.Context, v int) (int, error) { return v * 2, nil })
			err := tc.build(s).Run(context.Background())

			require.ErrorIs(t, err, errBoom)
			var re *stream.RecordError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.stage, re.Stage)
			assert.Equal(t, streamtest.Topic, re.Topic)
			assert.Equal(t, streamtest.Partition, re.Partition)
			assert.Equal(t, int64(8), re.Offset)
			assert.Equal(t, "stream: "+tc.stage+" failed on streamtest/0 at offset 8: boom", err.Error())
		})
	}
}

func failOn(value int, err error) func(context.Context, int) (int, error) {
	return func(_ context.Context, v int) (int, error) {
		if v == value {
			return 0, err
		}
		return v, nil
	}
}

// TestFilteredBatchStillAdvancesCheckpoint ensures records dropped by a
// Filter count as done: a batch filtered to nothing is still saved.
func TestFilteredBatchStillAdvancesCheckpoint(t *testing.T) {
	src := streamtest.Slice(ints(30), streamtest.BatchSize(10))
	var store streamtest.RecordingStore
	out := streamtest.Collect[int]()

	err := stream.From[int](src).
		Filter(func(_ context.Context, v int) (bool, error) { return v >= 25, nil }).
		To(out).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(context.Background())

	require.NoError(t, err)
	assert.Equal(t, saves(10, 20, 30), store.Saves())
	assert.Equal(t, []int{25, 26, 27, 28, 29}, out.Values())
	assert.Equal(t, 1, out.Writes(), "a batch filtered to nothing is not written to the sink")
}

// TestCheckpointNeverPassesUnfinished is the at-least-once test: a handler
// failing on the record at offset 37 (batches of 10) stops Run with an error
// naming it, the stored position stays at or below 37 (the last batch handled
// in full, 30), and a second run from the store handles every record at least
// once, skipping none.
func TestCheckpointNeverPassesUnfinished(t *testing.T) {
	const n, k = 100, 37
	ctx := context.Background()
	var store streamtest.RecordingStore
	handled := make(map[int]int) // offset -> times handled

	src := streamtest.Slice(ints(n), streamtest.BatchSize(10))
	err := stream.From[int](src).
		Tap(func(_ context.Context, v int) error {
			if v == k {
				return errBoom
			}
			handled[v]++
			return nil
		}).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(ctx)

	require.ErrorIs(t, err, errBoom)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, int64(k), re.Offset)
	assert.Equal(t, stream.StageTap, re.Stage)
	pos, found := store.Position(streamtest.Topic, streamtest.Partition)
	require.True(t, found)
	assert.LessOrEqual(t, pos, int64(k), "the position must not pass the failed record")
	assert.GreaterOrEqual(t, pos, int64(30), "the batches handled in full must be saved")
	assert.Equal(t, saves(10, 20, 30), store.Saves())
	assert.Equal(t, 1, src.Closes())

	again := streamtest.Slice(ints(n), streamtest.BatchSize(10))
	require.NoError(t, again.Resume(ctx, &store))
	err = stream.From[int](again).
		Tap(func(_ context.Context, v int) error { handled[v]++; return nil }).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(ctx)
	require.NoError(t, err)

	for off := range n {
		assert.GreaterOrEqual(t, handled[off], 1, "offset %d was skipped", off)
	}
	for off := 30; off < k; off++ {
		assert.Equal(t, 2, handled[off], "offset %d of the failed batch is handled again", off)
	}
	pos, _ = store.Position(streamtest.Topic, streamtest.Partition)
	assert.Equal(t, int64(n), pos)
}

// TestCheckpointWaitsForStagesAfterCheckpointing ensures a stage or sink
// chained after Checkpointing must finish a batch before its position is
// saved.
func TestCheckpointWaitsForStagesAfterCheckpointing(t *testing.T) {
	src := streamtest.Slice(ints(30), streamtest.BatchSize(10))
	var store streamtest.RecordingStore
	out := streamtest.Collect[int](streamtest.FailAt(2, errDisk))

	err := stream.From[int](src).Checkpointing(&store, stream.CheckpointEachBatch()).To(out).Run(context.Background())

	require.ErrorIs(t, err, errDisk)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, stream.StageSink, re.Stage)
	assert.Equal(t, int64(10), re.Offset, "a sink error names the first record of the batch")
	assert.Equal(t, saves(10), store.Saves())
}

// TestStoreSaveErrorStopsRun ensures a failed Save is returned, naming the
// topic, partition and position, and no further batch is read.
func TestStoreSaveErrorStopsRun(t *testing.T) {
	src := streamtest.Slice(ints(50), streamtest.BatchSize(10))
	var store streamtest.RecordingStore
	store.FailSaveAt(2, errDisk)

	err := stream.From[int](src).Checkpointing(&store, stream.CheckpointEachBatch()).Run(context.Background())

	require.ErrorIs(t, err, errDisk)
	assert.Contains(t, err.Error(), "streamtest/0 at position 20")
	assert.Equal(t, saves(10), store.Saves())
	assert.Equal(t, 2, src.Reads())
	assert.Equal(t, 1, src.Closes())
}

// TestEveryStoreReceivesEveryPosition ensures Checkpointing may be called more
// than once and each store gets every position.
func TestEveryStoreReceivesEveryPosition(t *testing.T) {
	src := streamtest.Slice(ints(15), streamtest.BatchSize(10))
	var a, b streamtest.RecordingStore
	var mem checkpoint.MemoryStore

	require.NoError(t, stream.From[int](src).Checkpointing(&a).Checkpointing(&b).Checkpointing(&mem, stream.CheckpointEachBatch()).Run(context.Background()))

	assert.Equal(t, saves(10, 15), a.Saves())
	assert.Equal(t, saves(10, 15), b.Saves())
	pos, found, err := mem.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(15), pos.Offset)
}

// TestCancelReturnsNilAndSavesCompletedBatchesOnly ensures a cancelled context
// ends Run with nil, saving the batches that completed and not the one that
// failed because of the cancellation.
func TestCancelReturnsNilAndSavesCompletedBatchesOnly(t *testing.T) {
	t.Run("batch in flight abandoned", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := streamtest.Slice(ints(50), streamtest.BatchSize(10))
		var store streamtest.RecordingStore
		err := stream.From[int](src).
			Tap(func(ctx context.Context, v int) error {
				if v == 25 {
					cancel()
					return ctx.Err()
				}
				return nil
			}).
			Checkpointing(&store, stream.CheckpointEachBatch()).
			Run(ctx)
		require.NoError(t, err)
		assert.Equal(t, saves(10, 20), store.Saves())
		assert.Equal(t, 3, src.Reads())
		assert.Equal(t, 1, src.Closes())
	})
	t.Run("records handled before the stage sees the cancel are saved", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		src := streamtest.Slice(ints(50), streamtest.BatchSize(10))
		var store streamtest.RecordingStore
		var handled atomic.Int64
		err := stream.From[int](src).
			Tap(func(_ context.Context, v int) error {
				handled.Store(int64(v) + 1)
				if v == 25 {
					cancel()
				}
				return nil
			}).
			Checkpointing(&store, stream.CheckpointEachBatch()).
			Run(ctx)
		require.NoError(t, err)
		// The stage stops at the first record after it learns of the
		// cancel (context.AfterFunc, so a few fast records may come
		// first): the last save is the end of what was handled, 26 to
		// 30, never past it and never the next batch.
		got := store.Saves()
		require.Len(t, got, 3)
		assert.Equal(t, saves(10, 20), got[:2])
		assert.Equal(t, handled.Load(), got[2].Position, "what finished is saved despite the cancellation")
		assert.GreaterOrEqual(t, got[2].Position, int64(26))
		assert.LessOrEqual(t, got[2].Position, int64(30))
		assert.Equal(t, 3, src.Reads(), "no Read after the cancellation")
	})
	t.Run("cancelled before Run", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		src := streamtest.Slice(ints(50))
		var store streamtest.RecordingStore
		require.NoError(t, stream.From[int](src).Checkpointing(&store, stream.CheckpointEachBatch()).Run(ctx))
		assert.Empty(t, store.Saves())
		assert.Equal(t, 0, src.Reads())
		assert.Equal(t, 1, src.Closes())
	})
	t.Run("source returns the cancellation", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		src := batches(
			step[int]{elems: []stream.Element[int]{{Value: 1, Topic: "t", Offset: 0}}},
			step[int]{err: context.Canceled},
		)
		src.read = wrapRead(src.read, func(n int) {
			if n == 2 {
				cancel()
			}
		})
		var store streamtest.RecordingStore
		require.NoError(t, stream.From[int](src).Checkpointing(&store, stream.CheckpointEachBatch()).Run(ctx))
		assert.Equal(t, []streamtest.Save{{Topic: "t", Position: 1}}, store.Saves())
	})
}

// wrapRead calls before(n) ahead of the n-th call of read.
func wrapRead[T any](read func(context.Context) ([]stream.Element[T], error), before func(n int)) func(context.Context) ([]stream.Element[T], error) {
	n := 0
	return func(ctx context.Context) ([]stream.Element[T], error) {
		n++
		before(n)
		return read(ctx)
	}
}

// TestHandlerErrorAfterCancelIsReturned ensures a cancellation does not hide
// a real failure: an error that is not the context's is returned.
func TestHandlerErrorAfterCancelIsReturned(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := streamtest.Slice(ints(20), streamtest.BatchSize(10))
	err := stream.From[int](src).
		Tap(func(_ context.Context, v int) error {
			if v == 5 {
				cancel()
				return errBoom
			}
			return nil
		}).
		Run(ctx)
	require.ErrorIs(t, err, errBoom)
}

// TestSourceErrorIsWrapped ensures a failed Read comes back as a SourceError
// wrapping the source's error, after the batches before it were saved.
func TestSourceErrorIsWrapped(t *testing.T) {
	src := streamtest.Slice(ints(50), streamtest.BatchSize(10), streamtest.FailAt(3, errConn))
	var store streamtest.RecordingStore
	handled := 0

	err := stream.From[int](src).
		Tap(func(context.Context, int) error { handled++; return nil }).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(context.Background())

	require.ErrorIs(t, err, errConn)
	var se *stream.SourceError
	require.ErrorAs(t, err, &se)
	var re *stream.RecordError
	assert.False(t, errors.As(err, &re))
	assert.Equal(t, "stream: source failed: connection reset", err.Error())
	assert.Equal(t, saves(10, 20), store.Saves())
	assert.Equal(t, 20, handled)
	assert.Equal(t, 1, src.Closes())
}

// TestSourceErrorDiscardsItsBatch ensures elements returned together with a
// Read error other than io.EOF are neither handled nor saved.
func TestSourceErrorDiscardsItsBatch(t *testing.T) {
	src := batches(step[int]{elems: []stream.Element[int]{{Value: 1, Topic: "t", Offset: 0}}, err: errConn})
	var store streamtest.RecordingStore
	handled := 0
	err := stream.From[int](src).
		Tap(func(context.Context, int) error { handled++; return nil }).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(context.Background())
	require.ErrorIs(t, err, errConn)
	assert.Equal(t, 0, handled)
	assert.Empty(t, store.Saves())
}

// TestFinalBatchWithEOFIsHandled ensures a source that returns its last batch
// together with io.EOF has that batch handled and saved before Run ends.
func TestFinalBatchWithEOFIsHandled(t *testing.T) {
	src := batches(
		step[int]{elems: []stream.Element[int]{{Value: 1, Topic: "t", Offset: 0}}},
		step[int]{elems: []stream.Element[int]{{Value: 2, Topic: "t", Offset: 1}}, err: io.EOF},
		step[int]{err: errConn}, // never read: the pipeline ended
	)
	var store streamtest.RecordingStore
	out := streamtest.Collect[int]()
	require.NoError(t, stream.From[int](src).To(out).Checkpointing(&store, stream.CheckpointEachBatch()).Run(context.Background()))
	assert.Equal(t, []int{1, 2}, out.Values())
	assert.Equal(t, []streamtest.Save{{Topic: "t", Position: 1}, {Topic: "t", Position: 2}}, store.Saves())
	assert.Equal(t, 1, src.Closes())
}

// TestEmptyBatchesAreSkipped ensures empty batches neither stop Run nor reach
// the sink or the store.
func TestEmptyBatchesAreSkipped(t *testing.T) {
	src := batches(
		step[int]{},
		step[int]{elems: []stream.Element[int]{}},
		step[int]{elems: []stream.Element[int]{{Value: 7, Topic: "t", Offset: 4}}},
		step[int]{},
	)
	var store streamtest.RecordingStore
	out := streamtest.Collect[int]()
	require.NoError(t, stream.From[int](src).To(out).Checkpointing(&store, stream.CheckpointEachBatch()).Run(context.Background()))
	assert.Equal(t, []int{7}, out.Values())
	assert.Equal(t, 1, out.Writes())
	assert.Equal(t, []streamtest.Save{{Topic: "t", Position: 5}}, store.Saves())
}

// TestBatchSavesEachPartitionAtMaxOffsetPlusOne ensures a batch spanning
// several partitions saves one position per partition, one past the highest
// offset seen, and elements without lineage save nothing.
func TestBatchSavesEachPartitionAtMaxOffsetPlusOne(t *testing.T) {
	src := batches(step[string]{elems: []stream.Element[string]{
		{Value: "a", Topic: "events", Partition: 1, Offset: 7},
		{Value: "b", Topic: "events", Partition: 0, Offset: 3},
		{Value: "c", Topic: "events", Partition: 1, Offset: 9},
		{Value: "d"}, // no lineage
		{Value: "e", Topic: "orders", Partition: 1, Offset: 0},
		{Value: "f", Topic: "events", Partition: 0, Offset: 4},
	}})
	var store streamtest.RecordingStore
	require.NoError(t, stream.From[string](src).Checkpointing(&store, stream.CheckpointEachBatch()).Run(context.Background()))
	assert.Equal(t, []streamtest.Save{
		{Topic: "events", Partition: 1, Position: 10},
		{Topic: "events", Partition: 0, Position: 5},
		{Topic: "orders", Partition: 1, Position: 1},
	}, store.Saves())
}

// TestRunTwiceFails ensures a pipeline reads its source once: a second Run, on
// the same Stream or another of the same pipeline, returns ErrAlreadyRun.
func TestRunTwiceFails(t *testing.T) {
	src := streamtest.Slice(ints(3))
	base := stream.From[int](src)
	s := base.Map(func(_ context.Context, v int) (int, error) { return v, nil })
	require.NoError(t, s.Run(context.Background()))
	require.ErrorIs(t, s.Run(context.Background()), stream.ErrAlreadyRun)
	require.ErrorIs(t, base.Run(context.Background()), stream.ErrAlreadyRun)
	assert.Equal(t, 1, src.Closes())
}

// TestCloseErrorIsReturned ensures a failed Close is reported when nothing
// else failed, and does not hide an earlier error.
func TestCloseErrorIsReturned(t *testing.T) {
	errClose := errors.New("close failed")

	src := batches[int]()
	src.close = func() error { return errClose }
	err := stream.From[int](src).Run(context.Background())
	require.ErrorIs(t, err, errClose)
	assert.Contains(t, err.Error(), "stream: close source")

	src = batches(step[int]{elems: []stream.Element[int]{{Value: 16}}})
	src.close = func() error { return errClose }
	err = stream.From[int](src).Map(failOn(16, errBoom)).Run(context.Background())
	require.ErrorIs(t, err, errBoom)
	assert.NotErrorIs(t, err, errClose)
	assert.Equal(t, "stream: map failed: boom", err.Error(), "a record without lineage has no coordinates")
}

// TestHandlerPanicIsNotRecovered ensures a panic goes through Run, as a
// *PanicError with the handler's stack,
// the source is still closed, and the batch is not saved.
func TestHandlerPanicIsNotRecovered(t *testing.T) {
	src := streamtest.Slice(ints(10))
	var store streamtest.RecordingStore
	s := stream.From[int](src).
		Tap(func(_ context.Context, v int) error {
			if v == 3 {
				panic("handler bug")
			}
			return nil
		}).
		Checkpointing(&store, stream.CheckpointEachBatch())
	requireRunPanic(t, "handler bug", "TestHandlerPanicIsNotRecovered.func1", func() { _ = s.Run(context.Background()) })
	assert.Equal(t, 1, src.Closes())
	assert.Empty(t, store.Saves())
}

// TestNilArgumentsAreRejected ensures building with a nil function panics at
// once, naming the operator, and a nil source fails Run.
func TestNilArgumentsAreRejected(t *testing.T) {
	s := stream.From[int](streamtest.Slice(ints(1)))
	assert.PanicsWithValue(t, "stream: Map called with a nil function", func() { s.Map(nil) })
	assert.Panics(t, func() { s.Filter(nil) })
	assert.Panics(t, func() { s.Tap(nil) })
	assert.Panics(t, func() { s.To(nil) })
	assert.Panics(t, func() { s.Checkpointing(nil) })
	assert.Panics(t, func() { stream.MapTo[int, string](s, nil) })

	err := stream.From[int](nil).Run(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nil source")
}

// TestSinkReceivesOneWritePerBatch ensures To hands the sink whole batches in
// order and passes the values on to later stages.
func TestSinkReceivesOneWritePerBatch(t *testing.T) {
	src := streamtest.Slice(ints(7), streamtest.BatchSize(3))
	var writes [][]int
	sink := sinkFunc[int](func(_ context.Context, v []int) error {
		writes = append(writes, append([]int(nil), v...))
		return nil
	})
	after := streamtest.Collect[int]()
	require.NoError(t, stream.From[int](src).To(sink).To(after).Run(context.Background()))
	assert.Equal(t, [][]int{{0, 1, 2}, {3, 4, 5}, {6}}, writes)
	assert.Equal(t, ints(7), after.Values())
}
