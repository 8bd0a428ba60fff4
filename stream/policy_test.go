package stream_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// stageStats returns the counters of the stage named name.

// failures collects what an OnError hook or a dead-letter sink is given.
type failures struct {
	mu sync.Mutex
	fs []stream.Failure
}

func (f *failures) hook(x stream.Failure) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fs = append(f.fs, x)
}

func (f *failures) Write(_ context.Context, fs []stream.Failure) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fs = append(f.fs, fs...)
	return nil
}

func (f *failures) all() []stream.Failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]stream.Failure(nil), f.fs...)
}

// TestSinkRetryWritesEveryValue ensures a sink that fails twice under
// Retry(3) gets every value written once, the OnError hook sees both
// failures with their attempt numbers, Stats count 2 retries, and the
// position reaches the end.
func TestSinkRetryWritesEveryValue(t *testing.T) {
	src := streamtest.Slice(ints(10), streamtest.BatchSize(5))
	out := streamtest.Collect[int](streamtest.FailAt(1, errDisk), streamtest.FailAt(2, errDisk))
	store := &streamtest.RecordingStore{}
	var seen failures
	s := stream.From(src).
		To(out, stream.Retry(3, time.Millisecond, time.Millisecond), stream.OnError(seen.hook)).
		Checkpointing(store)
	require.NoError(t, s.Run(context.Background()))

	require.Equal(t, ints(10), out.Values())
	require.Equal(t, 4, out.Writes(), "two failed writes of the first batch, then one per batch")
	st := stageStats(t, s.Stats(), stream.StageSink)
	require.Equal(t, int64(2), st.Retried)
	require.Equal(t, int64(2), st.Failed)
	require.Equal(t, int64(10), st.In)
	require.Equal(t, int64(10), st.Out)
	require.Zero(t, st.Skipped)
	require.Zero(t, st.DeadLettered)

	fs := seen.all()
	require.Len(t, fs, 2)
	for i, f := range fs {
		require.Equal(t, i+1, f.Attempt)
		require.Equal(t, stream.StageSink, f.Stage)
		require.Equal(t, streamtest.Topic, f.Topic)
		require.Equal(t, int64(0), f.Offset, "a sink failure names the batch's first record")
		require.ErrorIs(t, f.Err, errDisk)
	}
	pos, ok := store.Position(streamtest.Topic, streamtest.Partition)
	require.True(t, ok)
	require.Equal(t, int64(10), pos)
}

// TestSinkRetryExhaustedStops ensures a sink that fails more often than
// Retry allows stops Run with a *RecordError naming the batch's first
// record, and the batch's position is not saved.
func TestSinkRetryExhaustedStops(t *testing.T) {
	src := streamtest.Slice(ints(10), streamtest.BatchSize(5))
	out := streamtest.Collect[int](streamtest.FailAt(2, errDisk), streamtest.FailAt(3, errDisk))
	store := &streamtest.RecordingStore{}
	s := stream.From(src).To(out, stream.Retry(2, time.Millisecond, time.Millisecond)).Checkpointing(store)
	err := s.Run(context.Background())
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	require.Equal(t, stream.StageSink, re.Stage)
	require.Equal(t, int64(5), re.Offset)
	require.ErrorIs(t, err, errDisk)
	require.Equal(t, ints(5), out.Values())
	pos, _ := store.Position(streamtest.Topic, streamtest.Partition)
	require.Equal(t, int64(5), pos)
	require.Equal(t, int64(1), stageStats(t, s.Stats(), stream.StageSink).Retried)
}

// TestSinkDeadLetterWritesEachValue ensures a failed sink Write under
// DeadLetter gives the dead-letter sink one Failure per value of the batch,
// each with its own lineage, as To's documentation says, and counts each
// as dead-lettered; Skip counts each value of the dropped batch as skipped.
func TestSinkDeadLetterWritesEachValue(t *testing.T) {
	src := streamtest.Slice(ints(10), streamtest.BatchSize(5))
	out := streamtest.Collect[int](streamtest.FailAt(2, errDisk))
	var dead failures
	s := stream.From(src).To(out, stream.DeadLetter(&dead))
	require.NoError(t, s.Run(context.Background()))
	require.Equal(t, ints(5), out.Values())

	fs := dead.all()
	require.Len(t, fs, 5)
	for i, f := range fs {
		require.Equal(t, 5+i, f.Value, "each dead letter carries one value")
		require.Equal(t, int64(5+i), f.Offset, "and that value's offset")
		require.Equal(t, streamtest.Topic, f.Topic)
		require.Equal(t, stream.StageSink, f.Stage)
		require.Equal(t, 1, f.Attempt)
		require.ErrorIs(t, f.Err, errDisk)
	}
	st := stageStats(t, s.Stats(), stream.StageSink)
	require.Equal(t, int64(5), st.DeadLettered)
	require.Equal(t, int64(1), st.Failed)

	src = streamtest.Slice(ints(10), streamtest.BatchSize(5))
	out = streamtest.Collect[int](streamtest.FailAt(1, errDisk))
	store := &streamtest.RecordingStore{}
	s = stream.From(src).To(out, stream.Skip()).Checkpointing(store)
	require.NoError(t, s.Run(context.Background()))
	require.Equal(t, []int{5, 6, 7, 8, 9}, out.Values())
	require.Equal(t, int64(5), stageStats(t, s.Stats(), stream.StageSink).Skipped, "Skipped counts records")
	pos, _ := store.Position(streamtest.Topic, streamtest.Partition)
	require.Equal(t, int64(10), pos)
}

