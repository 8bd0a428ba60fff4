package log_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/log"
)

// batchRecords returns n records, a third of them without a key, the rest
// keyed by one of seven keys, each value naming its index.
func batchRecords(n int) []log.Record {
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i].Value = []byte(fmt.Sprintf("v%d", i))
		if i%3 != 0 {
			recs[i].Key = []byte(fmt.Sprintf("k%d", i%7))
		}
	}
	return recs
}

// partitionValues returns the values of every partition of tp, by
// partition, in offset order.
func partitionValues(t *testing.T, tp *log.Topic) [][]string {
	t.Helper()
	out := make([][]string, tp.Partitions())
	for i := range out {
		p, err := tp.Partition(int32(i))
		require.NoError(t, err)
		for _, r := range readAll(t, p) {
			out[i] = append(out[i], string(r.Value))
		}
	}
	return out
}

// TestAppendBatchLandsWhereAppendOneByOneWould ensures AppendBatch puts
// every record in the partition, and at the position within it, that
// Append called once per record gives, round-robin for nil keys included,
// across several batches.
func TestAppendBatchLandsWhereAppendOneByOneWould(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		ctx := context.Background()
		one := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(4096))
		batch := openLog(t, t.TempDir(), log.WithMode(mode), log.WithSegmentBytes(4096))
		t1, err := one.CreateTopic("events", 5)
		require.NoError(t, err)
		t2, err := batch.CreateTopic("events", 5)
		require.NoError(t, err)
		recs := batchRecords(300)
		for _, r := range recs {
			_, _, err := t1.Append(ctx, r)
			require.NoError(t, err)
		}
		require.NoError(t, t2.AppendBatch(ctx, recs[:100]))
		require.NoError(t, t2.AppendBatch(ctx, recs[100:101]))
		require.NoError(t, t2.AppendBatch(ctx, nil))
		require.NoError(t, t2.AppendBatchAck(ctx, log.AckSynced, recs[101:]))
		want := partitionValues(t, t1)
		require.Equal(t, want, partitionValues(t, t2))
		total := 0
		for _, vs := range want {
			require.NotEmpty(t, vs)
			total += len(vs)
		}
		require.Equal(t, 300, total)
	})
}

// TestAppendBatchRefusesATooLargeRecordBeforeAppendingAnything ensures one
// oversized record fails the whole batch with a *RecordTooLargeError and
// leaves every partition as it was.
func TestAppendBatchRefusesATooLargeRecordBeforeAppendingAnything(t *testing.T) {
	lg := openLog(t, t.TempDir(), log.WithSegmentBytes(4096))
	tp, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	recs := batchRecords(30)
	recs[20].Value = make([]byte, 8192)
	err = tp.AppendBatch(context.Background(), recs)
	var tl *log.RecordTooLargeError
	require.ErrorAs(t, err, &tl)
	require.Equal(t, "events", tl.Topic)
	for _, vs := range partitionValues(t, tp) {
		require.Empty(t, vs)
	}
}

// TestAppendBatchThroughReadOnlyFails ensures a read-only log refuses a
// batch with ErrReadOnly.
func TestAppendBatchThroughReadOnlyFails(t *testing.T) {
	dir := t.TempDir()
	lg := openLog(t, dir)
	_, err := lg.CreateTopic("events", 2)
	require.NoError(t, err)
	ro := openLog(t, dir, log.ReadOnly())
	tp, err := ro.Topic("events")
	require.NoError(t, err)
	require.ErrorIs(t, tp.AppendBatch(context.Background(), batchRecords(3)), log.ErrReadOnly)
}

// BenchmarkTopicAppendBatch appends 1024 records of 64 B per op to a topic
// of 8 partitions, keyed (a few hundred distinct keys), one AppendBatch per
// op against one Topic.Append per record. It reports records/s; allocs/op
// shows AppendBatch groups without allocating per record.
func BenchmarkTopicAppendBatch(b *testing.B) {
	const n = 1024
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = log.Record{Key: []byte(fmt.Sprintf("key-%d", i%300)), Value: make([]byte, 64), Timestamp: 1}
	}
	for _, way := range []string{"AppendBatch", "Append"} {
		b.Run(way, func(b *testing.B) {
			lg, err := log.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer lg.Close()
			tp, err := lg.CreateTopic("bench", 8)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.SetBytes(n * 64)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if way == "AppendBatch" {
					if err := tp.AppendBatch(ctx, recs); err != nil {
						b.Fatal(err)
					}
					continue
				}
				for _, r := range recs {
					if _, _, err := tp.Append(ctx, r); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N)*n/b.Elapsed().Seconds(), "records/s")
		})
	}
}
