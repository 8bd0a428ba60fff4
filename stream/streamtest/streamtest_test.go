package streamtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestRecordingStoreNumbersStateSavesWithSaves ensures state saves and
// position saves share one sequence, so a test can check that a round's
// state was saved before its positions, and that LoadState returns the last
// snapshot.
func TestRecordingStoreNumbersStateSavesWithSaves(t *testing.T) {
	ctx := context.Background()
	var s streamtest.RecordingStore
	require.NoError(t, s.SaveState(ctx, "window", []byte("abc")))
	require.NoError(t, s.Save(ctx, "a", 0, checkpoint.At(1)))
	require.NoError(t, s.Save(ctx, "a", 1, checkpoint.At(2)))
	require.NoError(t, s.SaveState(ctx, "window", []byte("abcde")))
	require.NoError(t, s.Save(ctx, "a", 0, checkpoint.At(3)))

	assert.Equal(t, []streamtest.StateSave{
		{Name: "window", SizeBytes: 3, Seq: 1},
		{Name: "window", SizeBytes: 5, Seq: 4},
	}, s.StateSaves())
	assert.Equal(t, []int{2, 3, 5}, s.SaveSeqs())
	assert.Len(t, s.Saves(), 3, "Saves is unchanged by state saves")

	state, found, err := s.LoadState(ctx, "window")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, []byte("abcde"), state)
	_, found, err = s.LoadState(ctx, "other")
	require.NoError(t, err)
	assert.False(t, found)
}

// TestRecordingStoreFailStateSaveAtFailsTheChosenCallOnly ensures
// FailStateSaveAt fails the n-th SaveState call (Save calls not counted),
// which then stores, records and numbers nothing, and that FailSaveAt still
// counts Save calls alone.
func TestRecordingStoreFailStateSaveAtFailsTheChosenCallOnly(t *testing.T) {
	ctx := context.Background()
	var s streamtest.RecordingStore
	s.FailStateSaveAt(2, errInjected)
	s.FailSaveAt(2, errInjected)

	require.NoError(t, s.SaveState(ctx, "w", []byte("one")))
	require.NoError(t, s.Save(ctx, "a", 0, checkpoint.At(1)))
	require.ErrorIs(t, s.SaveState(ctx, "w", []byte("two")), errInjected)
	require.ErrorIs(t, s.Save(ctx, "a", 0, checkpoint.At(2)), errInjected)
	require.ErrorIs(t, s.SaveState(ctx, "a/b", nil), checkpoint.ErrInvalidStateName)
	require.NoError(t, s.SaveState(ctx, "w", []byte("four")))

	assert.Equal(t, []streamtest.StateSave{
		{Name: "w", SizeBytes: 3, Seq: 1},
		{Name: "w", SizeBytes: 4, Seq: 3},
	}, s.StateSaves())
	assert.Equal(t, []int{2}, s.SaveSeqs())
	state, _, err := s.LoadState(ctx, "w")
	require.NoError(t, err)
	assert.Equal(t, []byte("four"), state)
}

// TestRecordingStoreStateConcurrentUse ensures state and position saves
// from many goroutines are race-free under -race and numbered 1..n once each.
func TestRecordingStoreStateConcurrentUse(t *testing.T) {
	var s streamtest.RecordingStore
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("w%d", g)
			for i := range 50 {
				assert.NoError(t, s.SaveState(context.Background(), name, make([]byte, i)))
				assert.NoError(t, s.Save(context.Background(), "t", int32(g), checkpoint.At(int64(i))))
				_, _, err := s.LoadState(context.Background(), name)
				assert.NoError(t, err)
				_ = s.StateSaves()
			}
		}()
	}
	wg.Wait()
	seqs := s.SaveSeqs()
	for _, st := range s.StateSaves() {
		seqs = append(seqs, st.Seq)
	}
	slices.Sort(seqs)
	want := make([]int, 400)
	for i := range want {
		want[i] = i + 1
	}
	assert.Equal(t, want, seqs)
}

func upper(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil }

