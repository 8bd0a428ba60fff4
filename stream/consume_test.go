package stream_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// fastBackoff keeps retry tests quick.
var fastBackoff = stream.WithBackoff(time.Millisecond, 2*time.Millisecond)

// lossySource reads a batch from its SliceSource and then reports a failure
// on the chosen Read calls, as a network source that loses its connection
// after fetching does: the batch is lost unless the consumer resumes from
// its checkpoint.
type lossySource struct {
	*streamtest.SliceSource[int]
	loseAt map[int]bool

	mu sync.Mutex
	n  int
}

func (l *lossySource) Read(ctx context.Context) ([]stream.Element[int], error) {
	l.mu.Lock()
	l.n++
	lose := l.loseAt[l.n]
	l.mu.Unlock()
	b, err := l.SliceSource.Read(ctx)
	if lose && err == nil {
		return b, errConn
	}
	return b, err
}

type sourceFailure struct {
	err     error
	attempt int
}

// TestConsumeForeverResumesFromStoreAfterSourceError ensures a source failure
// is retried from the last saved position: the records read after it (here a
// batch lost with the connection) are delivered again, none is skipped, and
// every failure reaches OnSourceError.
func TestConsumeForeverResumesFromStoreAfterSourceError(t *testing.T) {
	const n = 50
	src := &lossySource{
		SliceSource: streamtest.Slice(ints(n), streamtest.BatchSize(10)),
		loseAt:      map[int]bool{3: true, 6: true},
	}
	var store streamtest.RecordingStore
	var handled []int
	var failures []sourceFailure

	err := stream.ConsumeForever(context.Background(), src, &store,
		func(_ context.Context, v int) error { handled = append(handled, v); return nil },
		fastBackoff,
		stream.OnSourceError(func(err error, attempt int) { failures = append(failures, sourceFailure{err, attempt}) }), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.NoError(t, err, "a replay source ends with io.EOF")
	assert.Equal(t, ints(n), handled, "the lost batches are read again from the saved position, in order")
	require.Len(t, failures, 2, "two reconnects")
	for _, f := range failures {
		require.ErrorIs(t, f.err, errConn)
		var se *stream.SourceError
		require.ErrorAs(t, f.err, &se)
		assert.Equal(t, 1, f.attempt, "a batch was handled between the failures")
	}
	assert.Equal(t, saves(10, 20, 30, 40, 50), store.Saves())
	assert.Equal(t, 3, src.Resumes(), "resumed at start and after each failure")
	assert.Equal(t, 3, src.Closes(), "each attempt closes the source")
}

// TestConsumeForeverStartsAtTheSavedPosition ensures ConsumeForever resumes
// from the store before the first Read.
func TestConsumeForeverStartsAtTheSavedPosition(t *testing.T) {
	ctx := context.Background()
	var store streamtest.RecordingStore
	require.NoError(t, store.Save(ctx, streamtest.Topic, streamtest.Partition, checkpoint.At(42)))
	var handled []int

	err := stream.ConsumeForever(ctx, streamtest.Slice(ints(45)), &store,
		func(_ context.Context, v int) error { handled = append(handled, v); return nil }, stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.NoError(t, err)
	assert.Equal(t, []int{42, 43, 44}, handled)
	pos, _ := store.Position(streamtest.Topic, streamtest.Partition)
	assert.Equal(t, int64(45), pos)
}

// TestConsumeForeverCountsConsecutiveFailures ensures attempt counts the
// failures since the last handled batch and restarts at 1 after one.
func TestConsumeForeverCountsConsecutiveFailures(t *testing.T) {
	src := streamtest.Slice(ints(30), streamtest.BatchSize(10),
		streamtest.FailAt(2, errConn), streamtest.FailAt(3, errConn), streamtest.FailAt(4, errConn),
		streamtest.FailAt(6, errConn))
	var store streamtest.RecordingStore
	var attempts []int

	err := stream.ConsumeForever(context.Background(), src, &store,
		func(context.Context, int) error { return nil },
		fastBackoff,
		stream.OnSourceError(func(_ error, attempt int) { attempts = append(attempts, attempt) }), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.NoError(t, err)
	assert.Equal(t, []int{1, 2, 3, 1}, attempts)
	assert.Equal(t, saves(10, 20, 30), store.Saves())
}

// TestConsumeForeverReturnsHandlerError ensures a handler error is returned at
// once, never retried, with the failed batch unsaved.
func TestConsumeForeverReturnsHandlerError(t *testing.T) {
	src := streamtest.Slice(ints(50), streamtest.BatchSize(10))
	var store streamtest.RecordingStore
	retried := false

	err := stream.ConsumeForever(context.Background(), src, &store,
		func(_ context.Context, v int) error {
			if v == 15 {
				return errBoom
			}
			return nil
		},
		fastBackoff,
		stream.OnSourceError(func(error, int) { retried = true }), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.ErrorIs(t, err, errBoom)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, int64(15), re.Offset)
	assert.False(t, retried)
	assert.Equal(t, saves(10), store.Saves())
	assert.Equal(t, 1, src.Closes())
}

// TestConsumeForeverReturnsStoreSaveError ensures a failed checkpoint save is
// returned, not retried.
func TestConsumeForeverReturnsStoreSaveError(t *testing.T) {
	var store streamtest.RecordingStore
	store.FailSaveAt(2, errDisk)
	err := stream.ConsumeForever(context.Background(), streamtest.Slice(ints(50), streamtest.BatchSize(10)), &store,
		func(context.Context, int) error { return nil }, fastBackoff, stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))
	require.ErrorIs(t, err, errDisk)
	assert.Equal(t, saves(10), store.Saves())
}

// TestConsumeForeverReturnsNilOnCancel ensures cancelling ctx ends
// ConsumeForever with nil, while handling and while backing off, after
// saving the completed batches.
func TestConsumeForeverReturnsNilOnCancel(t *testing.T) {
	t.Run("while handling", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var store streamtest.RecordingStore
		err := stream.ConsumeForever(ctx, streamtest.Slice(ints(100), streamtest.BatchSize(10)), &store,
			func(ctx context.Context, v int) error {
				if v == 25 {
					cancel()
					return ctx.Err()
				}
				return nil
			}, stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))
		require.NoError(t, err)
		assert.Equal(t, saves(10, 20), store.Saves())
	})
	t.Run("while backing off", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var store streamtest.RecordingStore
		start := time.Now()
		err := stream.ConsumeForever(ctx, streamtest.Slice(ints(10), streamtest.FailAt(1, errConn)), &store,
			func(context.Context, int) error { return nil },
			stream.WithBackoff(time.Hour, time.Hour),
			stream.OnSourceError(func(error, int) { cancel() }), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))
		require.NoError(t, err)
		assert.Less(t, time.Since(start), time.Minute)
		assert.Empty(t, store.Saves())
	})
	t.Run("before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		src := streamtest.Slice(ints(10))
		require.NoError(t, stream.ConsumeForever(ctx, src, &streamtest.RecordingStore{},
			func(context.Context, int) error { return nil }))
		assert.Equal(t, 0, src.Reads())
	})
}

