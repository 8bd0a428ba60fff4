package stream_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	streams "github.com/reugn/go-streams"
	"github.com/reugn/go-streams/flow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// ---- GoSource and GoSink ----

// TestGoStreamsPipelineCopiesEveryRecordBetweenLogTopics ensures a plain
// go-streams pipeline (GoSource -> flow.Map -> GoSink) reads every record of
// a 3-partition log topic and writes each, transformed, to another topic.
func TestGoStreamsPipelineCopiesEveryRecordBetweenLogTopics(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	events, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	copies, err := lg.CreateTopic("copies", 1)
	require.NoError(t, err)
	var want []string
	for i := range 1000 {
		v := fmt.Sprintf("event-%04d", i)
		_, _, err := events.Append(context.Background(), log.Record{Key: []byte(fmt.Sprint(i % 17)), Value: []byte(v)})
		require.NoError(t, err)
		want = append(want, "copy of "+v)
	}

	ctx := t.Context()
	src := stream.GoSource[log.Record](ctx, source.Topic(lg, "events", source.Earliest, source.Replay()))
	out := stream.GoSink[log.Record](ctx, sink.Log(copies))
	src.Via(flow.NewMap(func(r log.Record) log.Record {
		return log.Record{Key: r.Key, Value: append([]byte("copy of "), r.Value...)}
	}, 1)).To(out)

	require.NoError(t, src.Err())
	require.NoError(t, out.Err())
	got := streamtest.Collect[log.Record]()
	require.NoError(t, stream.From(source.Topic(lg, "copies", source.Earliest, source.Replay())).To(got).Run(ctx))
	var values []string
	for _, r := range got.Values() {
		values = append(values, string(r.Value))
	}
	sort.Strings(values)
	assert.Equal(t, want, values)
}

// TestGoSourceClosesOutWithinASecondOfCancelWhenNobodyReads ensures a
// GoSource whose reader stopped reading closes Out and its source within 1s
// of the cancel and leaves no goroutine behind, over a following log topic
// and over a following fake source.
func TestGoSourceClosesOutWithinASecondOfCancelWhenNobodyReads(t *testing.T) {
	// A build func's cleanups (closing the log) run before goleak's check,
	// which the subtest registers first.
	cases := map[string]func(t *testing.T) stream.Source[int]{
		"slice": func(*testing.T) stream.Source[int] {
			return streamtest.Slice(ints(500), streamtest.Follow(), streamtest.BatchSize(50))
		},
		"log topic": func(t *testing.T) stream.Source[int] {
			lg, err := log.Open(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { lg.Close() })
			topic, err := lg.CreateTopic("events", 2)
			require.NoError(t, err)
			for i := range 100 {
				_, _, err := topic.Append(context.Background(), log.Record{Value: []byte{byte(i)}})
				require.NoError(t, err)
			}
			return mapSource(source.Topic(lg, "events", source.Earliest), func(r log.Record) int { return int(r.Value[0]) })
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			t.Cleanup(func() { goleak.VerifyNone(t) })
			closed := &closeCounter[int]{Source: build(t)}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := stream.GoSource[int](ctx, closed)
			for range 3 {
				recv(t, src.Out(), "a value from Out")
			}
			// The reader stops reading here, with the source mid-batch.
			cancel()
			select {
			case <-src.Done():
			case <-time.After(time.Second):
				require.FailNow(t, "Out not closed within 1s of the cancel")
			}
			_, open := <-src.Out()
			assert.False(t, open, "Out is closed")
			assert.Equal(t, 1, closed.closes(), "the source is closed once")
			assert.NoError(t, src.Err(), "a cancel is not an error")
		})
	}
}

// TestGoSourceReportsReadFailure ensures a failed Read ends Out and is
// reported by Err as a *SourceError wrapping the cause, after the values
// read before it.
func TestGoSourceReportsReadFailure(t *testing.T) {
	src := stream.GoSource[int](t.Context(), streamtest.Slice(ints(10), streamtest.BatchSize(4), streamtest.FailAt(2, errConn)))
	var got []int
	for v := range src.Out() {
		got = append(got, v.(int))
	}
	assert.Equal(t, []int{0, 1, 2, 3}, got)
	var se *stream.SourceError
	require.ErrorAs(t, src.Err(), &se)
	assert.ErrorIs(t, src.Err(), errConn)
}