// TestFaultsFailAtFailsExactlyRecordK ensures FailAt fails the k-th record
// (from 0) and only it, without calling the function there.
func TestFaultsFailAtFailsExactlyRecordK(t *testing.T) {
	ctx := context.Background()
	var seen []string
	faults := streamtest.NewFaults[string]().FailAt(2, errInjected)
	fn := faults.Map(func(ctx context.Context, s string) (string, error) {
		seen = append(seen, s)
		return upper(ctx, s)
	})
	for i, in := range []string{"a", "b", "c", "d", "e"} {
		out, err := fn(ctx, in)
		if i == 2 {
			assert.ErrorIs(t, err, errInjected, "record %d", i)
			continue
		}
		require.NoError(t, err, "record %d", i)
		assert.Equal(t, strings.ToUpper(in), out)
	}
	assert.Equal(t, []string{"a", "b", "d", "e"}, seen)
	assert.Equal(t, 5, faults.Calls())
	assert.Equal(t, 5, faults.Records())
	assert.Equal(t, 1, faults.Injected())
}

// TestFaultsFailAtNilErrorIsErrInjected ensures a rule without an error
// returns ErrInjected.
func TestFaultsFailAtNilErrorIsErrInjected(t *testing.T) {
	fn := streamtest.NewFaults[int]().FailAt(0, nil).Tap(nil)
	assert.ErrorIs(t, fn(context.Background(), 7), streamtest.ErrInjected)
	assert.NoError(t, fn(context.Background(), 8))
}

// TestFaultsPanicAtPanicsAtRecordKOnly ensures PanicAt panics with the value
// at record k and nowhere else.
func TestFaultsPanicAtPanicsAtRecordKOnly(t *testing.T) {
	ctx := context.Background()
	faults := streamtest.NewFaults[int]().PanicAt(1, "boom")
	fn := faults.Filter(nil)
	keep, err := fn(ctx, 10)
	require.NoError(t, err)
	assert.True(t, keep)
	assert.PanicsWithValue(t, "boom", func() { _, _ = fn(ctx, 11) })
	keep, err = fn(ctx, 12)
	require.NoError(t, err)
	assert.True(t, keep)
	assert.Equal(t, 1, faults.Injected())
}

// TestFaultsFailTimesFailsFirstAttemptsOfRecordK ensures FailTimes with
// Attempts fails the first n calls of record k, counts the calls after a
// failure as retries of the same record, and lets the next call through.
func TestFaultsFailTimesFailsFirstAttemptsOfRecordK(t *testing.T) {
	ctx := context.Background()
	faults := streamtest.NewFaults[string]().Attempts(3).FailTimes(1, 2, errInjected)
	fn := faults.Map(upper)
	calls := []struct {
		in   string
		fail bool
	}{{"a", false}, {"b", true}, {"b", true}, {"b", false}, {"c", false}}
	for i, c := range calls {
		out, err := fn(ctx, c.in)
		if c.fail {
			assert.ErrorIs(t, err, errInjected, "call %d", i)
			continue
		}
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, strings.ToUpper(c.in), out)
	}
	assert.Equal(t, 5, faults.Calls())
	assert.Equal(t, 3, faults.Records())
}

// TestFaultsCountsAFunctionFailureAsAnAttempt ensures a failure of the
// wrapped function itself, not only an injected one, makes the next call a
// retry of the same record.
func TestFaultsCountsAFunctionFailureAsAnAttempt(t *testing.T) {
	ctx := context.Background()
	faults := streamtest.NewFaults[int]().Attempts(2).FailAt(1, errInjected)
	first := true
	fn := faults.Tap(func(_ context.Context, v int) error {
		if v == 0 && first {
			first = false
			return errBoom
		}
		return nil
	})
	assert.ErrorIs(t, fn(ctx, 0), errBoom)
	assert.NoError(t, fn(ctx, 0), "retry of record 0")
	assert.ErrorIs(t, fn(ctx, 1), errInjected)
	assert.ErrorIs(t, fn(ctx, 1), errInjected, "retry of record 1 fails too")
	assert.NoError(t, fn(ctx, 2), "record 1 gave up after 2 attempts")
	assert.Equal(t, 3, faults.Records())
}

var errBoom = errors.New("boom")

