package sink_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// bigValue is the size of the value the issue relayed: 1,000,000 bytes,
// which with the batch around it passes the producer's default limit.
const bigValue = 1_000_000

// withBig is small, a 1,000,000-byte value, small: offsets 0, 1, 2.
func withBig() []log.Record {
	return []log.Record{
		{Key: []byte("a"), Value: []byte("before")},
		{Key: []byte("b"), Value: bytes.Repeat([]byte("x"), bigValue)},
		{Key: []byte("c"), Value: []byte("after")},
	}
}

// sizedRecord returns a record with key and headers whose KafkaRecordBytes
// is want, or false when no value length gives exactly that (a varint
// length growing by a byte skips one size).
func sizedRecord(key []byte, headers []log.Header, want int) (log.Record, bool) {
	r := log.Record{Key: key, Headers: headers}
	for v := want; v >= 0; v-- {
		r.Value = bytes.Repeat([]byte("v"), v)
		switch n := sink.KafkaRecordBytes(r); {
		case n == want:
			return r, true
		case n < want:
			return r, false
		}
	}
	return r, false
}

// produceFresh produces r through a new franz-go client limited to max
// bytes, which has not yet learned the broker's versions, and returns
// franz-go's verdict. With warm, a small record is produced first, so that
// it knows them.
func produceFresh(t *testing.T, kc *kafkatest.Cluster, max int, r log.Record, warm bool) error {
	t.Helper()
	cl := kc.Client(t, kgo.ProducerBatchMaxBytes(int32(max)), kgo.DefaultProduceTopic("out"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if warm {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("warm")}).FirstErr())
	}
	kr := &kgo.Record{Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	return cl.ProduceSync(ctx, kr).FirstErr()
}

// TestKafkaRecordBytesIsWhatFranzGoCountsAgainstItsLimit ensures
// KafkaRecordBytes is exactly what franz-go compares with
// ProducerBatchMaxBytes before it knows the broker's versions: a record of
// the limit is sent, one a byte over is refused with MESSAGE_TOO_LARGE, for
// records with and without key and headers and with lengths of 1 to 3
// varint bytes; and that once franz-go knows the broker takes flexible
// requests it counts 3 bytes less (the margin KafkaRecordBytes' doc gives).
func TestKafkaRecordBytesIsWhatFranzGoCountsAgainstItsLimit(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	hs := []log.Header{{Key: "strom.relay.partition", Value: []byte("0")}, {Key: "h", Value: nil}}
	for _, c := range []struct {
		max     int
		key     []byte
		headers []log.Header
	}{
		{max: 600},
		{max: 600, key: []byte("k"), headers: hs},
		{max: 20_000, key: bytes.Repeat([]byte("k"), 100), headers: hs},
		{max: sink.DefaultKafkaMaxRecordBytes, headers: hs},
	} {
		name := fmt.Sprintf("max %d key %d headers %d", c.max, len(c.key), len(c.headers))
		at, ok := sizedRecord(c.key, c.headers, c.max)
		if !ok {
			at, ok = sizedRecord(append(c.key, 'k'), c.headers, c.max) // a byte more of key makes it fit
		}
		require.True(t, ok, name)
		over, ok := sizedRecord(at.Key, c.headers, c.max+1)
		require.True(t, ok, name)
		require.NoError(t, produceFresh(t, kc, c.max, at, false), "%s: a record of the limit is sent", name)
		require.ErrorIs(t, produceFresh(t, kc, c.max, over, false), kerr.MessageTooLarge, "%s: a byte over is refused", name)
		if c.max == 600 && c.key == nil {
			over3, ok3 := sizedRecord(nil, nil, c.max+3)
			over4, ok4 := sizedRecord(nil, nil, c.max+4)
			require.True(t, ok3 && ok4)
			require.NoError(t, produceFresh(t, kc, c.max, over3, true), "knowing flexible versions, franz-go counts 3 bytes less")
			require.ErrorIs(t, produceFresh(t, kc, c.max, over4, true), kerr.MessageTooLarge)
		}
	}
}

