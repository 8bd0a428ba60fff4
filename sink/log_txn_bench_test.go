package sink_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
)

// BenchmarkLogSinkCommit measures one transaction of an ExactlyOnce
// LogSink: 100 records of 100 B written to a 3-partition topic, a state
// snapshot of the given size saved, and the commit (with Synced, a sync of
// each partition written, then the transaction file's rewrite: temporary
// file, fsync, rename, folder fsync). ns/op is the transaction's cost
// beside its writes; B/op follows the snapshot, encoded whole each time.
func BenchmarkLogSinkCommit(b *testing.B) {
	for _, synced := range []bool{false, true} {
		for _, stateBytes := range []int{0, 64 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("synced=%v/state=%dKiB", synced, stateBytes>>10), func(b *testing.B) {
				ctx := context.Background()
				lg := testutil.OpenLog(b, log.ModeMmap, log.WithSegmentBytes(64<<20))
				tp, err := lg.CreateTopic("out", 3)
				require.NoError(b, err)
				var opts []sink.LogOption
				if synced {
					opts = append(opts, sink.Synced())
				}
				out := sink.Log(tp, opts...)
				require.NoError(b, out.BeginTransactions(ctx))
				recs := make([]log.Record, 100)
				for i := range recs {
					recs[i] = log.Record{Key: fmt.Appendf(nil, "k%d", i), Value: make([]byte, 100)}
				}
				state := make([]byte, stateBytes)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					require.NoError(b, out.Write(ctx, recs))
					if stateBytes > 0 {
						require.NoError(b, out.SaveState(ctx, "agg", state))
					}
					pos := []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: checkpoint.At(int64(i + 1))}}
					if _, err := out.EndTransaction(ctx, pos, true); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