// TestFaultsFailTimesWithRetryPassesOnThirdAttempt ensures FailTimes(k, 2)
// with stream.Retry(3, ...) lets record k through on its third call.
func TestFaultsFailTimesWithRetryPassesOnThirdAttempt(t *testing.T) {
	faults := streamtest.NewFaults[string]().Attempts(3).FailTimes(1, 2, errInjected)
	res := streamtest.RunPipeline(t.Context(), []string{"a", "b", "c"}, func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(faults.Map(upper), stream.Retry(3, time.Millisecond, time.Millisecond))
	})
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"A", "B", "C"}, res.Out)
	assert.Equal(t, int64(2), res.Stage(stream.StageMap).Failed)
	assert.Equal(t, 5, faults.Calls())
	assert.Equal(t, 3, faults.Records())
	assert.Equal(t, int64(3), res.Position)
}

// TestFaultsRetryBackoffOnFakeClock ensures the retry backoff waits on the
// fake clock: the record passes only once the test advanced past each wait.
func TestFaultsRetryBackoffOnFakeClock(t *testing.T) {
	clock := streamtest.NewClock()
	faults := streamtest.NewFaults[string]().Attempts(3).FailTimes(0, 2, errInjected)
	go func() {
		for range 2 {
			clock.WaitForTimers(1)
			clock.Advance(time.Minute)
		}
	}()
	res := streamtest.RunPipeline(t.Context(), []string{"a"}, func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(faults.Map(upper), stream.Retry(3, time.Minute, time.Minute))
	}, streamtest.WithClock(clock))
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"A"}, res.Out)
	assert.Equal(t, streamtest.ClockStart.Add(2*time.Minute), clock.Now())
}

// TestFaultsFailAtWithSkipDropsOnlyRecordK ensures a pipeline with Skip
// drops exactly the faulted record and saves past it.
func TestFaultsFailAtWithSkipDropsOnlyRecordK(t *testing.T) {
	faults := streamtest.NewFaults[string]().FailAt(2, errInjected)
	res := streamtest.RunPipeline(t.Context(), []string{"a", "b", "c", "d"}, func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(faults.Map(upper), stream.Skip())
	})
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"A", "B", "D"}, res.Out)
	assert.Equal(t, int64(1), res.Stage(stream.StageMap).Skipped)
	assert.Equal(t, int64(4), res.Position)
}

// TestFaultsPanicAtWithRecoverSkips ensures an injected panic becomes a
// *stream.PanicError under Recover, and without Recover Run panics with a
// *stream.PanicError holding the value and the stack where it was raised.
func TestFaultsPanicAtWithRecoverSkips(t *testing.T) {
	var got []error
	faults := streamtest.NewFaults[int]().PanicAt(1, "boom")
	res := streamtest.RunPipeline(t.Context(), []int{0, 1, 2}, func(s *stream.Stream[int]) *stream.Stream[int] {
		return s.Tap(faults.Tap(nil), stream.Recover(), stream.Skip(),
			stream.OnError(func(f stream.Failure) { got = append(got, f.Err) }))
	})
	require.NoError(t, res.Err)
	assert.Equal(t, []int{0, 2}, res.Out)
	require.Len(t, got, 1)
	var pe *stream.PanicError
	require.ErrorAs(t, got[0], &pe)
	assert.Equal(t, "boom", pe.Value)

	var v any
	func() {
		defer func() { v = recover() }()
		streamtest.RunPipeline(t.Context(), []int{0, 1, 2}, func(s *stream.Stream[int]) *stream.Stream[int] {
			return s.Tap(streamtest.NewFaults[int]().PanicAt(1, "boom").Tap(nil))
		})
	}()
	require.IsType(t, &stream.PanicError{}, v, "Run panics with a *stream.PanicError")
	assert.Equal(t, "boom", v.(*stream.PanicError).Value)
	assert.Contains(t, string(v.(*stream.PanicError).Stack), "stream/streamtest/faults.go", "the stack where the panic was raised")
}