// TestGoSourceRefusesSourceThatReusesBytes ensures a source that reuses its
// values' bytes between Reads is refused: go-streams may hold a value for
// as long as it likes.
func TestGoSourceRefusesSourceThatReusesBytes(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	_, err = lg.CreateTopic("events", 1)
	require.NoError(t, err)
	src := stream.GoSource[log.Record](t.Context(), source.Partition(lg, "events", 0, source.Earliest, source.ReuseBytes(), source.Replay()))
	<-src.Done()
	assert.ErrorIs(t, src.Err(), stream.ErrReusedBytes)
}

// TestGoSinkWrongTypeIsAnErrorNamingBothTypes ensures a value of another
// type than the sink's is an error naming the type it got and the one it
// wants, not a panic; the values before it are written, those after it
// are read and dropped so the upstream can end.
func TestGoSinkWrongTypeIsAnErrorNamingBothTypes(t *testing.T) {
	got := streamtest.Collect[int]()
	k := stream.GoSink[int](t.Context(), got)
	for _, v := range []any{1, 2, "three", 4} {
		k.In() <- v
	}
	close(k.In())
	k.AwaitCompletion()
	require.ErrorIs(t, k.Err(), stream.ErrWrongType)
	assert.ErrorContains(t, k.Err(), "got string, wants int")
	assert.Equal(t, []int{1, 2}, got.Values())
}

// TestGoSinkWritesFullBatchesAndTheRestByAwaitCompletion ensures GoSink
// writes batches of its size and, by the time AwaitCompletion returns, the
// last partial one.
func TestGoSinkWritesFullBatchesAndTheRestByAwaitCompletion(t *testing.T) {
	got := streamtest.Collect[int]()
	k := stream.GoSink[int](t.Context(), got, stream.GoBatch(10, time.Hour))
	for i := range 25 {
		k.In() <- i
	}
	require.Eventually(t, func() bool { return got.Writes() == 2 }, wait, time.Millisecond)
	assert.Equal(t, ints(20), got.Values(), "two full batches, the rest waits")
	close(k.In())
	k.AwaitCompletion()
	require.NoError(t, k.Err())
	assert.Equal(t, 3, got.Writes())
	assert.Equal(t, ints(25), got.Values())
}

// TestGoSinkLingerWritesAPartialBatch ensures a batch that does not fill is
// written linger after its first value, without In being closed.
func TestGoSinkLingerWritesAPartialBatch(t *testing.T) {
	got := streamtest.Collect[int]()
	k := stream.GoSink[int](t.Context(), got, stream.GoBatch(100, 5*time.Millisecond))
	defer k.AwaitCompletion()
	defer close(k.In())
	for i := range 3 {
		k.In() <- i
	}
	require.Eventually(t, func() bool { return len(got.Values()) == 3 }, wait, time.Millisecond)
	assert.Equal(t, 1, got.Writes())
}

// TestGoSinkKeepsFirstWriteErrorAndDrainsTheRest ensures a failed Write is
// kept for Err (wrapping the sink's error) and the values after it are
// dropped while In is still read to its end.
func TestGoSinkKeepsFirstWriteErrorAndDrainsTheRest(t *testing.T) {
	got := streamtest.Collect[int](streamtest.FailAt(2, errDisk))
	k := stream.GoSink[int](t.Context(), got, stream.GoBatch(5, time.Hour))
	for i := range 30 {
		k.In() <- i // never blocks for good: the sink reads on after the failure
	}
	close(k.In())
	k.AwaitCompletion()
	require.ErrorIs(t, k.Err(), errDisk)
	assert.ErrorContains(t, k.Err(), "write of 5 values")
	assert.Equal(t, ints(5), got.Values())
}

// ---- Via ----

