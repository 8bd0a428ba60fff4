package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/internal/loghub"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// kafkaLog opens a log in a temporary folder with topic "in" of n
// partitions holding recs.
func kafkaLog(t *testing.T, partitions int, recs []log.Record) *log.Log {
	t.Helper()
	lg, err := log.Open(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { lg.Close() })
	tp, err := lg.CreateTopic("in", partitions)
	require.NoError(t, err)
	require.NoError(t, tp.AppendBatch(context.Background(), recs))
	return lg
}

// tenValues is v0..v9 without keys.
func tenValues() []log.Record {
	recs := make([]log.Record, 10)
	for i := range recs {
		recs[i] = log.Record{Value: fmt.Appendf(nil, "v%d", i)}
	}
	return recs
}

func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

func savedPosition(t *testing.T, store checkpoint.Store) (int64, bool) {
	t.Helper()
	pos, found, err := store.Load(context.Background(), "in", 0)
	require.NoError(t, err)
	return pos.Offset, found
}

// relayOnce runs log partition "in"/0 -> out from store's position to the
// end of the partition.
func relayOnce(lg *log.Log, store checkpoint.Store, out *sink.KafkaSink) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := source.Partition(lg, "in", 0, source.FromStore(store), source.Replay())
	return stream.From(src).To(out).Checkpointing(store).Run(ctx)
}

// TestKafkaPositionFollowsTheAcknowledgement proves a relay log -> Kafka
// with a 1 s linger returns from Run only once Kafka acknowledged every
// record: the topic holds v0..v9 in order, read before the sink is closed
// (so nothing but the pipeline flushed it), and the saved position is 10.
func TestKafkaPositionFollowsTheAcknowledgement(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	lg := kafkaLog(t, 1, tenValues())
	out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaClientOpts(kgo.ProducerLinger(time.Second)))
	require.NoError(t, err)
	defer out.Close()
	var store checkpoint.MemoryStore

	require.NoError(t, relayOnce(lg, &store, out))

	assert.Equal(t, []string{"v0", "v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9"}, values(kc.Records(t, "out")))
	pos, found := savedPosition(t, &store)
	require.True(t, found)
	assert.Equal(t, int64(10), pos)
}

// failProduceOf makes kc answer the first produce request carrying value
// with INVALID_RECORD, a non-retriable error (franz-go fails the record and
// those buffered after it in the partition); later requests are served.
func failProduceOf(kc *kafkatest.Cluster, value string) {
	kc.Kfake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		preq := req.(*kmsg.ProduceRequest)
		hit := false
		for _, tp := range preq.Topics {
			for _, p := range tp.Partitions {
				hit = hit || bytes.Contains(p.Records, []byte(value))
			}
		}
		if !hit {
			return nil, nil, false // served as usual; the control stays
		}
		resp := preq.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range preq.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.InvalidRecord.Code
				rp.BaseOffset = -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true // handled: the control is dropped, so this happens once
	})
}

