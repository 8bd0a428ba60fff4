package sink_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// readPartition returns every record of partition id of tp.
func readPartition(t *testing.T, tp *log.Topic, id int32) []log.Record {
	t.Helper()
	p, err := tp.Partition(id)
	require.NoError(t, err)
	r := p.Replay(p.StartOffset())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out []log.Record
	for {
		recs, err := r.Next(ctx, 1<<20)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, recs...)
	}
}

// TestLogSinkKeyedRecordsLandInTheKafkaPartition ensures each keyed record
// goes to log.KafkaPartition(key, n), in write order within the partition.
func TestLogSinkKeyedRecordsLandInTheKafkaPartition(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp, err := lg.CreateTopic("events", 4)
			require.NoError(t, err)

			var recs []log.Record
			for i := range 200 {
				recs = append(recs, log.Record{
					Key:   fmt.Appendf(nil, "user-%d", i%13),
					Value: fmt.Appendf(nil, "%d", i),
				})
			}
			recs = append(recs, log.Record{Key: []byte{}, Value: []byte("empty key")})
			require.NoError(t, sink.Log(tp).Write(context.Background(), recs))

			total := 0
			for id := range int32(4) {
				got := readPartition(t, tp, id)
				total += len(got)
				last := map[string]int{}
				for _, r := range got {
					require.NotNil(t, r.Key)
					require.Equal(t, log.KafkaPartition(r.Key, 4), id, "key %q", r.Key)
					var n int
					if string(r.Value) != "empty key" {
						_, err := fmt.Sscanf(string(r.Value), "%d", &n)
						require.NoError(t, err)
						prev, seen := last[string(r.Key)]
						require.True(t, !seen || prev < n, "order of key %q kept", r.Key)
						last[string(r.Key)] = n
					}
				}
			}
			require.Equal(t, len(recs), total)
		})
	}
}

// TestLogSinkNilKeysSpreadRoundRobin ensures records without a key are spread
// evenly over the partitions.
func TestLogSinkNilKeysSpreadRoundRobin(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp, err := lg.CreateTopic("events", 4)
			require.NoError(t, err)
			recs := make([]log.Record, 40)
			for i := range recs {
				recs[i] = log.Record{Value: fmt.Appendf(nil, "%d", i)}
			}
			require.NoError(t, sink.Log(tp).Write(context.Background(), recs))
			for id := range int32(4) {
				got := readPartition(t, tp, id)
				require.Len(t, got, 10, "partition %d", id)
				for _, r := range got {
					require.Nil(t, r.Key, "a nil key stays nil")
				}
			}
		})
	}
}

// TestLogSinkSyncedWritesAreReadableAfterReopen ensures a Synced sink writes
// every record, and that they are all there when the log is reopened.
func TestLogSinkSyncedWritesAreReadableAfterReopen(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			dir := t.TempDir()
			lg, err := log.Open(dir, log.WithMode(m.Mode), log.WithSegmentBytes(testutil.SegmentBytes))
			require.NoError(t, err)
			tp, err := lg.CreateTopic("events", 3)
			require.NoError(t, err)
			out := sink.Log(tp, sink.Synced())
			for batch := range 5 {
				recs := make([]log.Record, 30)
				for i := range recs {
					recs[i] = log.Record{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "%d-%d", batch, i)}
				}
				require.NoError(t, out.Write(context.Background(), recs))
			}
			require.NoError(t, out.Write(context.Background(), nil), "an empty batch syncs nothing and succeeds")
			require.NoError(t, lg.Close())

			again, err := log.Open(dir, log.WithMode(m.Mode), log.WithSegmentBytes(testutil.SegmentBytes))
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, again.Close()) })
			tp, err = again.Topic("events")
			require.NoError(t, err)
			total := 0
			for id := range int32(3) {
				total += len(readPartition(t, tp, id))
			}
			require.Equal(t, 150, total)
		})
	}
}

