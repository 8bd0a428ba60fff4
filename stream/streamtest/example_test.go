package streamtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// Test an operator with a slice source, a collecting sink and a recording
// store.
func ExampleSlice() {
	src := streamtest.Slice([]string{"a", "b", "c"}, streamtest.BatchSize(2))
	out := streamtest.Collect[string]()
	var store streamtest.RecordingStore

	err := stream.From[string](src).
		Map(func(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil }).
		To(out).
		Checkpointing(&store, stream.CheckpointEachBatch()).
		Run(context.Background())

	fmt.Println(out.Values(), err)
	fmt.Println(store.Saves())
	// Output:
	// [A B C] <nil>
	// [{streamtest 0 2 -1} {streamtest 0 3 -1}]
}

// Test a Map with a Skip policy: the record at index 2 fails, is skipped,
// and the position is saved past it.
func ExampleRunPipeline() {
	faults := streamtest.NewFaults[string]().FailAt(2, errors.New("bad record"))
	res := streamtest.RunPipeline(context.Background(), []string{"a", "b", "c", "d"},
		func(s *stream.Stream[string]) *stream.Stream[string] {
			return s.Map(faults.Map(func(_ context.Context, s string) (string, error) {
				return strings.ToUpper(s), nil
			}), stream.Skip())
		})

	fmt.Println(res.Out, res.Err)
	fmt.Println("skipped:", res.Stage(stream.StageMap).Skipped)
	fmt.Println("position:", res.Position)
	// Output:
	// [A B D] <nil>
	// skipped: 1
	// position: 4
}

// Step a fake clock once the pipeline has armed its timer.
func ExampleClock() {
	clock := streamtest.NewClock()
	timer := clock.NewTimer(time.Second) // as a pipeline stage would
	go func() {
		clock.WaitForTimers(1)
		clock.Advance(time.Second)
	}()
	fmt.Println(<-timer.C())
	// Output:
	// 2026-01-01 00:00:01 +0000 UTC
}