// TestKafkaRejectedRecordStopsBeforeItAndIsProducedAgainOnRestart proves
// a record Kafka rejects is never passed by the saved position: Kafka
// answers the produce of v6 with a non-retriable error once; Run returns a
// RecordError naming offset 6 and a ProduceError naming the Kafka topic
// and partition and the record's source; the position is at most 6; a
// restart from the same store produces the rest, so the topic holds v0..v9
// at least once each, each run's records in order, with no gap before the
// rejected record.
//
// Each produce request carries one record (kgo.MaxBufferedRecords(1)) so
// the rejected request holds v6 alone, and no record is buffered behind it
// when it fails: the failure cancels the stage's context before franz-go
// takes the next record, which is then withdrawn unsent.
func TestKafkaRejectedRecordStopsBeforeItAndIsProducedAgainOnRestart(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	lg := kafkaLog(t, 1, tenValues())
	store, err := checkpoint.NewFileStore(t.TempDir())
	require.NoError(t, err)
	failProduceOf(kc, "v6")
	newSink := func() *sink.KafkaSink {
		out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaClientOpts(
			kgo.MaxBufferedRecords(1), kgo.ProducerBatchCompression(kgo.NoCompression())))
		require.NoError(t, err)
		return out
	}

	out := newSink()
	err = relayOnce(lg, store, out)
	require.NoError(t, out.Close())
	require.Error(t, err)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "in", re.Topic)
	assert.Equal(t, int32(0), re.Partition)
	assert.Equal(t, int64(6), re.Offset)
	var pe *sink.ProduceError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "out", pe.Topic)
	assert.Equal(t, int32(0), pe.Partition)
	assert.Equal(t, int64(6), pe.SourceOffset)
	assert.ErrorIs(t, err, kerr.InvalidRecord)
	assert.Contains(t, err.Error(), "sink: kafka topic out partition 0: record from in/0 offset 6: INVALID_RECORD")
	pos, found := savedPosition(t, store)
	if found {
		assert.LessOrEqual(t, pos, int64(6), "the saved position never passes the rejected record")
	}
	first := values(kc.Records(t, "out"))

	out = newSink()
	require.NoError(t, relayOnce(lg, store, out))
	require.NoError(t, out.Close())
	pos, found = savedPosition(t, store)
	require.True(t, found)
	assert.Equal(t, int64(10), pos)

	got := values(kc.Records(t, "out"))
	require.GreaterOrEqual(t, len(got), len(first))
	assert.Equal(t, first, got[:len(first)], "the first run's records stay first")
	// v0..v5 in order, never v6. A record after v6 may follow: with one
	// record buffered (MaxBufferedRecords(1)), v7 can take the slot v6's
	// failure frees before the failure cancels the stage (seen with two
	// CPU hogs running); with a larger buffer franz-go fails it with v6.
	require.GreaterOrEqual(t, len(first), 6)
	requireRun(t, first[:6], 0, "the first run")
	assert.NotContains(t, first, "v6", "the rejected record is not in Kafka")
	second := got[len(first):]
	require.NotEmpty(t, second)
	var from int
	_, err = fmt.Sscanf(second[0], "v%d", &from)
	require.NoError(t, err)
	assert.LessOrEqual(t, from, len(first), "the restart begins at or before the first record not in Kafka: no gap")
	requireRun(t, second, from, "the restart")
	assert.Equal(t, "v9", second[len(second)-1])
}

// requireRun checks vs is v<from>, v<from+1>, ... in order, without gaps.
func requireRun(t *testing.T, vs []string, from int, what string) {
	t.Helper()
	for i, v := range vs {
		require.Equal(t, fmt.Sprintf("v%d", from+i), v, "%s: record %d of %v", what, i, vs)
	}
}

// TestKafkaKeysSurviveTheCrossing proves log -> Kafka keeps keys: the
// Loghub samples, keyed as the demo keys them, published into a
// 3-partition log topic and relayed with source.Topic into a 3-partition
// Kafka topic, land in Kafka with their keys, byte for byte, and every
// keyed record in the same partition number as in the log (murmur2 on both
// sides); records without a key (lines with no match) arrive too, wherever
// the sticky partitioner put them.
func TestKafkaKeysSurviveTheCrossing(t *testing.T) {
	dir := loghub.Dir(t)
	samples := []struct{ file, key string }{ // as internal/e2e's loghubFiles
		{"OpenSSH_2k.log", `(\d+\.\d+\.\d+\.\d+)`},
		{"Apache_2k.log", `^\[[^]]*\] \[(\w+)\]`},
		{"HDFS_2k.log", `(blk_-?[0-9]+)`},
		{"Linux_2k.log", `^\w+ +\d+ [\d:]+ \S+ ([^\[:(]+)`},
		{"Zookeeper_2k.log", `:([\w$]+)@\d+\]`},
	}
	var recs []log.Record
	for _, s := range samples {
		key := regexp.MustCompile(s.key)
		f, err := os.Open(filepath.Join(dir, s.file))
		require.NoError(t, err)
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := bytes.Clone(sc.Bytes())
			r := log.Record{Value: line}
			if m := key.FindSubmatch(line); m != nil {
				r.Key = bytes.Clone(m[1])
			}
			recs = append(recs, r)
		}
		require.NoError(t, sc.Err())
		require.NoError(t, f.Close())
	}
	require.Len(t, recs, 10_000)
	lg := kafkaLog(t, 3, recs)
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"), kafkatest.Partitions(3))
	out, err := sink.Kafka(kc.Brokers(), "out")
	require.NoError(t, err)
	defer out.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var store checkpoint.MemoryStore
	require.NoError(t, stream.From(source.Topic(lg, "in", source.FromStore(&store), source.Replay())).
		To(out).Checkpointing(&store).Run(ctx))

	// What the log holds, per value: key and partition (values repeat, so
	// a multiset of (value, key, partition)).
	type placed struct {
		value, key string
		keyed      bool
		partition  int32
	}
	want := map[placed]int{}
	tp, err := lg.Topic("in")
	require.NoError(t, err)
	for id := range int32(3) {
		p, err := tp.Partition(id)
		require.NoError(t, err)
		for off := int64(0); off < p.HighWatermark(); {
			got, err := p.Read(off, 1<<20)
			require.NoError(t, err)
			for _, r := range got {
				pl := placed{value: string(r.Value), key: string(r.Key), keyed: r.Key != nil, partition: r.Partition}
				if !pl.keyed {
					pl.partition = -1
				}
				want[pl]++
			}
			off += int64(len(got))
		}
	}
	got := map[placed]int{}
	kr := kc.Records(t, "out")
	require.Len(t, kr, len(recs), "every record, once (the run did not fail)")
	for _, r := range kr {
		pl := placed{value: string(r.Value), key: string(r.Key), keyed: r.Key != nil, partition: r.Partition}
		if !pl.keyed {
			pl.partition = -1
		} else {
			require.Equal(t, log.KafkaPartition(r.Key, 3), r.Partition, "key %q", r.Key)
		}
		got[pl]++
	}
	assert.Equal(t, want, got)
	keyed := 0
	for pl, n := range got {
		if pl.keyed {
			keyed += n
		}
	}
	assert.Greater(t, keyed, 9000, "most lines have a key")
}