// relayBig runs the log partition in/0 holding withBig into out, from the
// start, through extra stages before the sink, and returns Run's error.
func relayBig(t *testing.T, lg *log.Log, store checkpoint.Store, out *sink.KafkaSink, before func(*stream.Stream[log.Record]) *stream.Stream[log.Record]) (*stream.Stream[log.Record], error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := source.Partition(lg, "in", 0, source.FromStore(store), source.Replay())
	s := before(stream.From(src)).To(out).Checkpointing(store)
	return s, s.Run(ctx)
}

func noStage(s *stream.Stream[log.Record]) *stream.Stream[log.Record] { return s }

// TestKafkaTooLargeRecordStopsThePipelineWithErrRecordTooLargeNamingIt
// ensures a 1,000,000-byte value, over the producer's default limit, stops
// the pipeline at once (it was a MESSAGE_TOO_LARGE the relay retried
// forever) with an error matching sink.ErrRecordTooLarge and
// kerr.MessageTooLarge that names the Kafka topic, the record's source
// topic, partition and offset, its size and the limit, and that the
// position is not saved past it.
func TestKafkaTooLargeRecordStopsThePipelineWithErrRecordTooLargeNamingIt(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	lg := kafkaLog(t, 1, withBig())
	var store checkpoint.MemoryStore
	out, err := sink.Kafka(kc.Brokers(), "out")
	require.NoError(t, err)
	defer out.Close()
	require.Equal(t, sink.DefaultKafkaMaxRecordBytes, out.MaxRecordBytes())

	_, err = relayBig(t, lg, &store, out, noStage)
	require.ErrorIs(t, err, sink.ErrRecordTooLarge)
	require.ErrorIs(t, err, kerr.MessageTooLarge)
	var big *sink.RecordTooLargeError
	require.ErrorAs(t, err, &big)
	size := sink.KafkaRecordBytes(withBig()[1])
	assert.Equal(t, size, big.Bytes)
	assert.Greater(t, size, bigValue)
	assert.Equal(t, sink.DefaultKafkaMaxRecordBytes, big.MaxBytes)
	var pe *sink.ProduceError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "out", pe.Topic)
	assert.Equal(t, [3]any{"in", int32(0), int64(1)}, [3]any{pe.SourceTopic, pe.SourcePartition, pe.SourceOffset})
	for _, s := range []string{"kafka topic out", "in/0 offset 1", fmt.Sprint(size, " bytes"), "limit of 1000012 bytes", "KafkaMaxRecordBytes"} {
		assert.Contains(t, err.Error(), s)
	}
	pos, found := savedPosition(t, &store)
	assert.False(t, found && pos > 1, "the position %d passed the record too large", pos)
}