// TestFaultsSinkFailsTheWriteHoldingRecordK ensures a wrapped sink fails the
// whole Write that holds record k, writing none of it.
func TestFaultsSinkFailsTheWriteHoldingRecordK(t *testing.T) {
	ctx := context.Background()
	out := streamtest.Collect[int]()
	faults := streamtest.NewFaults[int]().FailAt(3, errInjected)
	sink := faults.Sink(out)
	require.NoError(t, sink.Write(ctx, []int{0, 1}))
	require.ErrorIs(t, sink.Write(ctx, []int{2, 3}), errInjected)
	require.NoError(t, sink.Write(ctx, []int{4}))
	assert.Equal(t, []int{0, 1, 4}, out.Values())
	assert.Equal(t, 2, out.Writes())
	assert.Equal(t, 5, faults.Records())

	res := streamtest.RunPipeline(t.Context(), []int{0, 1, 2, 3, 4}, func(s *stream.Stream[int]) *stream.Stream[int] {
		return s.To(streamtest.NewFaults[int]().FailAt(3, errInjected).Sink(streamtest.Collect[int]()))
	}, streamtest.WithSliceOptions(streamtest.BatchSize(2)))
	var re *stream.RecordError
	require.ErrorAs(t, res.Err, &re)
	assert.Equal(t, stream.StageSink, re.Stage)
	assert.Equal(t, int64(2), re.Offset, "a sink's error names the batch's first record")
	assert.Equal(t, []int{0, 1}, res.Out)
	assert.Equal(t, int64(2), res.Position)
}

// TestFaultsConcurrentUse ensures a Faults under a parallel stage injects
// exactly one failure and is race-free (run with -race).
func TestFaultsConcurrentUse(t *testing.T) {
	faults := streamtest.NewFaults[int]().FailAt(50, errInjected)
	res := streamtest.RunPipeline(t.Context(), make([]int, 200), func(s *stream.Stream[int]) *stream.Stream[int] {
		return s.Map(faults.Map(nil), stream.Parallel(4), stream.Skip())
	})
	require.NoError(t, res.Err)
	assert.Len(t, res.Out, 199)
	assert.Equal(t, 200, faults.Calls())
	assert.Equal(t, 1, faults.Injected())
	assert.Equal(t, int64(200), res.Position)
}

// waitCtx bounds a test's waits, so a broken fake fails rather than hangs.
func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func received(ch <-chan time.Time) (time.Time, bool) {
	select {
	case v := <-ch:
		return v, true
	default:
		return time.Time{}, false
	}
}

// TestClockStartsAtClockStart ensures a new and a zero Clock start at
// 2026-01-01 UTC and move only on Advance.
func TestClockStartsAtClockStart(t *testing.T) {
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), streamtest.NewClock().Now())
	var c streamtest.Clock
	assert.Equal(t, streamtest.ClockStart, c.Now())
	c.Advance(90 * time.Second)
	assert.Equal(t, streamtest.ClockStart.Add(90*time.Second), c.Now())
	assert.Panics(t, func() { c.Advance(-time.Second) })
}

// TestClockFiresTimersOnlyOnAdvanceInDueOrder ensures timers fire only when
// Advance reaches them, each with its due time, and Advance never waits for
// a reader.
func TestClockFiresTimersOnlyOnAdvanceInDueOrder(t *testing.T) {
	c := streamtest.NewClock()
	t3 := c.NewTimer(3 * time.Second)
	t1 := c.NewTimer(time.Second)
	t2 := c.NewTimer(2 * time.Second)
	assert.Equal(t, 3, c.Pending())
	for _, tm := range []stream.Timer{t1, t2, t3} {
		_, fired := received(tm.C())
		assert.False(t, fired, "no timer fires before Advance")
	}

	c.Advance(1500 * time.Millisecond)
	v, fired := received(t1.C())
	require.True(t, fired)
	assert.Equal(t, streamtest.ClockStart.Add(time.Second), v, "a timer sends its due time")
	_, fired = received(t2.C())
	assert.False(t, fired)
	assert.Equal(t, 2, c.Pending())

	c.Advance(time.Hour) // nobody reads t2 and t3 during it: must not block
	assert.Equal(t, 0, c.Pending())
	v2, ok2 := received(t2.C())
	v3, ok3 := received(t3.C())
	require.True(t, ok2)
	require.True(t, ok3)
	assert.True(t, v2.Before(v3), "fired in due order, each with its due time")
	assert.Equal(t, streamtest.ClockStart.Add(3*time.Second), v3)
	assert.Equal(t, streamtest.ClockStart.Add(time.Hour+1500*time.Millisecond), c.Now())

	c.Advance(time.Hour)
	_, fired = received(t1.C())
	assert.False(t, fired, "a timer fires once")
}