// TestKafkaUnreachableBrokerNamesTheAddress proves a broker nobody answers
// on fails the write within the delivery timeout, with an error naming the
// address and the record's source.
func TestKafkaUnreachableBrokerNamesTheAddress(t *testing.T) {
	out, err := sink.Kafka([]string{"127.0.0.1:1"}, "out", sink.KafkaDeliveryTimeout(time.Second))
	require.NoError(t, err)
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // far above the 1 s asked for
	defer cancel()
	err = out.Write(ctx, []log.Record{{Value: []byte("x"), Topic: "in", Partition: 2, Offset: 41}})
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the delivery timeout, not the test's, ended the write")
	var pe *sink.ProduceError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, int32(-1), pe.Partition)
	assert.ErrorIs(t, err, kgo.ErrRecordTimeout)
	assert.Contains(t, err.Error(), "127.0.0.1:1")
	assert.Contains(t, err.Error(), "record from in/2 offset 41")
}

// TestKafkaMissingTopicNamesTheTopic proves a topic that does not exist
// (auto-creation off, as kfake's default) fails the write with an error
// naming the topic and wrapping UNKNOWN_TOPIC_OR_PARTITION, and a pipeline
// saves no position past it.
func TestKafkaMissingTopicNamesTheTopic(t *testing.T) {
	kc := kafkatest.NewCluster(t)
	out, err := sink.Kafka(kc.Brokers(), "absent", sink.KafkaDeliveryTimeout(10*time.Second))
	require.NoError(t, err)
	defer out.Close()
	lg := kafkaLog(t, 1, tenValues())
	var store checkpoint.MemoryStore

	err = relayOnce(lg, &store, out)
	require.Error(t, err)
	assert.ErrorIs(t, err, kerr.UnknownTopicOrPartition)
	assert.Contains(t, err.Error(), "sink: kafka topic absent")
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	pos, found := savedPosition(t, &store)
	assert.False(t, found && pos > 0, "no position saved past a record not produced (saved %d)", pos)
}