// TestKafkaCheckSizeSkipsOrDeadLettersOnlyTheTooLargeRecord ensures the
// CheckSize stage applies its policy to the record too large alone:
// skipped (counted, the position saved past it) or dead-lettered (one
// dead letter, that record, with ErrRecordTooLarge), the records around
// it reaching Kafka; and that without a policy it stops at it: nothing
// after it sent, no position past it saved.
func TestKafkaCheckSizeSkipsOrDeadLettersOnlyTheTooLargeRecord(t *testing.T) {
	for _, policy := range []string{"skip", "deadletter", "stop"} {
		t.Run(policy, func(t *testing.T) {
			kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
			lg := kafkaLog(t, 1, withBig())
			var store checkpoint.MemoryStore
			out, err := sink.Kafka(kc.Brokers(), "out")
			require.NoError(t, err)
			defer out.Close()
			dlq := streamtest.Collect[stream.Failure]()
			var opts []stream.StageOption
			switch policy {
			case "skip":
				opts = append(opts, stream.Skip())
			case "deadletter":
				opts = append(opts, stream.DeadLetter(dlq))
			}
			s, err := relayBig(t, lg, &store, out, func(s *stream.Stream[log.Record]) *stream.Stream[log.Record] {
				return s.Tap(out.CheckSize, append(opts, stream.Name("too-large"))...)
			})
			if policy == "stop" {
				require.ErrorIs(t, err, sink.ErrRecordTooLarge)
				var re *stream.RecordError
				require.ErrorAs(t, err, &re)
				assert.Equal(t, "too-large", re.Stage)
				assert.Contains(t, err.Error(), "in/0 offset 1")
				// The record before it may have been sent: a stage slow
				// on a batch (10 to 20 ms, as under load) hands on what it
				// finished. Nothing after it is.
				assert.NotContains(t, values(kc.Records(t, "out")), "after", "nothing after the record too large was sent")
				pos, found := savedPosition(t, &store)
				assert.False(t, found && pos > 1, "the position %d passed the record too large", pos)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []string{"before", "after"}, values(kc.Records(t, "out")))
			pos, found := savedPosition(t, &store)
			require.True(t, found)
			assert.Equal(t, int64(3), pos, "the position passes the record too large")
			var st stream.StageStats
			for _, x := range s.Stats() {
				if x.Name == "too-large" {
					st = x
				}
			}
			if policy == "skip" {
				assert.Equal(t, int64(1), st.Skipped)
				return
			}
			assert.Equal(t, int64(1), st.DeadLettered)
			fs := dlq.Values()
			require.Len(t, fs, 1)
			assert.Equal(t, int64(1), fs[0].Offset)
			assert.ErrorIs(t, fs[0].Err, sink.ErrRecordTooLarge)
			assert.Len(t, fs[0].Value.(log.Record).Value, bigValue)
		})
	}
}

// TestKafkaMaxRecordBytesRaisedDeliversTheLargeRecord ensures
// KafkaMaxRecordBytes raises the producer's limit (read back by
// MaxRecordBytes): the 1,000,000-byte value is delivered whole, within the
// topic's limit (kfake's message.max.bytes raised to 2 MB as a topic's
// max.message.bytes would be).
func TestKafkaMaxRecordBytesRaisedDeliversTheLargeRecord(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"),
		kafkatest.KfakeOpts(kfake.BrokerConfigs(map[string]string{"message.max.bytes": "2000000"})))
	lg := kafkaLog(t, 1, withBig())
	var store checkpoint.MemoryStore
	out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaMaxRecordBytes(2_000_000))
	require.NoError(t, err)
	defer out.Close()
	assert.Equal(t, 2_000_000, out.MaxRecordBytes())
	_, err = relayBig(t, lg, &store, out, noStage)
	require.NoError(t, err)
	got := kc.Records(t, "out")
	require.Len(t, got, 3)
	assert.Len(t, got[1].Value, bigValue)
	pos, _ := savedPosition(t, &store)
	assert.Equal(t, int64(3), pos)
}

// TestKafkaMaxRecordBytesRejectsBadValues ensures a limit out of franz-go's
// bounds, or given with KafkaClient, is an error naming it, and that a
// limit passed as a franz-go option is the one the sink checks against.
func TestKafkaMaxRecordBytesRejectsBadValues(t *testing.T) {
	for _, n := range []int{-1, 511, 1<<30 + 1} {
		_, err := sink.Kafka([]string{"x:1"}, "out", sink.KafkaMaxRecordBytes(n))
		require.ErrorContains(t, err, fmt.Sprintf("KafkaMaxRecordBytes %d", n))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers("x:1"), kgo.ProducerBatchMaxBytes(4096))
	require.NoError(t, err)
	defer cl.Close()
	_, err = sink.Kafka(nil, "out", sink.KafkaClient(cl), sink.KafkaMaxRecordBytes(8192))
	require.ErrorContains(t, err, "KafkaClient")
	s, err := sink.Kafka(nil, "out", sink.KafkaClient(cl))
	require.NoError(t, err)
	assert.Equal(t, 4096, s.MaxRecordBytes())
	s, err = sink.Kafka([]string{"x:1"}, "out", sink.KafkaMaxRecordBytes(200<<20))
	require.NoError(t, err, "above 100 MiB the broker write limit follows")
	assert.Equal(t, 200<<20, s.MaxRecordBytes())
	require.NoError(t, s.Close())
}
