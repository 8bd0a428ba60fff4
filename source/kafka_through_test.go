package source_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// topicPartitions returns how many partitions topic has.
func topicPartitions(t *testing.T, brokers []string, topic string) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	require.NoError(t, err)
	d, ok := details[topic]
	require.True(t, ok, "topic %s", topic)
	require.NoError(t, d.Err)
	return len(d.Partitions)
}

// TestThroughPutsEveryRecordOfAKeyInOnePartitionAndCarriesTimestamps
// ensures that a KafkaSource's Through writes to GROUP-NAME-repartition,
// created with as many partitions as the source's topic, places every
// record of a key in the partition Kafka's partitioner picks for it (a nil
// key as the empty key, in one partition too), keeps each record's
// timestamp, and reads the records back, as ThroughRecords with their
// event times, as a member of the source's own group: a position saved to
// its source is the group's commit of the repartition topic.
func TestThroughPutsEveryRecordOfAKeyInOnePartitionAndCarriesTimestamps(t *testing.T) {
	brokers := startKafka(t, 3, "in")
	src := newKafkaSource(t, brokers, "logins", []string{"in"})
	via, err := src.Through("by-ip")
	require.NoError(t, err)
	require.Equal(t, "logins-by-ip-repartition", via.Topic())

	const base = int64(1_765_350_000_000)
	var recs []stream.ThroughRecord
	for i := range 60 {
		recs = append(recs, stream.ThroughRecord{Key: []byte("10.0.0." + strconv.Itoa(i%10)), Value: []byte(strconv.Itoa(i)), Timestamp: base + int64(i)*1000})
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, via.Sink().Write(ctx, recs[:30]))
	require.NoError(t, via.Sink().Write(ctx, recs[30:]))
	// Records without a key, one write each: Kafka would spread them
	// (kgo's sticky partitioner picks a partition per batch).
	for i := range 6 {
		r := stream.ThroughRecord{Key: nil, Value: []byte("nil-" + strconv.Itoa(i)), Timestamp: base - 1 - int64(i)}
		require.NoError(t, via.Sink().Write(ctx, []stream.ThroughRecord{r}))
		recs = append(recs, r)
	}
	require.Equal(t, 3, topicPartitions(t, brokers, via.Topic()), "as many partitions as the source's topic")

	// Where Kafka put them: by murmur2 of the key, as any Kafka client does.
	got, err := kafkatest.ReadTopic(ctx, brokers, via.Topic())
	require.NoError(t, err)
	require.Len(t, got, len(recs))
	part := kgo.StickyKeyPartitioner(nil).ForTopic(via.Topic())
	partOf := map[string]int32{}
	for _, r := range got {
		want := int32(part.Partition(&kgo.Record{Key: append([]byte{}, r.Key...)}, 3))
		assert.Equal(t, want, r.Partition, "key %q", r.Key)
		if p, seen := partOf[string(r.Key)]; seen {
			assert.Equal(t, p, r.Partition, "key %q in two partitions", r.Key)
		}
		partOf[string(r.Key)] = r.Partition
		i, err := strconv.Atoi(string(r.Value))
		if err == nil {
			assert.Equal(t, recs[i].Timestamp, r.Timestamp.UnixMilli(), "record %d", i)
		}
	}
	assert.Len(t, partOf, 11, "ten keys and the empty one, each in one partition")

	// Read back as ThroughRecords.
	back := via.Source()
	byValue := map[string]stream.Element[stream.ThroughRecord]{}
	for len(byValue) < len(recs) {
		elems, err := back.Read(ctx)
		require.NoError(t, err)
		for _, e := range elems {
			byValue[string(e.Value.Value)] = e
		}
	}
	for _, r := range recs {
		e := byValue[string(r.Value)]
		assert.Equal(t, via.Topic(), e.Topic)
		assert.Equal(t, r.Timestamp, e.Value.Timestamp, "value %s", r.Value)
		assert.Equal(t, r.Timestamp, e.Timestamp, "the element's event time, value %s", r.Value)
		assert.Equal(t, string(r.Key), string(e.Value.Key))
		assert.Equal(t, partOf[string(r.Key)], e.Partition)
	}

	// The source commits to the source's group.
	store, ok := back.(checkpoint.Store)
	require.True(t, ok, "the Through's source is the checkpoint.Store of its positions")
	p := partOf["10.0.0.3"]
	require.NoError(t, store.Save(ctx, via.Topic(), p, checkpoint.Position{Offset: 2, Epoch: checkpoint.NoEpoch}))
	assert.Equal(t, int64(2), committed(t, brokers, "logins", via.Topic())[p], "committed in the group logins")
	_, changelog := back.(checkpoint.ChangelogStore)
	assert.False(t, changelog, "the state after a Repartition is saved to the pipeline's own changelog store")
	require.NoError(t, back.Close())
}

