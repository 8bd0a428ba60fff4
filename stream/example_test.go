package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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
	var store checkpoint.MemoryStore
	src := streamtest.Slice([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, streamtest.BatchSize(4))

	err := stream.From[int](src).
		Tap(func(_ context.Context, v int) error {
			if v == 6 {
				return errors.New("cannot handle 6")
			}
			return nil
		}).
		Checkpointing(&store, stream.CheckpointEachBatch()).
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
	var store checkpoint.MemoryStore
	src := streamtest.Slice([]string{"a", "b", "c", "d", "e", "f"},
		streamtest.BatchSize(2),
		streamtest.FailAt(3, errors.New("connection reset")))

	err := stream.ConsumeForever(context.Background(), src, &store,
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
