package source_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestReuseBytesSequentialPipelineSeesEveryValue proves a sequential
// pipeline over a ReuseBytes source handles every record with its own bytes
// (each batch is finished before the next Read reuses the buffer), across
// many small batches.
func TestReuseBytesSequentialPipelineSeesEveryValue(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			createTopic(t, lg, "t", 1)
			appendRange(t, lg, "t", 0, 300)
			var got []string
			err := stream.From(source.Partition(lg, "t", 0, source.Earliest, source.Replay(), source.ReuseBytes(), source.MaxBytes(256))).
				Tap(func(_ context.Context, r log.Record) error {
					got = append(got, string(r.Value)) // a copy: the bytes are reused
					return nil
				}).
				Run(context.Background())
			require.NoError(t, err)
			require.Len(t, got, 300)
			for i, v := range got {
				require.Equal(t, value(int64(i)), v)
			}
		})
	}
}

// ackLater is an AsyncSink that acknowledges each write on a goroutine of
// its own, later, as Kafka's producer does: it holds the records' bytes
// until then.
type ackLater struct{}

func (ackLater) Write(context.Context, []log.Record) error { return nil }
func (ackLater) Flush(context.Context) error               { return nil }
func (ackLater) WriteAsync(_ context.Context, _ []log.Record, ack func(int, error)) error {
	go ack(-1, nil)
	return nil
}

// TestReuseBytesRefusedWithStagesThatHoldRecords proves Run refuses a
// ReuseBytes source feeding a stage that keeps records past the next Read
// (an asynchronous sink among them), before reading anything.
func TestReuseBytesRefusedWithStagesThatHoldRecords(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	createTopic(t, lg, "t", 1)
	appendRange(t, lg, "t", 0, 10)
	src := func() *source.PartitionSource {
		return source.Partition(lg, "t", 0, source.Earliest, source.Replay(), source.ReuseBytes())
	}
	nop := func(context.Context, log.Record) error { return nil }
	for name, s := range map[string]interface{ Run(context.Context) error }{
		"parallel":   stream.From(src()).Tap(nop, stream.Parallel(2)),
		"keyordered": stream.From(src()).Tap(nop, stream.KeyOrdered(2, func(r log.Record) string { return string(r.Key) })),
		"batch":      stream.Batch(stream.From(src()), 4, 0),
		"asyncsink":  stream.From(src()).To(ackLater{}),
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, s.Run(context.Background()), stream.ErrReusedBytes)
		})
	}
	// Without ReuseBytes the same pipeline runs.
	require.NoError(t, stream.From(source.Partition(lg, "t", 0, source.Earliest, source.Replay())).Tap(nop, stream.Parallel(2)).Run(context.Background()))
}