// TestConsumeForeverStopsOnCorruptCheckpoint ensures a checkpoint that cannot
// be read is returned at once: the pipeline handles nothing rather than
// starting again from the beginning.
func TestConsumeForeverStopsOnCorruptCheckpoint(t *testing.T) {
	ctx := context.Background()
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, store.Save(ctx, streamtest.Topic, streamtest.Partition, checkpoint.At(5)))
	path, err := store.Path(streamtest.Topic, streamtest.Partition)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, make([]byte, 16), 0o600))

	src := streamtest.Slice(ints(10))
	handled := 0
	retried := false
	err = stream.ConsumeForever(ctx, src, store,
		func(context.Context, int) error { handled++; return nil },
		fastBackoff,
		stream.OnSourceError(func(error, int) { retried = true }), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	assert.Contains(t, err.Error(), path)
	assert.Equal(t, 0, handled)
	assert.False(t, retried)
	assert.Equal(t, 0, src.Reads())
	assert.Equal(t, 1, src.Closes())
}

// TestConsumeForeverRetriesTransientLoadError ensures a Resume that fails for
// another reason than a corrupt checkpoint is retried like a source failure.
func TestConsumeForeverRetriesTransientLoadError(t *testing.T) {
	errIO := errors.New("i/o timeout")
	var store streamtest.RecordingStore
	store.FailLoad(errIO)
	var failures []error
	var handled []int

	err := stream.ConsumeForever(context.Background(), streamtest.Slice(ints(3)), &store,
		func(_ context.Context, v int) error { handled = append(handled, v); return nil },
		fastBackoff,
		stream.OnSourceError(func(err error, attempt int) {
			failures = append(failures, err)
			if attempt == 2 {
				store.FailLoad(nil)
			}
		}), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.NoError(t, err)
	require.Len(t, failures, 2)
	require.ErrorIs(t, failures[0], errIO)
	var se *stream.SourceError
	require.ErrorAs(t, failures[0], &se)
	assert.Equal(t, []int{0, 1, 2}, handled)
	assert.Equal(t, 3, store.Loads())
}

// TestConsumeForeverWithoutResumerReturnsSourceError ensures a source that
// cannot resume from the store is not retried blindly.
func TestConsumeForeverWithoutResumerReturnsSourceError(t *testing.T) {
	src := batches(
		step[int]{elems: []stream.Element[int]{{Value: 1, Topic: "t"}}},
		step[int]{err: errConn},
	)
	var store streamtest.RecordingStore
	var handled []int
	err := stream.ConsumeForever(context.Background(), src, &store,
		func(_ context.Context, v int) error { handled = append(handled, v); return nil }, fastBackoff, stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	require.ErrorIs(t, err, errConn)
	var se *stream.SourceError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, err.Error(), "Resumer")
	assert.Equal(t, []int{1}, handled)
	assert.Equal(t, []streamtest.Save{{Topic: "t", Position: 1}}, store.Saves())
}

// TestConsumeForeverReportsCheckpoints ensures OnCheckpoint sees every saved
// position, after it is saved.
func TestConsumeForeverReportsCheckpoints(t *testing.T) {
	var store streamtest.RecordingStore
	var reported []string
	err := stream.ConsumeForever(context.Background(), streamtest.Slice(ints(25), streamtest.BatchSize(10)), &store,
		func(context.Context, int) error { return nil },
		stream.OnCheckpoint(func(topic string, partition int32, position checkpoint.Position) {
			saved, _ := store.Position(topic, partition)
			assert.Equal(t, position.Offset, saved, "reported after the save")
			assert.Equal(t, checkpoint.NoEpoch, position.Epoch)
			reported = append(reported, fmt.Sprintf("%s/%d@%d", topic, partition, position.Offset))
		}), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))
	require.NoError(t, err)
	assert.Equal(t, []string{"streamtest/0@10", "streamtest/0@20", "streamtest/0@25"}, reported)
}

// TestConsumeForeverRejectsNilArguments ensures missing arguments are errors,
// not panics deep inside a run.
func TestConsumeForeverRejectsNilArguments(t *testing.T) {
	ctx := context.Background()
	handle := func(context.Context, int) error { return nil }
	require.Error(t, stream.ConsumeForever[int](ctx, nil, &streamtest.RecordingStore{}, handle))
	require.Error(t, stream.ConsumeForever(ctx, streamtest.Slice(ints(1)), nil, handle))
	require.Error(t, stream.ConsumeForever(ctx, streamtest.Slice(ints(1)), &streamtest.RecordingStore{}, nil))
}
