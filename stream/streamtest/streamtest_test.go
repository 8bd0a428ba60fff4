package streamtest_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

var errInjected = errors.New("injected")

func elems(from, to int64) []stream.Element[string] {
	var out []stream.Element[string]
	for off := from; off < to; off++ {
		out = append(out, stream.Element[string]{
			Value: string(rune('a' + off)), Topic: streamtest.Topic, Partition: streamtest.Partition, Offset: off, Epoch: checkpoint.NoEpoch,
		})
	}
	return out
}

// TestSliceReadsInBatchesWithLineage ensures Slice yields the values in
// batches of the chosen size with offset = index, then io.EOF.
func TestSliceReadsInBatchesWithLineage(t *testing.T) {
	ctx := context.Background()
	src := streamtest.Slice([]string{"a", "b", "c", "d", "e"}, streamtest.BatchSize(2))

	for _, want := range [][]stream.Element[string]{elems(0, 2), elems(2, 4), elems(4, 5)} {
		got, err := src.Read(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	got, err := src.Read(ctx)
	assert.ErrorIs(t, err, io.EOF)
	assert.Empty(t, got)
	assert.Equal(t, int64(5), src.Position())
	assert.Equal(t, 4, src.Reads())
}

// TestSliceDefaultBatchSizeIs100 ensures the documented default, also for a
// BatchSize of zero.
func TestSliceDefaultBatchSizeIs100(t *testing.T) {
	for _, src := range []*streamtest.SliceSource[int]{
		streamtest.Slice(make([]int, 250)),
		streamtest.Slice(make([]int, 250), streamtest.BatchSize(0)),
	} {
		got, err := src.Read(context.Background())
		require.NoError(t, err)
		assert.Len(t, got, 100)
	}
}

// TestSliceFailAtFailsTheChosenReadOnly ensures fault injection fails exactly
// the chosen calls, without advancing.
func TestSliceFailAtFailsTheChosenReadOnly(t *testing.T) {
	ctx := context.Background()
	src := streamtest.Slice([]string{"a", "b", "c"}, streamtest.BatchSize(1),
		streamtest.FailAt(2, errInjected), streamtest.FailAt(3, io.ErrUnexpectedEOF))

	got, err := src.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, elems(0, 1), got)
	_, err = src.Read(ctx)
	assert.ErrorIs(t, err, errInjected)
	_, err = src.Read(ctx)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	got, err = src.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, elems(1, 2), got)
}

// TestSliceResumeContinuesFromTheStore ensures Resume starts the next Read at
// the saved position, at 0 when none is saved, and reopens a closed source.
func TestSliceResumeContinuesFromTheStore(t *testing.T) {
	ctx := context.Background()
	src := streamtest.Slice([]string{"a", "b", "c", "d"}, streamtest.BatchSize(10))
	var store checkpoint.MemoryStore

	_, err := src.Read(ctx)
	require.NoError(t, err)
	require.NoError(t, src.Close())
	_, err = src.Read(ctx)
	require.ErrorIs(t, err, streamtest.ErrClosed)

	require.NoError(t, src.Resume(ctx, &store))
	got, err := src.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, elems(0, 4), got, "nothing saved: start at 0")

	require.NoError(t, store.Save(ctx, streamtest.Topic, streamtest.Partition, checkpoint.At(3)))
	require.NoError(t, src.Resume(ctx, &store))
	got, err = src.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, elems(3, 4), got)
	assert.Equal(t, 2, src.Resumes())
	assert.Equal(t, 1, src.Closes())
}

// TestSliceResumeReturnsStoreError ensures a failed Load is returned and the
// source does not silently start over.
func TestSliceResumeReturnsStoreError(t *testing.T) {
	ctx := context.Background()
	src := streamtest.Slice([]string{"a", "b", "c"}, streamtest.BatchSize(1))
	_, err := src.Read(ctx)
	require.NoError(t, err)

	var store streamtest.RecordingStore
	store.FailLoad(checkpoint.ErrCorrupt)
	err = src.Resume(ctx, &store)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	assert.Equal(t, int64(1), src.Position())
}

// TestSliceReadHonoursCancelledContext ensures Read returns ctx.Err().
func TestSliceReadHonoursCancelledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := streamtest.Slice([]int{1}).Read(ctx)
	require.ErrorIs(t, err, context.Canceled)
}

// TestCollectKeepsValuesAndFailsChosenWrite ensures Collect keeps copies of
// written values in order and fault injection drops the failed write.
func TestCollectKeepsValuesAndFailsChosenWrite(t *testing.T) {
	ctx := context.Background()
	c := streamtest.Collect[int](streamtest.FailAt(2, errInjected))
	in := []int{1, 2}
	require.NoError(t, c.Write(ctx, in))
	in[0] = 99
	require.ErrorIs(t, c.Write(ctx, []int{3}), errInjected)
	require.NoError(t, c.Write(ctx, []int{4}))
	assert.Equal(t, []int{1, 2, 4}, c.Values())
	assert.Equal(t, 3, c.Writes())

	var zero streamtest.Collector[string]
	require.NoError(t, zero.Write(ctx, []string{"x"}))
	assert.Equal(t, []string{"x"}, zero.Values())
}

// TestCollectConcurrentUse ensures concurrent writes and reads are race-free
// (run with -race) and nothing is lost.
func TestCollectConcurrentUse(t *testing.T) {
	c := streamtest.Collect[int]()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				assert.NoError(t, c.Write(context.Background(), []int{i}))
				_ = c.Values()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, c.Values(), 400)
}

// TestRecordingStoreRecordsSavesInOrder ensures every successful Save is
// recorded in call order, a failed one is neither stored nor recorded, and
// FailLoad fails Load until cleared.
func TestRecordingStoreRecordsSavesInOrder(t *testing.T) {
	ctx := context.Background()
	var s streamtest.RecordingStore
	s.FailSaveAt(2, errInjected)

	require.NoError(t, s.Save(ctx, "a", 0, checkpoint.At(1)))
	require.ErrorIs(t, s.Save(ctx, "a", 0, checkpoint.At(2)), errInjected)
	require.NoError(t, s.Save(ctx, "b", 1, checkpoint.At(5)))
	require.ErrorIs(t, s.Save(ctx, "a", 0, checkpoint.At(-1)), checkpoint.ErrInvalidPosition)
	assert.Equal(t, []streamtest.Save{{Topic: "a", Partition: 0, Position: 1, Epoch: -1}, {Topic: "b", Partition: 1, Position: 5, Epoch: -1}}, s.Saves())

	pos, found, err := s.Load(ctx, "a", 0)
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(1), pos.Offset)

	s.FailLoad(errInjected)
	_, _, err = s.Load(ctx, "a", 0)
	require.ErrorIs(t, err, errInjected)
	s.FailLoad(nil)
	_, _, err = s.Load(ctx, "a", 0)
	require.NoError(t, err)
	assert.Equal(t, 3, s.Loads())

	off, found := s.Position("b", 1)
	assert.True(t, found)
	assert.Equal(t, int64(5), off)
}

// TestRecordingStoreConcurrentUse ensures the store is race-free under -race.
func TestRecordingStoreConcurrentUse(t *testing.T) {
	var s streamtest.RecordingStore
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				assert.NoError(t, s.Save(context.Background(), "t", int32(g), checkpoint.At(int64(i))))
				_, _, err := s.Load(context.Background(), "t", int32(g))
				assert.NoError(t, err)
				_ = s.Saves()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, s.Saves(), 400)
}