// TestViaMapPassesEveryValueWithItsLineage ensures a flow.Map inside a
// checkpointed pipeline hands every value on in order and the final
// position is the end.
func TestViaMapPassesEveryValueWithItsLineage(t *testing.T) {
	res := streamtest.RunPipeline(t.Context(), ints(1000), func(s *stream.Stream[int]) *stream.Stream[string] {
		return stream.Via[int, string](s, flow.NewMap(func(v int) string { return fmt.Sprint("#", v) }, 1))
	}, streamtest.WithSliceOptions(streamtest.BatchSize(64)))
	require.NoError(t, res.Err)
	require.Len(t, res.Out, 1000)
	for i, v := range res.Out {
		require.Equal(t, fmt.Sprint("#", i), v)
	}
	assert.Equal(t, int64(1000), res.Position)
	assert.Equal(t, int64(1000), res.Stage(stream.StageVia).In)
	assert.Equal(t, int64(1000), res.Stage(stream.StageVia).Out)
}

// TestViaFilterFinishesDroppedRecordsAtTheDrain ensures records a flow drops
// are finished when the source ends: the position reaches the end.
func TestViaFilterFinishesDroppedRecordsAtTheDrain(t *testing.T) {
	res := streamtest.RunPipeline(t.Context(), ints(100), func(s *stream.Stream[int]) *stream.Stream[int] {
		return stream.Via[int, int](s, flow.NewFilter(func(v int) bool { return v%10 == 0 }, 1))
	})
	require.NoError(t, res.Err)
	assert.Equal(t, []int{0, 10, 20, 30, 40, 50, 60, 70, 80, 90}, res.Out)
	assert.Equal(t, int64(100), res.Position)
}

// checkingStore fails the test when a saved position passes a record that
// was not handled (or dropped on purpose).
type checkingStore struct {
	streamtest.RecordingStore
	t    *testing.T
	mu   sync.Mutex
	done map[int64]bool // offsets whose output was handled, or that were dropped
	max  int64
}

func (s *checkingStore) mark(off int64) {
	s.mu.Lock()
	s.done[off] = true
	s.mu.Unlock()
}

func (s *checkingStore) Save(ctx context.Context, topic string, partition int32, pos checkpoint.Position) error {
	s.mu.Lock()
	for off := int64(0); off < pos.Offset; off++ {
		if !s.done[off] {
			s.mu.Unlock()
			s.t.Errorf("position %d saved while offset %d is not handled", pos.Offset, off)
			return fmt.Errorf("position past an unhandled record")
		}
	}
	s.max = max(s.max, pos.Offset)
	s.mu.Unlock()
	return s.RecordingStore.Save(ctx, topic, partition, pos)
}

// TestViaPositionNeverPassesAnUnfinishedRecord ensures, over 5,000 records
// through a flow.Map and a flow.Filter dropping a random third, then a
// parallel handler that takes random time, that every saved position
// (one after every batch) is below every record not yet handled.
func TestViaPositionNeverPassesAnUnfinishedRecord(t *testing.T) {
	const n = 5000
	keep := make([]bool, n)
	for i := range keep {
		keep[i] = rand.IntN(3) > 0
	}
	store := &checkingStore{t: t, done: make(map[int64]bool)}
	for i, k := range keep {
		if !k {
			store.mark(int64(i)) // dropped by the filter: nothing to handle
		}
	}
	s := stream.From[int](streamtest.Slice(ints(n), streamtest.BatchSize(37)))
	mapped := stream.Via[int, int](s, flow.NewMap(func(v int) int { return v * 10 }, 1), stream.GoName("via-map"))
	kept := stream.Via[int, int](mapped, flow.NewFilter(func(v int) bool { return keep[v/10] }, 1), stream.GoName("via-filter"))
	err := kept.Tap(func(_ context.Context, v int) error {
		if rand.IntN(50) == 0 {
			for range rand.IntN(300) { // work of random length, so records finish out of order
				runtime.Gosched()
			}
		}
		store.mark(int64(v / 10))
		return nil
	}, stream.Parallel(4)).
		Checkpointing(store, stream.CheckpointEachBatch()).
		Run(t.Context())
	require.NoError(t, err)
	pos, found := store.Position(streamtest.Topic, streamtest.Partition)
	require.True(t, found)
	assert.Equal(t, int64(n), pos)
	assert.Greater(t, len(store.Saves()), 10, "positions were saved along the way, not only at the end")
}

