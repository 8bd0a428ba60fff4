package log_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/semconv/v1.43.0/messagingconv"

	"github.com/strom-dev/strom/internal/metrictest"
	"github.com/strom-dev/strom/log"
)

// TestMetricsCountAppendsBytesAndSyncs ensures the log reports, per
// partition, exactly the records and frame bytes appended and the syncs
// run, with one sync duration per sync, and zero for a partition not
// written.
func TestMetricsCountAppendsBytesAndSyncs(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode log.Mode) {
		mp, reader := metrictest.Provider(t)
		lg := openLog(t, t.TempDir(), log.WithMode(mode), log.WithMeterProvider(mp))
		tp, err := lg.CreateTopic("orders", 2)
		require.NoError(t, err)
		p, err := tp.Partition(1)
		require.NoError(t, err)

		ctx := context.Background()
		var want int64
		var recs []log.Record
		for i := range 10 {
			r := log.Record{Key: []byte("k"), Value: make([]byte, 10*i)}
			want += log.FrameBytes(r)
			recs = append(recs, r)
		}
		_, err = p.Append(ctx, recs[:4]...)
		require.NoError(t, err)
		_, err = p.AppendAck(ctx, log.AckSynced, recs[4:]...)
		require.NoError(t, err)
		require.NoError(t, p.Sync()) // nothing new: no sync
		_, err = p.Append(ctx, recs[0])
		require.NoError(t, err)
		want += log.FrameBytes(recs[0])
		require.NoError(t, p.Sync())

		m := metrictest.Collect(t, reader)
		part := attribute.String("messaging.destination.partition.id", "1")
		topic := attribute.String("messaging.destination.name", "orders")
		sys := attribute.String("messaging.system", "strom")
		sent, ok := m.Int(log.MetricSentMessages, sys, topic, part)
		require.True(t, ok, "messaging.client.sent.messages of partition 1 reported; got %v", m.Names())
		assert.Equal(t, int64(11), sent)
		bytes, ok := m.Int(log.MetricBytes, topic, part)
		require.True(t, ok)
		assert.Equal(t, want, bytes)
		syncs, ok := m.Int(log.MetricSyncs, topic, part)
		require.True(t, ok)
		assert.Equal(t, int64(2), syncs, "one AckSynced round and one Sync with something to sync")
		assert.Equal(t, log.SyncCalls(p), syncs)
		h, ok := m.Histogram(log.MetricSyncDuration, topic, part)
		require.True(t, ok)
		assert.Equal(t, uint64(syncs), h.Count, "one duration per sync")
		assert.Positive(t, h.Sum)
		idle, ok := m.Int(log.MetricSentMessages, attribute.String("messaging.destination.partition.id", "0"))
		assert.True(t, ok, "partition 0, writable, is reported")
		assert.Zero(t, idle, "partition 0 was never written")
	})
}

// TestMetricNamesFollowSemconv ensures the log's sent-messages metric is
// the one the messaging semantic conventions name.
func TestMetricNamesFollowSemconv(t *testing.T) {
	assert.Equal(t, messagingconv.ClientSentMessages{}.Name(), log.MetricSentMessages)
}

// TestMetricsStopAtClose ensures a closed log no longer reports: its
// callback is unregistered.
func TestMetricsStopAtClose(t *testing.T) {
	mp, reader := metrictest.Provider(t)
	lg, err := log.Open(t.TempDir(), log.WithMeterProvider(mp))
	require.NoError(t, err)
	p := openPartition(t, lg, "t", 1)
	appendN(t, p, 0, 3)
	got, ok := metrictest.Collect(t, reader).Int(log.MetricSentMessages)
	require.True(t, ok)
	assert.Equal(t, int64(3), got)
	require.NoError(t, lg.Close())
	assert.Zero(t, metrictest.Collect(t, reader).Points(log.MetricSentMessages))
}
