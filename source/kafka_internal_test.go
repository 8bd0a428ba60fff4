package source

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchOf returns a poll's fetches holding n records of each of topic's
// partitions ps, at offsets 0..n-1.
func fetchOf(topic string, n int, ps ...int32) kgo.Fetches {
	ft := kgo.FetchTopic{Topic: topic}
	for _, p := range ps {
		fp := kgo.FetchPartition{Partition: p}
		for o := range int64(n) {
			fp.Records = append(fp.Records, &kgo.Record{Topic: topic, Partition: p, Offset: o, Value: []byte{byte(p), byte(o)}})
		}
		ft.Partitions = append(ft.Partitions, fp)
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{ft}}}
}

// TestKafkaRecordsOfRevokedOrLostPartitionsAreNotHandedOn proves the
// guard behind "records of a revoked partition are not handed on after
// revocation": once onRevoked (or onLost) ran for a partition, records of
// it that a poll still returns are dropped and counted, while the
// partitions still assigned are handed on in full.
func TestKafkaRecordsOfRevokedOrLostPartitionsAreNotHandedOn(t *testing.T) {
	s := &KafkaSource{assigned: map[topicPartition]*kafkaPart{
		{"t", 0}: {ready: true, floor: -1},
		{"t", 1}: {ready: true, floor: -1},
		{"t", 2}: {ready: true, floor: -1},
	}, cfg: kafkaConfig{timeout: DefaultKafkaTimeout}}
	ctx := context.Background()

	elems, err := s.take(ctx, fetchOf("t", 4, 0, 1, 2))
	require.NoError(t, err)
	assert.Len(t, elems, 12, "every assigned partition's records are handed on")

	s.onRevoked(ctx, nil, map[string][]int32{"t": {1}})
	s.onLost(ctx, nil, map[string][]int32{"t": {2}})
	elems, err = s.take(ctx, fetchOf("t", 4, 0, 1, 2))
	require.NoError(t, err)
	require.Len(t, elems, 4)
	for _, e := range elems {
		assert.Equal(t, int32(0), e.Partition, "only the partition still assigned is handed on")
	}
	st := s.Stats()
	assert.Equal(t, int64(8), st.DroppedRecords)
	assert.Equal(t, int64(1), st.Revoked)
	assert.Equal(t, int64(1), st.Lost)

	// Revoking or losing a partition twice counts it once.
	s.onRevoked(ctx, nil, map[string][]int32{"t": {1}})
	s.onLost(ctx, nil, map[string][]int32{"t": {2}})
	assert.Equal(t, int64(1), s.Stats().Revoked)
	assert.Equal(t, int64(1), s.Stats().Lost)
}

// TestKafkaFetchNeverMovesAHighWatermarkBack ensures a fetch that reports
// a lower high watermark than one already known (a listing of the end
// offset answered after the fetch was sent) leaves the higher one: the lag
// gauge never shows records as gone that a listing already counted.
func TestKafkaFetchNeverMovesAHighWatermarkBack(t *testing.T) {
	s := &KafkaSource{assigned: map[topicPartition]*kafkaPart{
		{"t", 0}: {ready: true, floor: -1, hwm: 10},
		{"t", 1}: {ready: true, floor: -1, hwm: -1},
	}, cfg: kafkaConfig{timeout: DefaultKafkaTimeout}}
	f := fetchOf("t", 2, 0, 1)
	for i := range f[0].Topics[0].Partitions {
		f[0].Topics[0].Partitions[i].HighWatermark = 2
	}
	_, err := s.take(context.Background(), f)
	require.NoError(t, err)
	hwm, ok := s.HighWatermark("t", 0)
	assert.True(t, ok)
	assert.Equal(t, int64(10), hwm, "the listing's higher value stays")
	hwm, ok = s.HighWatermark("t", 1)
	assert.True(t, ok)
	assert.Equal(t, int64(2), hwm, "the fetch's value where none was known")
}

// TestKafkaReadAheadBytesBoundsTheClientsFetchBuffers ensures the source's
// client buffers at most about KafkaReadAheadBytes of fetched records, by
// default too (64 MiB, where kgo's own default is a 50 MiB fetch per
// broker, any number at once): four fetches in flight or buffered, of a
// quarter of the bound each, no partition's share above that; and that
// the kgo options given in KafkaClientOpts still override it.
func TestKafkaReadAheadBytesBoundsTheClientsFetchBuffers(t *testing.T) {
	for _, tc := range []struct {
		name              string
		opts              []KafkaOption
		fetches           int
		fetchMax, partMax int32
	}{
		{"default", nil, 4, 16 << 20, 1 << 20},
		{"2MiB", []KafkaOption{KafkaReadAheadBytes(2 << 20)}, 4, 512 << 10, 512 << 10},
		{"zero keeps the default", []KafkaOption{KafkaReadAheadBytes(0)}, 4, 16 << 20, 1 << 20},
		{"client options win", []KafkaOption{KafkaReadAheadBytes(8 << 20),
			KafkaClientOpts(kgo.FetchMaxBytes(1<<20), kgo.MaxConcurrentFetches(2))}, 2, 1 << 20, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Kafka([]string{"127.0.0.1:1"}, "g", []string{"t"}, tc.opts...)
			require.NoError(t, err)
			cl, err := kgo.NewClient(src.clientOpts()...)
			require.NoError(t, err)
			defer cl.Close()
			assert.EqualValues(t, tc.fetches, cl.OptValue(kgo.MaxConcurrentFetches))
			assert.EqualValues(t, tc.fetchMax, cl.OptValue(kgo.FetchMaxBytes))
			assert.EqualValues(t, tc.partMax, cl.OptValue(kgo.FetchMaxPartitionBytes))
		})
	}
}
