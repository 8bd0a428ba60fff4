package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// keyedRecords and keyedKeys shape BenchmarkKeyOrdered.
const (
	keyedRecords = 1024
	keyedKeys    = 64
)

// BenchmarkKeyOrdered is issue 6's fifth figure: a Tap whose handler sleeps
// 1 ms, with stream.KeyOrdered(n, key) over 64 keys (key = value mod 64),
// for n = 1, 4, 16 workers, checkpointing to a MemoryStore. One op is 1,024
// records; records/s should grow with n (the table divides by n=1).
func BenchmarkKeyOrdered(b *testing.B) {
	values := make([]int, keyedRecords)
	for i := range values {
		values[i] = i
	}
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			start := time.Now()
			for range b.N {
				handled := 0
				err := stream.From(streamtest.Slice(values, streamtest.BatchSize(256))).
					Tap(func(context.Context, int) error {
						time.Sleep(time.Millisecond)
						return nil
					}, stream.KeyOrdered(n, func(v int) int { return v % keyedKeys })).
					Tap(func(context.Context, int) error { handled++; return nil }).
					Checkpointing(&checkpoint.MemoryStore{}).
					Run(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				check(b, handled, keyedRecords)
			}
			reportRate(b, b.N*keyedRecords, time.Since(start))
		})
	}
}