// TestViaPositionStopsBelowTheRecordTheFlowHolds ensures that while the
// flow's function works on record 5, no position past 5 is saved, and that
// a cancel leaves it unsaved and no goroutine of the flow running.
func TestViaPositionStopsBelowTheRecordTheFlowHolds(t *testing.T) {
	defer goleak.VerifyNone(t)
	store := newWatchStore()
	held, release := make(chan struct{}), make(chan struct{})
	f := flow.NewMap(func(v int) int {
		if v == 5 {
			close(held)
			<-release
		}
		return v
	}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var handled []int
	s := stream.Via[int, int](stream.From[int](streamtest.Slice(ints(10), streamtest.BatchSize(3))), f).
		Tap(func(_ context.Context, v int) error {
			mu.Lock()
			handled = append(handled, v)
			mu.Unlock()
			return nil
		}).
		Checkpointing(store, stream.CheckpointEachBatch())
	done := runAsync(ctx, s)
	recv(t, held, "the flow to hold record 5")
	recv(t, store.reached(0, 5), "position 5 saved")
	require.NoError(t, s.Checkpoint(ctx))
	assert.Equal(t, int64(5), store.pos(t, 0), "held at the record in the flow")
	cancel()
	close(release) // the flow's function ignores ctx; Run waits for it
	require.NoError(t, recv(t, done, "Run to return after the cancel"))
	mu.Lock()
	defer mu.Unlock()
	// After the release the flow may hand on 5 and more before the stop is
	// seen; whatever was saved, every record below it came out of the flow.
	saved := int(store.maxSaved(0))
	require.GreaterOrEqual(t, len(handled), saved, "a position passed records that never came out of the flow")
	assert.Equal(t, ints(saved), handled[:saved])
}

// doubler is a flow of no known go-streams type that emits every value
// twice: Via only notices when the outputs outnumber the inputs.
type doubler struct{ streams.Flow }

// TestViaFlowEmittingMoreThanItWasGivenFailsRun ensures a flow that emits
// more values than it was given stops Run with ErrFlowEmitsMore, and leaks
// no goroutine.
func TestViaFlowEmittingMoreThanItWasGivenFailsRun(t *testing.T) {
	defer goleak.VerifyNone(t)
	f := doubler{flow.NewFlatMap(func(v int) []int { return []int{v, v} }, 1)}
	res := streamtest.RunPipeline(t.Context(), ints(10), func(s *stream.Stream[int]) *stream.Stream[int] {
		return stream.Via[int, int](s, f)
	})
	require.ErrorIs(t, res.Err, stream.ErrFlowEmitsMore)
	assert.ErrorContains(t, res.Err, "at most one value per input")
	var re *stream.RecordError
	require.ErrorAs(t, res.Err, &re)
	assert.Equal(t, stream.StageVia, re.Stage)
}

// TestViaRefusesGoStreamsFlowsThatBreakTheRule ensures go-streams' own flows
// that emit more than one value per input or reorder are refused by Run,
// and their goroutines ended.
func TestViaRefusesGoStreamsFlowsThatBreakTheRule(t *testing.T) {
	cases := map[string]func() streams.Flow{
		"flatmap":            func() streams.Flow { return flow.NewFlatMap(func(v int) []int { return []int{v} }, 1) },
		"map parallelism 4":  func() streams.Flow { return flow.NewMap(func(v int) int { return v }, 4) },
		"filter parallelism": func() streams.Flow { return flow.NewFilter(func(int) bool { return true }, 2) },
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			res := streamtest.RunPipeline(t.Context(), ints(10), func(s *stream.Stream[int]) *stream.Stream[int] {
				return stream.Via[int, int](s, build())
			})
			require.ErrorIs(t, res.Err, stream.ErrFlowUnsupported)
			assert.Equal(t, int64(-1), res.Position, "nothing saved")
		})
	}
}