// TestClockTimerStopAndZeroDuration ensures Stop disarms a pending timer
// (true) and drains a fired one (false), and a timer of d <= 0 fires at
// once without being pending.
func TestClockTimerStopAndZeroDuration(t *testing.T) {
	c := streamtest.NewClock()
	tm := c.NewTimer(time.Second)
	assert.True(t, tm.Stop())
	assert.False(t, tm.Stop())
	c.Advance(time.Minute)
	_, fired := received(tm.C())
	assert.False(t, fired, "a stopped timer never fires")

	tm = c.NewTimer(time.Second)
	c.Advance(time.Second)
	assert.False(t, tm.Stop(), "already fired")
	_, fired = received(tm.C())
	assert.False(t, fired, "no stale value after Stop")

	tm = c.NewTimer(0)
	assert.Equal(t, 0, c.Pending())
	v, fired := received(tm.C())
	require.True(t, fired)
	assert.Equal(t, c.Now(), v)
}

// TestClockWaitForTimersUnblocksWhenArmed ensures WaitForTimers returns only
// once n timers are pending, and the Context form gives up with ctx.
func TestClockWaitForTimersUnblocksWhenArmed(t *testing.T) {
	c := streamtest.NewClock()
	done := make(chan struct{})
	go func() {
		c.WaitForTimers(2)
		close(done)
	}()
	c.NewTimer(time.Second)
	select {
	case <-done:
		t.Fatal("WaitForTimers(2) returned with one timer pending")
	default:
	}
	c.NewTimer(time.Second)
	select {
	case <-done:
	case <-waitCtx(t).Done():
		t.Fatal("WaitForTimers(2) did not return with two timers pending")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.ErrorIs(t, c.WaitForTimersContext(ctx, 3), context.Canceled)
	assert.NoError(t, c.WaitForTimersContext(ctx, 2), "already satisfied")
}

// TestClockConcurrentUse ensures timers made, stopped and fired from several
// goroutines are race-free (run with -race) and each fires or stops once.
func TestClockConcurrentUse(t *testing.T) {
	c := streamtest.NewClock()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				tm := c.NewTimer(time.Duration(i+g+1) * time.Millisecond)
				if i%2 == 0 {
					tm.Stop()
				}
				_ = c.Now()
				_ = c.Pending()
			}
		}()
	}
	for range 50 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	c.Advance(time.Hour)
	assert.Equal(t, 0, c.Pending())
}

// TestBatchLingerHandsOnPartialBatchOnlyAfterAdvance ensures a
// stream.Batch(s, 10, time.Second) on the fake clock holds a partial batch
// until the clock is advanced by the linger, and then hands it on and saves
// its position.
func TestBatchLingerHandsOnPartialBatchOnlyAfterAdvance(t *testing.T) {
	clock := streamtest.NewClock()
	src := streamtest.Slice([]int{1, 2, 3}, streamtest.Follow())
	out := streamtest.Collect[[]int]()
	var store streamtest.RecordingStore
	got := make(chan []int, 1)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	s := stream.Batch(stream.From[int](src, stream.WithClock(clock)), 10, time.Second).
		To(out).
		Tap(func(_ context.Context, b []int) error { got <- b; return nil }).
		Checkpointing(&store, stream.CheckpointEachBatch(), stream.CheckpointInterval(0))
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	require.NoError(t, clock.WaitForTimersContext(waitCtx(t), 1), "the linger timer is armed")
	assert.Empty(t, out.Values(), "a partial batch waits for the linger")
	clock.Advance(time.Second - time.Millisecond)
	assert.Empty(t, out.Values(), "not yet: the linger is one second")
	assert.Equal(t, 1, clock.Pending())

	clock.Advance(time.Millisecond)
	select {
	case b := <-got:
		assert.Equal(t, []int{1, 2, 3}, b)
	case <-waitCtx(t).Done():
		t.Fatal("the partial batch was not handed on after the linger")
	}
	assert.Equal(t, [][]int{{1, 2, 3}}, out.Values())

	cancel()
	require.NoError(t, <-done)
	pos, ok := store.Position(streamtest.Topic, streamtest.Partition)
	require.True(t, ok)
	assert.Equal(t, int64(3), pos)
}