// TestKafkaWriteLetsTheCallerReuseTheSlice proves WriteAsync keeps nothing
// of the recs slice (the caller overwrites its records on return, as To
// does with its buffer) while it sends from the records' bytes, and that
// key, value, timestamp and headers are carried, nil and empty keys
// distinct.
func TestKafkaWriteLetsTheCallerReuseTheSlice(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaClientOpts(kgo.ProducerLinger(200*time.Millisecond)))
	require.NoError(t, err)
	defer out.Close()
	recs := []log.Record{
		{Key: []byte("k1"), Value: []byte("value"), Timestamp: 1_700_000_000_123, Headers: []log.Header{{Key: "h", Value: []byte("hv")}}},
		{Key: []byte{}, Value: []byte("empty key")},
		{Value: []byte("nil key")},
	}
	done := make(chan error, 1)
	require.NoError(t, out.WriteAsync(context.Background(), recs, func(_ int, err error) { done <- err }))
	// The caller reuses its slice at once: what reaches Kafka must be what
	// was written, not these.
	for i := range recs {
		recs[i] = log.Record{Key: []byte("other"), Value: []byte("other")}
	}
	require.NoError(t, <-done)

	got := kc.Records(t, "out")
	require.Len(t, got, 3)
	assert.Equal(t, "k1", string(got[0].Key))
	assert.Equal(t, "value", string(got[0].Value))
	assert.Equal(t, time.UnixMilli(1_700_000_000_123), got[0].Timestamp)
	require.Len(t, got[0].Headers, 1)
	assert.Equal(t, "h", got[0].Headers[0].Key)
	assert.Equal(t, "hv", string(got[0].Headers[0].Value))
	assert.NotNil(t, got[1].Key)
	assert.Empty(t, got[1].Key)
	assert.Nil(t, got[2].Key)
}

// TestKafkaClosedSinkRefusesWrites proves a write after Close fails with
// ErrSinkClosed instead of producing with a closed client.
func TestKafkaClosedSinkRefusesWrites(t *testing.T) {
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	out, err := sink.Kafka(kc.Brokers(), "out")
	require.NoError(t, err)
	require.NoError(t, out.Close())
	err = out.Write(context.Background(), []log.Record{{Value: []byte("x")}})
	assert.True(t, errors.Is(err, sink.ErrSinkClosed), "%v", err)
}

// TestKafkaTooLargeRecordGoesThroughDeadLetterAndSkip proves a produce
// error goes through the stage's failure policy on a real producer: a
// record larger than the producer's batch limit (the sink refuses it, as
// franz-go would, with sink.ErrRecordTooLarge and MESSAGE_TOO_LARGE) is,
// under DeadLetter, written to the dead-letter sink with the rest of its
// batch and the position passes it; under Skip it is
// counted as skipped; either way the records of the other batches reach
// Kafka in order and the saved position is the end.
func TestKafkaTooLargeRecordGoesThroughDeadLetterAndSkip(t *testing.T) {
	recs := tenValues()
	recs[5].Value = bytes.Repeat([]byte("x"), 4<<10)
	for _, policy := range []string{"deadletter", "skip"} {
		t.Run(policy, func(t *testing.T) {
			kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
			lg := kafkaLog(t, 1, recs)
			store, err := checkpoint.NewFileStore(t.TempDir())
			require.NoError(t, err)
			out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaClientOpts(kgo.ProducerBatchMaxBytes(2<<10)))
			require.NoError(t, err)
			defer out.Close()
			dlq := streamtest.Collect[stream.Failure]()
			opt := stream.DeadLetter(dlq)
			if policy == "skip" {
				opt = stream.Skip()
			}
			// Batches of about 3 records: v5's batch fails, the others not.
			src := source.Partition(lg, "in", 0, source.Earliest, source.Replay(), source.MaxBytes(150))
			s := stream.From(src).To(out, opt).Checkpointing(store)
			require.NoError(t, s.Run(context.Background()))

			pos, found := savedPosition(t, store)
			require.True(t, found)
			assert.Equal(t, int64(10), pos, "the failed batch was handled by the policy, so the position passes it")
			got := values(kc.Records(t, "out"))
			assert.NotContains(t, got, string(recs[5].Value))
			assert.Subset(t, got, []string{"v0", "v9"})
			for i := 1; i < len(got); i++ {
				assert.Less(t, got[i-1], got[i], "in order")
			}
			if policy == "skip" {
				assert.Positive(t, s.Stats()[0].Skipped)
				assert.Empty(t, dlq.Values())
				return
			}
			var dead []int64
			for _, f := range dlq.Values() {
				dead = append(dead, f.Offset)
				assert.Equal(t, f.Offset, f.Value.(log.Record).Offset, "a dead letter carries its record")
				if f.Offset == 5 {
					assert.ErrorIs(t, f.Err, kerr.MessageTooLarge)
					assert.ErrorIs(t, f.Err, sink.ErrRecordTooLarge)
				}
			}
			assert.Contains(t, dead, int64(5), "the too-large record is dead-lettered")
			assert.Equal(t, int64(len(dead)), s.Stats()[0].DeadLettered)
		})
	}
}