// TestMapOnErrorSeesEveryAttempt ensures OnError sees each failed call of a
// Map under Retry, before the failure policy applies, and Stats count
// failures and retries per call.
func TestMapOnErrorSeesEveryAttempt(t *testing.T) {
	calls := map[int]int{}
	var mu sync.Mutex
	var seen failures
	var dead failures
	s := stream.From(streamtest.Slice(ints(6))).
		Map(func(_ context.Context, v int) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[v]++
			if v == 3 || (v == 4 && calls[v] == 1) {
				return 0, errBoom
			}
			return v, nil
		}, stream.Retry(2, time.Millisecond, time.Millisecond), stream.OnError(seen.hook), stream.DeadLetter(&dead))
	out := streamtest.Collect[int]()
	s = s.To(out)
	require.NoError(t, s.Run(context.Background()))
	require.Equal(t, []int{0, 1, 2, 4, 5}, out.Values())
	fs := seen.all()
	require.Len(t, fs, 3) // 3 twice, 4 once
	d := dead.all()
	require.Len(t, d, 1)
	require.Equal(t, 3, d[0].Value)
	require.Equal(t, 2, d[0].Attempt)
	require.Equal(t, int64(3), d[0].Offset)
	st := stageStats(t, s.Stats(), stream.StageMap)
	require.Equal(t, int64(3), st.Failed)
	require.Equal(t, int64(2), st.Retried)
	require.Equal(t, int64(1), st.DeadLettered)
}

// failingDeadLetters is a dead-letter sink whose every Write fails.
type failingDeadLetters struct{ err error }

func (d failingDeadLetters) Write(context.Context, []stream.Failure) error { return d.err }

// rejectingAsync is an AsyncSink that acknowledges every batch as failed
// at its first record.
type rejectingAsync struct{ err error }

func (r rejectingAsync) Write(context.Context, []int) error { return r.err }
func (r rejectingAsync) WriteAsync(_ context.Context, _ []int, ack func(int, error)) error {
	ack(0, r.err)
	return nil
}
func (r rejectingAsync) Flush(context.Context) error { return nil }

// TestDeadLetterWriteFailureIsSeenByOnErrorAsADeadLetterError ensures that
// when a DeadLetter write fails, the stage's OnError hooks see it after the
// function's own failure, as a *DeadLetterError naming the record and
// wrapping both errors, so a hook can tell the two apart; and Run returns
// that same error. For a Map, a sink (To) and an asynchronous sink.
func TestDeadLetterWriteFailureIsSeenByOnErrorAsADeadLetterError(t *testing.T) {
	errDead := errors.New("dead-letter topic unwritable")
	for _, tc := range []struct {
		name   string
		build  func(hooks *failures) *stream.Stream[int]
		cause  error
		offset int64
	}{
		{"map", func(hooks *failures) *stream.Stream[int] {
			return stream.From(streamtest.Slice(ints(6))).
				Map(func(_ context.Context, v int) (int, error) {
					if v == 3 {
						return 0, errBoom
					}
					return v, nil
				}, stream.OnError(hooks.hook), stream.DeadLetter(failingDeadLetters{errDead}))
		}, errBoom, 3},
		{"sink", func(hooks *failures) *stream.Stream[int] {
			return stream.From(streamtest.Slice(ints(10), streamtest.BatchSize(5))).
				To(streamtest.Collect[int](streamtest.FailAt(2, errDisk)),
					stream.OnError(hooks.hook), stream.DeadLetter(failingDeadLetters{errDead}))
		}, errDisk, 5},
		{"async sink", func(hooks *failures) *stream.Stream[int] {
			return stream.From(streamtest.Slice(ints(10), streamtest.BatchSize(5))).
				To(rejectingAsync{errDisk}, stream.OnError(hooks.hook), stream.DeadLetter(failingDeadLetters{errDead}))
		}, errDisk, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hooks failures
			err := tc.build(&hooks).Run(context.Background())

			var dle *stream.DeadLetterError
			require.ErrorAs(t, err, &dle, "Run returns the dead-letter failure")
			require.ErrorIs(t, err, errDead)
			require.ErrorIs(t, err, tc.cause, "wrapping the failure it was writing")
			require.Equal(t, streamtest.Topic, dle.Cause.Topic)
			require.Equal(t, int32(streamtest.Partition), dle.Cause.Partition)
			require.Equal(t, tc.offset, dle.Cause.Offset)
			require.Contains(t, dle.Error(), fmt.Sprintf("%s/%d at offset %d", streamtest.Topic, streamtest.Partition, tc.offset))

			fs := hooks.all()
			require.Len(t, fs, 2, "OnError sees the function's failure, then the dead-letter failure")
			require.ErrorIs(t, fs[0].Err, tc.cause)
			require.NotErrorAs(t, fs[0].Err, &dle, "the first is the function's own error")
			var seen *stream.DeadLetterError
			require.ErrorAs(t, fs[1].Err, &seen, "the second is the dead-letter failure")
			require.ErrorIs(t, fs[1].Err, errDead)
			require.ErrorIs(t, fs[1].Err, tc.cause)
			require.Equal(t, err.Error(), fs[1].Err.Error())
			for _, f := range fs {
				require.Equal(t, streamtest.Topic, f.Topic)
				require.Equal(t, tc.offset, f.Offset, "both name the record")
			}
		})
	}
}