// TestViaWrongOutputTypeIsARecordError ensures an output that is not a U
// stops Run with a RecordError naming both types and the paired record.
func TestViaWrongOutputTypeIsARecordError(t *testing.T) {
	res := streamtest.RunPipeline(t.Context(), ints(10), func(s *stream.Stream[int]) *stream.Stream[string] {
		return stream.Via[int, string](s, flow.NewMap(func(v int) int { return v }, 1))
	})
	require.ErrorIs(t, res.Err, stream.ErrWrongType)
	assert.ErrorContains(t, res.Err, "the flow emitted int, Via wants string")
	var re *stream.RecordError
	require.ErrorAs(t, res.Err, &re)
	assert.Equal(t, int64(0), re.Offset)
}

// TestViaDroppingFlowFailsWithStallInsteadOfHanging ensures a flow that
// drops every record, holding back WithMaxInFlight of them so the source
// cannot read on, fails Run with ErrFlowStalled instead of hanging.
func TestViaDroppingFlowFailsWithStallInsteadOfHanging(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := stream.From[int](streamtest.Slice(ints(1000), streamtest.BatchSize(16)), stream.WithMaxInFlight(64))
	v := stream.Via[int, int](s, flow.NewFilter(func(int) bool { return false }, 1), stream.GoStallTimeout(100*time.Millisecond))
	var store streamtest.RecordingStore
	done := runAsync(t.Context(), v.Checkpointing(&store))
	err := recv(t, done, "Run to fail on the stall")
	require.ErrorIs(t, err, stream.ErrFlowStalled)
	assert.ErrorContains(t, err, "64 values sent into the flow from offset 0 on have no output")
	_, found := store.Position(streamtest.Topic, streamtest.Partition)
	assert.False(t, found, "no record was finished, so nothing was saved")
}

// TestViaCancelEndsTheFlowAndLeaksNothing ensures cancelling a following
// pipeline with a Via returns within 1s, with the flow's goroutines ended.
func TestViaCancelEndsTheFlowAndLeaksNothing(t *testing.T) {
	for _, drain := range []time.Duration{0, time.Second} {
		t.Run(fmt.Sprint("drain ", drain), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			got := make(chan int, 1000)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s := stream.From[int](streamtest.Slice(ints(50), streamtest.Follow()), stream.WithDrainTimeout(drain))
			r := stream.Via[int, int](s, flow.NewMap(func(v int) int { return v + 1 }, 1)).
				Tap(func(_ context.Context, v int) error { got <- v; return nil })
			var store streamtest.RecordingStore
			done := runAsync(ctx, r.Checkpointing(&store))
			for range 50 {
				recv(t, got, "a value through the flow")
			}
			cancel()
			start := time.Now()
			require.NoError(t, recv(t, done, "Run"))
			assert.Less(t, time.Since(start), time.Second)
			pos, _ := store.Position(streamtest.Topic, streamtest.Partition)
			assert.Equal(t, int64(50), pos)
		})
	}
}

// ---- helpers ----

// mapped is a source that maps the values of another.
type mapped[T, U any] struct {
	stream.Source[T]
	fn  func(T) U
	buf []stream.Element[U]
}

func mapSource[T, U any](src stream.Source[T], fn func(T) U) stream.Source[U] {
	return &mapped[T, U]{Source: src, fn: fn}
}

func (m *mapped[T, U]) Read(ctx context.Context) ([]stream.Element[U], error) {
	elems, err := m.Source.Read(ctx)
	m.buf = m.buf[:0]
	for _, e := range elems {
		m.buf = append(m.buf, stream.Element[U]{Value: m.fn(e.Value), Topic: e.Topic, Partition: e.Partition, Offset: e.Offset, Epoch: e.Epoch})
	}
	return m.buf, err
}

// closeCounter counts the Close calls of a source.
type closeCounter[T any] struct {
	stream.Source[T]
	mu sync.Mutex
	n  int
}

func (c *closeCounter[T]) Close() error {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.Source.Close()
}

func (c *closeCounter[T]) closes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
