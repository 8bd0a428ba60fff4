package stream_test

// Tests of Aggregate and Reduce within one run: what they emit, per record
// and with the record's lineage, and the accumulators they end with. The
// rules across restarts are in state_test.go.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

func TestAggregateEmitsTheKeysNewAccumulatorAfterEveryRecord(t *testing.T) {
	src := streamtest.Slice(ints(10), streamtest.BatchSize(3))
	out := streamtest.Collect[stream.KV[int, int]]()

	sums := stream.Aggregate(stream.KeyBy(stream.From[int](src), func(v int) int { return v % 3 }),
		stream.Sum(func(v int) int { return v }))
	require.NoError(t, sums.To(out).Run(context.Background()))

	// Keys 0, 1, 2 in turn: 0 → 0, 3, 9; 1 → 1, 5, 12; 2 → 2, 7, 15.
	assert.Equal(t, []stream.KV[int, int]{
		{0, 0}, {1, 1}, {2, 2},
		{0, 3}, {1, 5}, {2, 7},
		{0, 9}, {1, 12}, {2, 15},
		{0, 18},
	}, out.Values())
}

func TestAggregateEndsWithEveryKeysAccumulatorOverManyBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	vals := make([]int, 2000)
	for i := range vals {
		vals[i] = rng.IntN(1000)
	}
	key := func(v int) string { return fmt.Sprintf("k%d", v%17) }
	wantCount, wantSum := map[string]int64{}, map[string]int{}
	for _, v := range vals {
		wantCount[key(v)]++
		wantSum[key(v)] += v
	}

	// With a checkpoint store every record is held for a snapshot, and
	// Count's accumulators are saved under "aggregate".
	store := &streamtest.RecordingStore{}
	gotCount, gotSum := map[string]int64{}, map[string]int{}
	s := stream.From[int](streamtest.Slice(vals, streamtest.BatchSize(37)))
	s = s.Tap(func(context.Context, int) error { return nil }) // a stage before: lineage passes through
	err := stream.Aggregate(stream.KeyBy(s, key), stream.Count[int]()).
		Tap(func(_ context.Context, kv stream.KV[string, int64]) error { gotCount[kv.Key] = kv.Value; return nil }).
		Checkpointing(store, stream.CheckpointRecords(100)).
		Run(context.Background())
	require.NoError(t, err)

	s2 := stream.From[int](streamtest.Slice(vals, streamtest.BatchSize(41)))
	err = stream.Aggregate(stream.KeyBy(s2, key), stream.Sum(func(v int) int { return v }), stream.Name("sums")).
		Tap(func(_ context.Context, kv stream.KV[string, int]) error { gotSum[kv.Key] = kv.Value; return nil }).
		Checkpointing(store).
		Run(context.Background())
	require.NoError(t, err)

	assert.Equal(t, wantCount, gotCount)
	assert.Equal(t, wantSum, gotSum)
	pos, ok := store.Position(streamtest.Topic, streamtest.Partition)
	require.True(t, ok)
	assert.Equal(t, int64(len(vals)), pos, "every record finished: held ones were released by the snapshots")
}

func TestAggregateStartsEachKeyWithInit(t *testing.T) {
	type acc struct{ Words []string }
	src := streamtest.Slice([]string{"a1", "b1", "a2", "a3", "b2"})
	var got []string
	agg := stream.Aggregator[string, acc]{
		Init: func() acc { return acc{Words: []string{"start"}} },
		Add:  func(a acc, w string) acc { return acc{Words: append(append([]string(nil), a.Words...), w)} },
	}
	err := stream.Aggregate(stream.KeyBy(stream.From[string](src), func(w string) byte { return w[0] }), agg).
		Tap(func(_ context.Context, kv stream.KV[byte, acc]) error {
			got = append(got, fmt.Sprintf("%c=%s", kv.Key, strings.Join(kv.Value.Words, ",")))
			return nil
		}).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{
		"a=start,a1", "b=start,b1", "a=start,a1,a2", "a=start,a1,a2,a3", "b=start,b1,b2",
	}, got)
}

func TestReduceStartsEachKeyWithItsFirstValue(t *testing.T) {
	src := streamtest.Slice([]string{"x:a", "y:b", "x:c", "x:d", "y:e"}, streamtest.BatchSize(2))
	out := streamtest.Collect[stream.KV[string, string]]()
	key := func(s string) string { return s[:1] }
	// fn is never called with a zero start: the first value is the start.
	err := stream.Reduce(stream.KeyBy(stream.From[string](src), key), func(acc, v string) string {
		return acc + "+" + v[2:]
	}).To(out).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []stream.KV[string, string]{
		{"x", "x:a"}, {"y", "y:b"}, {"x", "x:a+c"}, {"x", "x:a+c+d"}, {"y", "y:b+e"},
	}, out.Values())
}

func TestReduceKeepsTheMaximumPerKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	vals := make([]int, 500)
	want := map[int]int{}
	for i := range vals {
		vals[i] = rng.IntN(10_000) - 5000 // negative values too: a zero start would be wrong
		k := i % 7
		if m, ok := want[k]; !ok || vals[i] > m {
			want[k] = vals[i]
		}
	}
	type rec struct{ I, V int }
	recs := make([]rec, len(vals))
	for i, v := range vals {
		recs[i] = rec{i, v}
	}
	got := map[int]int{}
	err := stream.Reduce(stream.KeyBy(stream.From[rec](streamtest.Slice(recs)), func(r rec) int { return r.I % 7 }),
		func(acc, v rec) rec {
			if v.V > acc.V {
				return v
			}
			return acc
		}).
		Tap(func(_ context.Context, kv stream.KV[int, rec]) error { got[kv.Key] = kv.Value.V; return nil }).
		Checkpointing(&checkpoint.MemoryStore{}).
		Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestAggregateResultCarriesTheRecordsLineageToTheCheckpoint(t *testing.T) {
	// The update of offset 6 fails downstream: the error names offset 6,
	// and the saved position stays at or below it although the stage's
	// state already holds the record.
	store := &streamtest.RecordingStore{}
	src := streamtest.Slice(ints(10), streamtest.BatchSize(4))
	err := stream.Aggregate(stream.KeyBy(stream.From[int](src), func(v int) bool { return v%2 == 0 }), stream.Count[int]()).
		Tap(func(_ context.Context, kv stream.KV[bool, int64]) error {
			if kv.Key && kv.Value == 4 { // the 4th even value: 6
				return errBoom
			}
			return nil
		}).
		Checkpointing(store, stream.CheckpointEachBatch()).
		Run(context.Background())

	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, errBoom)
	assert.Equal(t, stream.StageTap, re.Stage)
	assert.Equal(t, streamtest.Topic, re.Topic)
	assert.Equal(t, streamtest.Partition, re.Partition)
	assert.Equal(t, int64(6), re.Offset)
	pos, _ := store.Position(streamtest.Topic, streamtest.Partition)
	assert.LessOrEqual(t, pos, int64(6), "a position never passes an update that did not finish downstream")
	assert.NotEmpty(t, store.StateSaves(), "the state was saved")
}

func TestAggregateCountsRecordsWithoutLineageEveryTime(t *testing.T) {
	// Records without lineage are neither tracked nor recognised as
	// replays: every one is counted.
	el := func(v int) stream.Element[int] { return stream.Element[int]{Value: v} }
	src := batches(step[int]{elems: []stream.Element[int]{el(1), el(1), el(2)}}, step[int]{elems: []stream.Element[int]{el(1)}})
	out := streamtest.Collect[stream.KV[int, int64]]()
	err := stream.Aggregate(stream.KeyBy(stream.From[int](src), func(v int) int { return v }), stream.Count[int]()).
		To(out).Checkpointing(&checkpoint.MemoryStore{}).Run(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []stream.KV[int, int64]{{1, 1}, {1, 2}, {2, 1}, {1, 3}}, out.Values())
}

func TestAggregateRefusesWindowOptionsAndNilFunctions(t *testing.T) {
	k := stream.KeyBy(stream.From[int](streamtest.Slice(ints(1))), func(v int) int { return v })
	assertPanicsContaining(t, "DropLate applies to Window, not to aggregate", func() {
		stream.Aggregate(k, stream.Count[int](), stream.DropLate())
	})
	assertPanicsContaining(t, "Aggregate called with a nil function", func() {
		stream.Aggregate(k, stream.Aggregator[int, int]{})
	})
	assertPanicsContaining(t, "Reduce called with a nil function", func() {
		stream.Reduce(k, nil)
	})
	assertPanicsContaining(t, "KeyBy called with a nil function", func() {
		stream.KeyBy[int, int](stream.From[int](streamtest.Slice(ints(1))), nil)
	})
}

// assertPanicsContaining asserts that fn panics with a value whose text
// contains want.
func assertPanicsContaining(t *testing.T, want string, fn func()) {
	t.Helper()
	var v any
	func() {
		defer func() { v = recover() }()
		fn()
	}()
	require.NotNil(t, v, "no panic; want one containing %q", want)
	msg := fmt.Sprint(v)
	if err, ok := v.(error); ok {
		msg = err.Error()
	}
	assert.Contains(t, msg, want)
}

// Aggregate keeps an accumulator per key and emits the key's new value after
// every record; with a checkpoint store the accumulators are saved with the
// positions.
func ExampleAggregate() {
	words := streamtest.Slice(strings.Fields("to be or not to be that is the question to be"))
	var store checkpoint.MemoryStore

	last := map[string]int64{}
	err := stream.Aggregate(stream.KeyBy(stream.From[string](words), strings.ToLower), stream.Count[string]()).
		Tap(func(_ context.Context, kv stream.KV[string, int64]) error {
			last[kv.Key] = kv.Value
			return nil
		}).
		Checkpointing(&store).
		Run(context.Background())

	fmt.Println(err)
	for _, w := range []string{"to", "be", "or", "question"} {
		fmt.Println(w, last[w])
	}
	_, saved, _ := store.LoadState(context.Background(), stream.StageAggregate)
	fmt.Println("state saved:", saved)
	// Output:
	// <nil>
	// to 3
	// be 3
	// or 1
	// question 1
	// state saved: true
}