// TestLogSinkRecordLargerThanASegmentFailsWithErrRecordTooLarge ensures an
// oversized record is an error naming the topic, and that the batch holding
// it is refused whole: Write appends a batch per partition and checks every
// record's size first, so nothing of it is written.
func TestLogSinkRecordLargerThanASegmentFailsWithErrRecordTooLarge(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			tp, err := lg.CreateTopic("events", 1)
			require.NoError(t, err)
			recs := []log.Record{
				{Value: []byte("before")},
				{Value: make([]byte, 2*testutil.SegmentBytes)},
				{Value: []byte("after")},
			}
			err = sink.Log(tp, sink.Synced()).Write(context.Background(), recs)
			require.ErrorIs(t, err, log.ErrRecordTooLarge)
			var te *sink.TopicError
			require.ErrorAs(t, err, &te)
			require.Equal(t, "events", te.Topic)
			require.Contains(t, err.Error(), "sink: topic events")

			require.Empty(t, readPartition(t, tp, 0))
		})
	}
}

// TestLogSinkOnReadOnlyLogFailsWithErrReadOnly ensures writing through a
// read-only log is refused with the log's error, wrapped with the topic.
func TestLogSinkOnReadOnlyLogFailsWithErrReadOnly(t *testing.T) {
	w := testutil.OpenLog(t, log.ModeFile)
	_, err := w.CreateTopic("events", 1)
	require.NoError(t, err)
	r, err := log.Open(w.Dir(), log.ReadOnly())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, r.Close()) })
	tp, err := r.Topic("events")
	require.NoError(t, err)

	err = sink.Log(tp).Write(context.Background(), []log.Record{{Value: []byte("x")}})
	require.ErrorIs(t, err, log.ErrReadOnly)
	require.Contains(t, err.Error(), "sink: topic events: ")
}

// TestLogSinkNilTopicFailsWithErrNilTopic ensures a sink built without a
// topic fails on Write instead of panicking.
func TestLogSinkNilTopicFailsWithErrNilTopic(t *testing.T) {
	err := sink.Log(nil).Write(context.Background(), []log.Record{{Value: []byte("x")}})
	require.ErrorIs(t, err, sink.ErrNilTopic)
}

// TestTopicErrorNamesThePartitionWhenKnown ensures the error text carries the
// partition only when one is known.
func TestTopicErrorNamesThePartitionWhenKnown(t *testing.T) {
	cause := errors.New("disk full")
	require.Equal(t, "sink: topic events partition 2: disk full",
		(&sink.TopicError{Topic: "events", Partition: 2, Err: cause}).Error())
	require.Equal(t, "sink: topic events: disk full",
		(&sink.TopicError{Topic: "events", Partition: -1, Err: cause}).Error())
	require.ErrorIs(t, &sink.TopicError{Topic: "events", Err: cause}, cause)
}

// TestRelayPipelineCopiesEveryRecordOnceAndCheckpoints ensures a pipeline
// from one topic into another through a Synced log sink copies each record
// once, keeps keys, and saves the source position at its high watermark.
func TestRelayPipelineCopiesEveryRecordOnceAndCheckpoints(t *testing.T) {
	for _, m := range testutil.Modes {
		t.Run(m.Name, func(t *testing.T) {
			lg := testutil.OpenLog(t, m.Mode)
			in, err := lg.CreateTopic("events", 1)
			require.NoError(t, err)
			out, err := lg.CreateTopic("copies", 2)
			require.NoError(t, err)
			for i := range 60 {
				_, _, err := in.Append(context.Background(), log.Record{Key: fmt.Appendf(nil, "k%d", i%5), Value: fmt.Appendf(nil, "%d", i)})
				require.NoError(t, err)
			}
			var store checkpoint.MemoryStore
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			for range 2 { // the second run finds nothing new
				src := source.Partition(lg, "events", 0, source.FromStore(&store), source.Replay(), source.MaxBytes(200))
				err = stream.From(src).To(sink.Log(out, sink.Synced())).Checkpointing(&store).Run(ctx)
				require.NoError(t, err)
			}

			pos, found, err := store.Load(ctx, "events", 0)
			require.NoError(t, err)
			require.True(t, found)
			require.Equal(t, int64(60), pos.Offset)
			seen := map[string]bool{}
			for id := range int32(2) {
				for _, r := range readPartition(t, out, id) {
					require.Equal(t, log.KafkaPartition(r.Key, 2), id)
					require.False(t, seen[string(r.Value)], "value %s copied once", r.Value)
					seen[string(r.Value)] = true
				}
			}
			require.Len(t, seen, 60)
		})
	}
}