// TestThroughPartitionsOptionMakesTheTopicAndAnExistingTopicIsKept ensures
// ThroughPartitions sets the partition count of a repartition topic
// created when the source opens, and that a Through over a topic that exists
// uses it as it is, whatever its options say.
func TestThroughPartitionsOptionMakesTheTopicAndAnExistingTopicIsKept(t *testing.T) {
	brokers := startKafka(t, 2, "in")
	src := newKafkaSource(t, brokers, "g", []string{"in"})
	via, err := src.Through("five", source.ThroughPartitions(5))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	resumer, ok := via.Source().(stream.Resumer)
	require.True(t, ok)
	require.NoError(t, resumer.Resume(ctx, checkpoint.NewMemoryStore()), "Resume makes the topic, as the first Read does")
	require.Equal(t, 5, topicPartitions(t, brokers, "g-five-repartition"))
	require.NoError(t, via.Source().Close())

	again, err := src.Through("five")
	require.NoError(t, err)
	wctx, wcancel := context.WithTimeout(context.Background(), kafkaWait)
	defer wcancel()
	require.NoError(t, again.Sink().Write(wctx, []stream.ThroughRecord{{Key: []byte("k"), Value: []byte("v"), Timestamp: 1}}))
	require.NoError(t, again.Close())
	assert.Equal(t, 5, topicPartitions(t, brokers, "g-five-repartition"), "the existing topic, not one of 2 partitions")

	_, err = src.Through("")
	require.ErrorContains(t, err, "empty name")
	_, err = src.Through("no/slash")
	require.ErrorIs(t, err, log.ErrInvalidTopic)
}

// TestThroughUnderRepartitionCountsEveryKeyOnOneProcess ensures a
// pipeline over a Kafka topic keyed by record number, its words counted
// through stream.Repartition over a KafkaThrough (a second member of the
// same group reading the repartition topic), reaches every word's total,
// and commits both topics' positions to the group.
func TestThroughUnderRepartitionCountsEveryKeyOnOneProcess(t *testing.T) {
	brokers := startKafka(t, 3, "in")
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon"}
	want := map[string]int64{}
	var recs []*kgo.Record
	for i := range 200 {
		w := words[(i*i)%len(words)]
		want[w]++
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: []byte(w)})
	}
	produce(t, brokers, recs)

	src := newKafkaSource(t, brokers, "wc", []string{"in"})
	via, err := src.Through("words")
	require.NoError(t, err)
	var mu sync.Mutex
	counts := map[string]int64{}
	done := make(chan struct{})
	in := stream.MapTo(stream.From(src), func(_ context.Context, r log.Record) (string, error) { return string(r.Value), nil })
	total := stream.Aggregate(stream.Repartition(in, func(w string) string { return w }, via), stream.Count[string]())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := runAsync(ctx, total.To(sink.Func(func(_ context.Context, kvs []stream.KV[string, int64]) error {
		mu.Lock()
		defer mu.Unlock()
		for _, kv := range kvs {
			counts[kv.Key] = max(counts[kv.Key], kv.Value)
		}
		if fmt.Sprint(counts) == fmt.Sprint(want) {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return nil
	})).Checkpointing(src).Checkpointing(checkpoint.NewMemoryStore()))
	select {
	case <-done:
	case err := <-run:
		t.Fatalf("Run ended before the counts were reached: %v", err)
	case <-time.After(kafkaWait):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("counts %v, want %v", counts, want)
	}
	eventually(t, "both topics committed to their ends", func() bool {
		in, err1 := fetchCommitted(brokers, "wc", "in")
		back, err2 := fetchCommitted(brokers, "wc", via.Topic())
		var sumIn, sumBack int64
		for _, o := range in {
			sumIn += o
		}
		for _, o := range back {
			sumBack += o
		}
		return err1 == nil && err2 == nil && sumIn == 200 && sumBack == 200
	})
	cancel()
	require.NoError(t, waitRun(t, run))
}
