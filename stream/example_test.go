package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// A pipeline reads a source, passes every value through its stages in order
// and writes the result to a sink.
func ExampleFrom() {
	src := streamtest.Slice([]string{"apple", "kiwi", "banana"})
	out := streamtest.Collect[string]()

	err := stream.From[string](src).
		Filter(func(_ context.Context, s string) (bool, error) { return len(s) > 4, nil }).
		Map(func(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil }).
		To(out).
		Run(context.Background())

	fmt.Println(out.Values(), err)
	// Output: [APPLE BANANA] <nil>
}

// Run saves the position (the next offset to read) after each batch has
// passed every stage; a handler error stops it before the failed batch is
// saved.
func ExampleStream_Run() {
	store := checkpoint.NewMemoryStore()
	src := streamtest.Slice([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, streamtest.BatchSize(4))

	err := stream.From[int](src).
		Tap(func(_ context.Context, v int) error {
			if v == 6 {
				return errors.New("cannot handle 6")
			}
			return nil
		}).
		Checkpointing(store, stream.CheckpointEachBatch()).
		Run(context.Background())

	var re *stream.RecordError
	if errors.As(err, &re) {
		fmt.Println("failed at offset", re.Offset, "in stage", re.Stage)
	}
	pos, _, _ := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	fmt.Println("next offset to read:", pos.Offset)
	// Output:
	// failed at offset 6 in stage tap
	// next offset to read: 4
}

// MapTo changes the value type; each output keeps its input's lineage.
func ExampleMapTo() {
	src := streamtest.Slice([]int{1, 2, 3})
	ints := stream.From[int](src)
	strs := stream.MapTo(ints, func(_ context.Context, v int) (string, error) {
		return "#" + strconv.Itoa(v*v), nil
	})
	out := streamtest.Collect[string]()

	err := strs.To(out).Run(context.Background())

	fmt.Println(out.Values(), err)
	// Output: [#1 #4 #9] <nil>
}

// ConsumeForever resumes from the store, handles every record, checkpoints
// after each batch, and after a source failure resumes from the last saved
// position.
func ExampleConsumeForever() {
	store := checkpoint.NewMemoryStore()
	src := streamtest.Slice([]string{"a", "b", "c", "d", "e", "f"},
		streamtest.BatchSize(2),
		streamtest.FailAt(3, errors.New("connection reset")))

	err := stream.ConsumeForever(context.Background(), src, store,
		func(_ context.Context, v string) error {
			fmt.Println("handle", v)
			return nil
		},
		stream.WithBackoff(time.Millisecond, 10*time.Millisecond),
		stream.OnSourceError(func(err error, attempt int) {
			fmt.Printf("attempt %d: %v\n", attempt, err)
		}),
		stream.OnCheckpoint(func(topic string, partition int32, position checkpoint.Position) {
			fmt.Printf("saved %s/%d at %d\n", topic, partition, position.Offset)
		}), stream.WithCheckpointPolicy(stream.CheckpointEachBatch()))

	fmt.Println("done:", err)
	// Output:
	// handle a
	// handle b
	// saved streamtest/0 at 2
	// handle c
	// handle d
	// saved streamtest/0 at 4
	// attempt 1: stream: source failed: connection reset
	// handle e
	// handle f
	// saved streamtest/0 at 6
	// done: <nil>
}

// Parallel runs a slow handler on several goroutines; records finish out of
// order, yet the saved position is always below every unfinished record.
func ExampleParallel() {
	store := checkpoint.NewMemoryStore()
	src := streamtest.Slice([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	out := streamtest.Collect[int]()

	err := stream.From[int](src).
		Map(func(_ context.Context, v int) (int, error) {
			time.Sleep(time.Millisecond) // a call to a slow service
			return v * 10, nil
		}, stream.Parallel(4)).
		To(out).
		Checkpointing(store).
		Run(context.Background())

	got := out.Values()
	slices.Sort(got) // completion order is not source order
	pos, _, _ := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	fmt.Println(got, err, "position", pos.Offset)
	// Output: [0 10 20 30 40 50 60 70 80 90] <nil> position 10
}

// KeyOrdered handles one key's records in source order while different keys
// run at once.
func ExampleKeyOrdered() {
	src := streamtest.Slice([]string{"a1", "b1", "a2", "b2", "a3"})
	var mu sync.Mutex
	seen := map[byte][]string{}

	err := stream.From[string](src).
		Tap(func(_ context.Context, v string) error {
			mu.Lock()
			defer mu.Unlock()
			seen[v[0]] = append(seen[v[0]], v)
			return nil
		}, stream.KeyOrdered(2, func(v string) byte { return v[0] })).
		Run(context.Background())

	fmt.Println(seen['a'], seen['b'], err)
	// Output: [a1 a2 a3] [b1 b2] <nil>
}

// Skip drops a record whose handler fails and counts it; the position moves
// past it.
func ExampleSkip() {
	store := checkpoint.NewMemoryStore()
	src := streamtest.Slice([]string{"1", "2", "x", "4"})
	out := streamtest.Collect[int]()

	s := stream.MapTo(stream.From[string](src), func(_ context.Context, v string) (int, error) {
		return strconv.Atoi(v)
	}, stream.Skip(), stream.Name("parse"))
	err := s.To(out).Checkpointing(store).Run(context.Background())

	pos, _, _ := store.Load(context.Background(), streamtest.Topic, streamtest.Partition)
	fmt.Println(out.Values(), err, "skipped", s.Stats()[0].Skipped, "position", pos.Offset)
	// Output: [1 2 4] <nil> skipped 1 position 4
}

// FlatMap splits a record into several; the record is finished when all of
// its parts are.
func ExampleFlatMap() {
	src := streamtest.Slice([]string{"a b", "", "c"})
	words := stream.FlatMap(stream.From[string](src), func(_ context.Context, line string) ([]string, error) {
		return strings.Fields(line), nil
	})
	out := streamtest.Collect[string]()

	err := words.To(out).Run(context.Background())

	fmt.Println(out.Values(), err)
	// Output: [a b c] <nil>
}

// Batch groups values for a sink that writes many at once; the records of a
// batch are finished when the batch is.
func ExampleBatch() {
	src := streamtest.Slice([]int{1, 2, 3, 4, 5})
	out := streamtest.Collect[[]int]()

	err := stream.Batch(stream.From[int](src), 2, time.Second).To(out).Run(context.Background())

	fmt.Println(out.Values(), err)
	// Output: [[1 2] [3 4] [5]] <nil>
}

// Merge reads several sources in one pipeline. Positions are tracked per
// topic-partition, so each slice gets a topic of its own.
func ExampleMerge() {
	a := stream.From[int](streamtest.Slice([]int{1, 2, 3}, streamtest.OnTopic("a")))
	b := stream.From[int](streamtest.Slice([]int{10, 20}, streamtest.OnTopic("b")))
	out := streamtest.Collect[int]()

	err := stream.Merge(a, b).To(out).Run(context.Background())

	got := out.Values()
	slices.Sort(got)
	fmt.Println(got, err)
	// Output: [1 2 3 10 20] <nil>
}

// Forever rebuilds and reruns a whole pipeline after a source failure,
// resuming from the store.
func ExampleForever() {
	store := checkpoint.NewMemoryStore()
	values := []string{"a", "b", "c", "d"}
	attempts := 0

	err := stream.Forever(context.Background(), func() stream.Runner {
		attempts++
		opts := []streamtest.Option{streamtest.BatchSize(2)}
		if attempts == 1 {
			opts = append(opts, streamtest.FailAt(2, errors.New("connection reset")))
		}
		src := streamtest.Slice(values, opts...)
		if err := src.Resume(context.Background(), store); err != nil {
			panic(err)
		}
		return stream.From[string](src).
			Tap(func(_ context.Context, v string) error { fmt.Println("handle", v); return nil }).
			Checkpointing(store, stream.CheckpointEachBatch())
	}, stream.WithBackoff(time.Millisecond, time.Millisecond))

	fmt.Println("attempts:", attempts, "done:", err)
	// Output:
	// handle a
	// handle b
	// handle c
	// handle d
	// attempts: 2 done: <nil>
}
