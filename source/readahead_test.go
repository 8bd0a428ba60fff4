package source_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
)

// appendSized appends n records of a valueBytes-byte value to partition p
// of topic.
func appendSized(t *testing.T, lg *log.Log, topic string, p int32, n, valueBytes int) {
	t.Helper()
	tp, err := lg.Topic(topic)
	require.NoError(t, err)
	part, err := tp.Partition(p)
	require.NoError(t, err)
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = log.Record{Value: bytes.Repeat([]byte{byte('a' + p%26)}, valueBytes)}
	}
	_, err = part.Append(context.Background(), recs...)
	require.NoError(t, err)
}

// readAll reads src to io.EOF and returns how many records it returned per
// partition.
func readAll(t *testing.T, ctx context.Context, src *source.TopicSource) map[int32]int {
	t.Helper()
	got := map[int32]int{}
	for {
		batch, err := src.Read(ctx)
		if errors.Is(err, io.EOF) {
			return got
		}
		require.NoError(t, err)
		for _, e := range batch {
			got[e.Partition]++
		}
	}
}

// TestTopicReadAheadStaysUnderReadAheadBytesWhateverThePartitionCount
// ensures a TopicSource over 64 partitions full of records, whose Read is
// not called (a blocked sink), holds at most ReadAheadBytes read ahead, not
// two batches per partition; and that every record still flows once Read
// is called, leaving nothing held.
func TestTopicReadAheadStaysUnderReadAheadBytesWhateverThePartitionCount(t *testing.T) {
	const (
		partitions = 64
		maxBytes   = 16 << 10
		bound      = 8 * maxBytes // 128 KiB; two batches per partition would be 2 MiB
		records    = 300          // 60 KB per partition: more than two batches
		valueBytes = 200
	)
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			noLeaks(t)
			lg := testutil.OpenLog(t, m.Mode, log.WithSegmentBytes(1<<20)) // batches not cut by segments
			createTopic(t, lg, "events", partitions)
			for p := range int32(partitions) {
				appendSized(t, lg, "events", p, records, valueBytes)
			}
			src := source.Topic(lg, "events", source.Earliest, source.Replay(),
				source.MaxBytes(maxBytes), source.ReadAheadBytes(bound))
			defer src.Close()

			// Read opens the source and starts every partition's goroutine;
			// then nothing calls Read until each of them is stalled.
			ctx := context.Background()
			first, err := src.Read(ctx)
			require.NoError(t, err)
			var held, peak int64
			require.Eventually(t, func() bool {
				var stalled int
				held, peak, stalled = src.ReadAheadForTest()
				return stalled == partitions
			}, 30*time.Second, time.Millisecond, "every partition's goroutine stalls")
			t.Logf("%d partitions, MaxBytes %d: %d bytes held read ahead, at most %d at once (bound %d)",
				partitions, maxBytes, held, peak, bound)
			require.LessOrEqual(t, peak, int64(bound), "the bytes read ahead stay under ReadAheadBytes")
			require.Greater(t, held, int64(bound-maxBytes), "the budget is used")

			got := readAll(t, ctx, src)
			for _, e := range first {
				got[e.Partition]++
			}
			for p := range int32(partitions) {
				require.Equal(t, records, got[p], "partition %d", p)
			}
			held, _, _ = src.ReadAheadForTest()
			require.Zero(t, held, "nothing is held once Read returned everything")
		})
	}
}

// TestTopicReadAheadBatchLargerThanTheBudgetStillFlows ensures a batch
// larger than ReadAheadBytes is read, alone, instead of waiting forever
// for room that can never be made.
func TestTopicReadAheadBatchLargerThanTheBudgetStillFlows(t *testing.T) {
	noLeaks(t)
	lg := testutil.OpenLog(t, log.ModeFile, log.WithSegmentBytes(1<<20))
	createTopic(t, lg, "events", 4)
	for p := range int32(4) {
		appendSized(t, lg, "events", p, 20, 4<<10) // 80 KiB per partition
	}
	src := source.Topic(lg, "events", source.Earliest, source.Replay(),
		source.MaxBytes(64<<10), source.ReadAheadBytes(1<<10))
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := readAll(t, ctx, src)
	require.Equal(t, map[int32]int{0: 20, 1: 20, 2: 20, 3: 20}, got)
	_, peak, _ := src.ReadAheadForTest()
	require.LessOrEqual(t, peak, int64(64<<10+4<<10), "one batch at a time: MaxBytes, plus the record that crosses it")
}

// TestTopicReadAheadIdlePartitionsHoldNoBudget ensures partitions with no
// records, following at their high watermark, hold none of the read-ahead
// budget: with room for one batch and 31 idle partitions, the one
// partition with records is still read, batch after batch.
func TestTopicReadAheadIdlePartitionsHoldNoBudget(t *testing.T) {
	const partitions, maxBytes = 32, 4 << 10
	noLeaks(t)
	lg := testutil.OpenLog(t, log.ModeFile, log.WithSegmentBytes(1<<20))
	createTopic(t, lg, "events", partitions)
	appendSized(t, lg, "events", partitions-1, 100, 400) // 40 KB: about ten batches
	src := source.Topic(lg, "events", source.Earliest,
		source.MaxBytes(maxBytes), source.ReadAheadBytes(maxBytes))
	defer src.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	for n < 100 {
		batch, err := src.Read(ctx)
		require.NoError(t, err, "after %d records", n)
		require.Equal(t, int32(partitions-1), batch[0].Partition)
		n += len(batch)
	}
	require.Equal(t, 100, n)
}
