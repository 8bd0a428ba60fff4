package source_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestWindowIdlenessOverAFollowedTopicFiresABacklogAppendedAtOnce is the
// user trial behind "every partition idle": a followed topic of 2
// partitions, partition 1 with one record at 10:00:30, partition 0 with
// records at 10:00:10 ... 10:05:10, all appended before the pipeline
// starts, then nothing. Both partitions are read to their end and go
// quiet together; once the Idleness has passed, the window [10:00, 10:01)
// of partition 1 and partition 0's windows up to 10:05 fire (before, none
// did when partition 0 was the first to go quiet). It waits on the
// results, with a deadline, not on time.
func TestWindowIdlenessOverAFollowedTopicFiresABacklogAppendedAtOnce(t *testing.T) {
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	defer lg.Close()
	tp, err := lg.CreateTopic("events", 2)
	require.NoError(t, err)
	at := func(m, s int) int64 {
		return time.Date(2026, 1, 1, 10, m, s, 0, time.UTC).UnixMilli()
	}
	p0, err := tp.Partition(0)
	require.NoError(t, err)
	var recs []log.Record
	for m := range 6 {
		recs = append(recs, log.Record{Value: []byte("a"), Timestamp: at(m, 10)})
	}
	_, err = p0.Append(context.Background(), recs...)
	require.NoError(t, err)
	p1, err := tp.Partition(1)
	require.NoError(t, err)
	_, err = p1.Append(context.Background(), log.Record{Value: []byte("b"), Timestamp: at(0, 30)})
	require.NoError(t, err)

	var mu sync.Mutex
	got := map[string][]int{} // value: the minutes of its windows fired
	s := stream.From(source.Topic(lg, "events", source.Earliest))
	w := stream.Window(stream.KeyBy(s, func(r log.Record) string { return string(r.Value) }),
		stream.Tumbling(time.Minute), stream.Count[log.Record](), stream.Idleness(200*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- w.Tap(func(_ context.Context, r stream.WindowResult[string, int64]) error {
			mu.Lock()
			defer mu.Unlock()
			got[r.Key] = append(got[r.Key], r.Start.Minute())
			return nil
		}).Run(ctx)
	}()
	fired := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got["a"]) + len(got["b"])
	}
	ok := assert.Eventually(t, func() bool { return fired() == 6 }, 10*time.Second, time.Millisecond,
		"b's window and a's five windows below its watermark 10:05:10 fire")
	cancel()
	require.NoError(t, <-done)
	if ok {
		assert.Equal(t, map[string][]int{"a": {0, 1, 2, 3, 4}, "b": {0}}, got)
	}
}
