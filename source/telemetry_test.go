package source_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"

	"github.com/strom-dev/strom/internal/metrictest"
	"github.com/strom-dev/strom/internal/testutil"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestPartitionLagFollowsTheLogHighWatermark ensures a pipeline over a log
// partition reports the partition's high watermark as the log has it, and
// a lag of high watermark minus position, also as records are appended
// behind a record the pipeline has not finished.
func TestPartitionLagFollowsTheLogHighWatermark(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeMmap)
	createTopic(t, lg, "orders", 1)
	appendRange(t, lg, "orders", 0, 100)
	mp, reader := metrictest.Provider(t)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := stream.From(source.Partition(lg, "orders", 0, source.Earliest), stream.WithMeterProvider(mp)).
		Map(func(ctx context.Context, r log.Record) (log.Record, error) {
			if r.Offset == 60 {
				select {
				case <-release:
				case <-ctx.Done():
					return r, ctx.Err()
				}
			}
			return r, nil
		}, stream.Parallel(4))
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	part := []attribute.KeyValue{attribute.String("messaging.destination.name", "orders"),
		attribute.String("messaging.destination.partition.id", "0")}
	values := func() (pos, hwm, lag int64) {
		m := metrictest.Collect(t, reader)
		pos, _ = m.Int(stream.MetricPartitionPosition, part...)
		hwm, _ = m.Int(stream.MetricPartitionHighWatermark, part...)
		lag, _ = m.Int(stream.MetricPartitionLag, part...)
		return pos, hwm, lag
	}
	require.Eventually(t, func() bool {
		pos, hwm, lag := values()
		return pos == 60 && hwm == 100 && lag == 40
	}, 5*time.Second, time.Millisecond, "record 60 holds the position")
	appendRange(t, lg, "orders", 100, 120)
	require.Eventually(t, func() bool {
		pos, hwm, lag := values()
		return pos == 60 && hwm == 120 && lag == 60
	}, 5*time.Second, time.Millisecond, "appends raise the lag")
	close(release)
	require.Eventually(t, func() bool {
		pos, hwm, lag := values()
		return pos == 120 && hwm == 120 && lag == 0
	}, 5*time.Second, time.Millisecond, "caught up")
	cancel()
	require.NoError(t, <-done)
}

// TestTopicSourceHighWatermarkPerPartition ensures a topic source answers
// the high watermark of each partition of its topic once opened, and
// nothing for another topic or before it opened.
func TestTopicSourceHighWatermarkPerPartition(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "orders", 2)
	p1, err := tp.Partition(1)
	require.NoError(t, err)
	_, err = p1.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")})
	require.NoError(t, err)
	src := source.Topic(lg, "orders", source.Earliest, source.Replay())
	defer src.Close()
	_, ok := src.HighWatermark("orders", 1)
	assert.False(t, ok, "not opened yet")
	_, err = src.Read(context.Background())
	require.NoError(t, err)
	hwm, ok := src.HighWatermark("orders", 1)
	require.True(t, ok)
	assert.Equal(t, int64(2), hwm)
	hwm, ok = src.HighWatermark("orders", 0)
	require.True(t, ok)
	assert.Zero(t, hwm)
	_, ok = src.HighWatermark("other", 0)
	assert.False(t, ok)
	_, ok = src.HighWatermark("orders", 2)
	assert.False(t, ok, "no such partition")
}

// TestCaughtUpOnlyOnceNoRecordBelowTheHighWatermarkIsLeft ensures the log
// sources tell stream.Idleness that a partition is caught up only when no
// record below its high watermark is left for the pipeline: not while
// records are unread or read but not finished (next below the high
// watermark), and, before the pipeline finished any, only for a partition
// the source started at its high watermark and returned nothing of.
func TestCaughtUpOnlyOnceNoRecordBelowTheHighWatermarkIsLeft(t *testing.T) {
	lg := testutil.OpenLog(t, log.ModeFile)
	tp := createTopic(t, lg, "orders", 2)
	p0, err := tp.Partition(0)
	require.NoError(t, err)
	_, err = p0.Append(context.Background(), log.Record{Value: []byte("a")}, log.Record{Value: []byte("b")}, log.Record{Value: []byte("c")})
	require.NoError(t, err)

	src := source.Topic(lg, "orders", source.Earliest) // following
	defer src.Close()
	_, ok := src.CaughtUp("orders", 0, -1)
	assert.False(t, ok, "not opened yet")
	_, err = src.Read(context.Background())
	require.NoError(t, err)
	up, ok := src.CaughtUp("orders", 1, -1)
	require.True(t, ok)
	assert.True(t, up, "an empty partition, started at its high watermark")
	up, ok = src.CaughtUp("orders", 0, -1)
	require.True(t, ok)
	assert.False(t, up, "partition 0 has records the pipeline has not finished")
	up, _ = src.CaughtUp("orders", 0, 2)
	assert.False(t, up, "the record at offset 2 is not finished")
	up, _ = src.CaughtUp("orders", 0, 3)
	assert.True(t, up, "every record below the high watermark is finished")
	_, ok = src.CaughtUp("other", 0, 3)
	assert.False(t, ok, "another topic")
	_, ok = src.CaughtUp("orders", 2, 3)
	assert.False(t, ok, "no such partition")

	p1, err := tp.Partition(1)
	require.NoError(t, err)
	_, err = p1.Append(context.Background(), log.Record{Value: []byte("d")})
	require.NoError(t, err)
	up, _ = src.CaughtUp("orders", 1, -1)
	assert.False(t, up, "partition 1 has a record now, not yet read")

	ps := source.Partition(lg, "orders", 0, source.At(3), source.Replay())
	defer ps.Close()
	_, ok = ps.CaughtUp("orders", 0, -1)
	assert.False(t, ok, "not opened yet")
	readUntilEOF(t, ps)
	up, ok = ps.CaughtUp("orders", 0, -1)
	require.True(t, ok)
	assert.True(t, up, "started at the high watermark, returned nothing")
	_, err = p0.Append(context.Background(), log.Record{Value: []byte("e")})
	require.NoError(t, err)
	up, _ = ps.CaughtUp("orders", 0, -1)
	assert.True(t, up, "a replay ends where the high watermark was when it opened")
	ps = source.Partition(lg, "orders", 0, source.At(1), source.Replay())
	defer ps.Close()
	readUntilEOF(t, ps)
	up, _ = ps.CaughtUp("orders", 0, -1)
	assert.False(t, up, "it returned records the pipeline has not finished")
	up, _ = ps.CaughtUp("orders", 0, 4)
	assert.True(t, up)
}
