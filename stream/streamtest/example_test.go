package streamtest_test

import (
	"context"
	"fmt"
	"strings"

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
