package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// A topic's partitions are read taking turns, a batch at a time: the first
// batch of partition 0 holds events far ahead of the first ones of
// partitions 1 and 2, still unread. The window's watermark must wait for
// every partition the source lists, or their records come out late.
func TestWindowOverATopicWaitsForEveryPartitionBeforeItsWatermarkMoves(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	const n = 3000 // one event a second, round robin: 1,000 per partition, 50 minutes
	for p := int32(0); p < 3; p++ {
		part, err := tp.Partition(p)
		require.NoError(t, err)
		var recs []log.Record
		for i := int(p); i < n; i += 3 {
			recs = append(recs, log.Record{Key: []byte{byte(i % 7)}, Value: []byte("x"), Timestamp: base + int64(i)*1000})
		}
		_, err = part.Append(context.Background(), recs...)
		require.NoError(t, err)
	}
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	src := source.Topic(lg, "events", source.FromStore(store), source.Replay())
	counts := map[int64]int64{}
	s := stream.From(src).Checkpointing(store)
	w := stream.Window(stream.KeyBy(s, func(r log.Record) byte { return 0 }), stream.Tumbling(time.Minute), stream.Count[log.Record]())
	err = w.Tap(func(_ context.Context, r stream.WindowResult[byte, int64]) error {
		counts[r.Start.UnixMilli()] += r.Value
		return nil
	}).Run(context.Background())
	require.NoError(t, err, "no record may be late: every partition is in event-time order")
	require.Len(t, counts, 50)
	for start, c := range counts {
		require.EqualValues(t, 60, c, "window at %s", time.UnixMilli(start).UTC())
	}
}

// A Filter before the window drops the first records of one partition: the
// partition, listed by the source, holds the watermark back until one of
// its records reaches the window, so none of its later ones is late
// however the partitions' batches interleave.
func TestWindowOverATopicWaitsForAPartitionWhoseFirstRecordsAreFilteredOut(t *testing.T) {
	for run := range 5 {
		lg, err := log.Open(t.TempDir())
		require.NoError(t, err)
		tp, err := lg.CreateTopic("events", 2)
		require.NoError(t, err)
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
		for p := int32(0); p < 2; p++ {
			part, err := tp.Partition(p)
			require.NoError(t, err)
			var recs []log.Record
			for i := range 600 { // one a second in each partition, 10 minutes
				v := "keep"
				if p == 1 && i < 50 {
					v = "drop"
				}
				recs = append(recs, log.Record{Value: []byte(v), Timestamp: base + int64(i)*1000})
			}
			_, err = part.Append(context.Background(), recs...)
			require.NoError(t, err)
		}
		var total int64
		s := stream.From(source.Topic(lg, "events", source.Earliest, source.Replay(), source.MaxBytes(512))).
			Filter(func(_ context.Context, r log.Record) (bool, error) { return string(r.Value) == "keep", nil })
		err = stream.Window(stream.KeyBy(s, func(log.Record) int { return 0 }), stream.Tumbling(time.Minute), stream.Count[log.Record]()).
			Tap(func(_ context.Context, r stream.WindowResult[int, int64]) error { total += r.Value; return nil }).
			Run(context.Background())
		require.NoError(t, err, "run %d: no record may be late", run)
		require.EqualValues(t, 1150, total, "run %d", run)
		require.NoError(t, lg.Close())
	}
}