// TestRunPipelineReturnsOutputsSavesAndPosition ensures the harness returns
// what a passing pipeline wrote, every save in order and the last position.
func TestRunPipelineReturnsOutputsSavesAndPosition(t *testing.T) {
	res := streamtest.RunPipeline(t.Context(), []string{"a", "b", "c", "d"}, func(s *stream.Stream[string]) *stream.Stream[int] {
		return stream.MapTo(s.Map(upper), func(_ context.Context, s string) (int, error) { return int(s[0]), nil })
	}, streamtest.WithSliceOptions(streamtest.BatchSize(2)))
	require.NoError(t, res.Err)
	assert.Equal(t, []int{'A', 'B', 'C', 'D'}, res.Out)
	assert.Equal(t, []streamtest.Save{
		{Topic: streamtest.Topic, Partition: streamtest.Partition, Position: 2, Epoch: checkpoint.NoEpoch},
		{Topic: streamtest.Topic, Partition: streamtest.Partition, Position: 4, Epoch: checkpoint.NoEpoch},
	}, res.Saves)
	assert.Equal(t, int64(4), res.Position)
	names := make([]string, len(res.Stats))
	for i, st := range res.Stats {
		names[i] = st.Name
	}
	assert.Equal(t, []string{stream.StageMap, stream.StageMapTo, stream.StageSink}, names)
	assert.Equal(t, int64(4), res.Stage(stream.StageSink).In)
	assert.Equal(t, stream.StageStats{Name: "nope"}, res.Stage("nope"))
}

// TestRunPipelineReturnsTheErrorOfAFailingPipeline ensures the harness
// returns Run's error as is, the outputs and saves before the failure, and
// -1 when nothing was saved.
func TestRunPipelineReturnsTheErrorOfAFailingPipeline(t *testing.T) {
	build := func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(streamtest.NewFaults[string]().FailAt(2, errInjected).Map(upper))
	}
	res := streamtest.RunPipeline(t.Context(), []string{"a", "b", "c", "d"}, build,
		streamtest.WithSliceOptions(streamtest.BatchSize(1)))
	var re *stream.RecordError
	require.ErrorAs(t, res.Err, &re)
	assert.ErrorIs(t, res.Err, errInjected)
	assert.Equal(t, int64(2), re.Offset)
	assert.Equal(t, []string{"A", "B"}, res.Out)
	require.NotEmpty(t, res.Saves)
	assert.Equal(t, int64(2), res.Saves[len(res.Saves)-1].Position)
	assert.Equal(t, int64(2), res.Position, "the failed record's position is never saved")

	res = streamtest.RunPipeline(t.Context(), []string{"a", "b", "c"}, build)
	assert.ErrorIs(t, res.Err, errInjected)
	assert.Empty(t, res.Out, "one batch of 3 failed at record 2: nothing reached the sink")
	assert.Empty(t, res.Saves)
	assert.Equal(t, int64(-1), res.Position)
}

// TestRunPipelineWithStoreResumesWhereTheLastRunStopped ensures a second run
// with the same store continues after the last saved position and reports
// only its own saves; a failing store Load is returned without running.
func TestRunPipelineWithStoreResumesWhereTheLastRunStopped(t *testing.T) {
	var store streamtest.RecordingStore
	values := []string{"a", "b", "c", "d"}
	faults := streamtest.NewFaults[string]().FailAt(2, errInjected)
	res := streamtest.RunPipeline(t.Context(), values, func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(faults.Map(upper))
	}, streamtest.WithStore(&store), streamtest.WithSliceOptions(streamtest.BatchSize(1)))
	require.ErrorIs(t, res.Err, errInjected)
	assert.Equal(t, int64(2), res.Position)

	res = streamtest.RunPipeline(t.Context(), values, func(s *stream.Stream[string]) *stream.Stream[string] {
		return s.Map(upper)
	}, streamtest.WithStore(&store))
	require.NoError(t, res.Err)
	assert.Equal(t, []string{"C", "D"}, res.Out, "the failed record is delivered again, nothing before it")
	assert.Equal(t, []streamtest.Save{{Topic: streamtest.Topic, Partition: streamtest.Partition, Position: 4, Epoch: checkpoint.NoEpoch}}, res.Saves)

	store.FailLoad(checkpoint.ErrCorrupt)
	res = streamtest.RunPipeline(t.Context(), values, func(s *stream.Stream[string]) *stream.Stream[string] { return s },
		streamtest.WithStore(&store))
	require.ErrorIs(t, res.Err, checkpoint.ErrCorrupt)
	assert.Empty(t, res.Out)
	assert.Equal(t, int64(4), res.Position)
}
