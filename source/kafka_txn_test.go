package source_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// windowCounts is the pipeline the exactly-once tests run: records of in,
// counted per key in tumbling windows of a minute of their timestamps,
// each result written to out as key "k@windowStartMillis", value the count.
func windowCounts(src *source.KafkaSource, out *sink.KafkaSink, opts ...stream.Option) *stream.Stream[log.Record] {
	k := stream.KeyBy(stream.From(src, opts...), func(r log.Record) string { return string(r.Key) }).FollowsPartitioning()
	w := stream.Window(k, stream.Tumbling(time.Minute), stream.Count[log.Record]())
	return stream.MapTo(w, func(_ context.Context, r stream.WindowResult[string, int64]) (log.Record, error) {
		return log.Record{Key: fmt.Appendf(nil, "%s@%d", r.Key, r.Start.UnixMilli()), Value: binary.BigEndian.AppendUint64(nil, uint64(r.Value))}, nil
	}).To(out).Checkpointing(src)
}

// readCommitted reads every committed record of topic (read_committed,
// up to the last stable offset) and returns the values by key, in order.
// It fetches with raw requests, as a restore does: a consumer does not say
// where it stands when the last offsets are transaction markers.
func readCommitted(t *testing.T, brokers []string, topic string) map[string][]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	require.NoError(t, err)
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	require.NoError(t, err)
	id := details[topic].ID
	got := map[string][]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		for off := int64(0); off < o.Offset; {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel, req.SessionEpoch = -1, 100, 1<<20, 1, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, id
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LogStartOffset = o.Partition, off, 1<<20, -1, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Len(t, resp.Topics, 1)
			require.Len(t, resp.Topics[0].Partitions, 1)
			fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Offset: off, Topic: topic, Partition: o.Partition,
				IsolationLevel: kgo.ReadCommitted()}, &resp.Topics[0].Partitions[0], kgo.DefaultDecompressor(), nil)
			require.NoError(t, fp.Err)
			for _, r := range fp.Records {
				if r.Offset < o.Offset {
					got[string(r.Key)] = append(got[string(r.Key)], int64(binary.BigEndian.Uint64(r.Value)))
				}
			}
			require.Greater(t, next, off, "%s/%d: no progress at offset %d", topic, o.Partition, off)
			off = next
		}
	})
	return got
}

// keyedRecords returns n records over keys k0..k(keys-1), one a second of
// event time from base, to partition (key hash) of topic, then one record
// per key a window later that closes every window before it.
func keyedRecords(topic string, n, keys int, base time.Time) []*kgo.Record {
	var recs []*kgo.Record
	for i := range n {
		k := fmt.Sprintf("k%d", i%keys)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: fmt.Appendf(nil, "v%d", i),
			Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	return recs
}

// expectedCounts is what windowCounts makes of recs: per output key, the
// count, once.
func expectedCounts(recs []*kgo.Record) map[string]int64 {
	want := map[string]int64{}
	for _, r := range recs {
		start := r.Timestamp.Truncate(time.Minute).UnixMilli()
		want[fmt.Sprintf("%s@%d", r.Key, start)]++
	}
	return want
}

func produceKeyed(t *testing.T, brokers []string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func TestKafkaExactlyOnceWindowResultsCommittedOnceWithTheGroupOffsets(t *testing.T) {
	brokers := startKafka(t, 2, "in", "out")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := keyedRecords("in", 300, 6, base)
	produceKeyed(t, brokers, recs)
	// Closers: one record per key a window past the last.
	var closers []*kgo.Record
	for k := range 6 {
		closers = append(closers, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", k), Value: []byte("close"),
			Timestamp: base.Add(time.Hour)})
	}
	produceKeyed(t, brokers, closers)
	want := expectedCounts(recs)

	src := newKafkaSource(t, brokers, "eos", []string{"in"}, source.KafkaTransactionalID("eos-test-1"))
	out, err := sink.Kafka(brokers, "out")
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, windowCounts(src, out, stream.ExactlyOnce()))
	eventually(t, "every window committed", func() bool {
		c, err := fetchCommitted(brokers, "eos", "in")
		return err == nil && c[0]+c[1] == int64(len(recs)+len(closers))
	})
	cancel()
	require.NoError(t, waitRun(t, done))

	got := readCommitted(t, brokers, "out")
	for key, n := range want {
		require.Equal(t, []int64{n}, got[key], "window %s", key)
	}
	require.Len(t, got, len(want), "no result beyond the closed windows")
	st := src.Stats()
	require.Positive(t, st.Transactions)
}

// startKafkaCluster is startKafka returning the cluster, for faults.
func startKafkaCluster(t *testing.T, partitions int32, topics ...string) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// windowInput produces the records windowCounts counts, and closers a
// window past them, and returns the results it must write, and how many
// records it reads.
func windowInput(t *testing.T, brokers []string, n, keys int) (want map[string]int64, total int64) {
	t.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := keyedRecords("in", n, keys, base)
	produceKeyed(t, brokers, recs)
	var closers []*kgo.Record
	for k := range keys {
		closers = append(closers, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", k), Value: []byte("close"),
			Timestamp: base.Add(time.Hour)})
	}
	produceKeyed(t, brokers, closers)
	return expectedCounts(recs), int64(len(recs) + len(closers))
}

// requireExactlyOnce checks that out holds each wanted result once, and
// nothing else.
func requireExactlyOnce(t *testing.T, brokers []string, want map[string]int64) {
	t.Helper()
	got := readCommitted(t, brokers, "out")
	for key, n := range want {
		require.Equal(t, []int64{n}, got[key], "window %s", key)
	}
	require.Len(t, got, len(want), "no result beyond the closed windows")
}

func TestKafkaExactlyOnceAnAbortedCommitRewindsStateAndPositionsAndWritesEachResultOnce(t *testing.T) {
	c, brokers := startKafkaCluster(t, 2, "in", "out")
	want, total := windowInput(t, brokers, 300, 6)
	// The first two transactional offset commits fail with an error
	// franz-go aborts on: their transactions hold outputs and state
	// changes that must vanish, and the pipeline must count again from
	// the committed (empty) state.
	var failed atomic.Int64
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Load() >= 2 {
			return nil, nil, false
		}
		c.KeepControl()
		failed.Add(1)
		req := kr.(*kmsg.TxnOffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.UnknownServerError.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	src := newKafkaSource(t, brokers, "eos", []string{"in"}, source.KafkaTransactionalID("eos-abort"))
	out, err := sink.Kafka(brokers, "out")
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, windowCounts(src, out, stream.ExactlyOnce()))
	eventually(t, "every window committed", func() bool {
		c, err := fetchCommitted(brokers, "eos", "in")
		return err == nil && c[0]+c[1] == total
	})
	cancel()
	require.NoError(t, waitRun(t, done))
	require.EqualValues(t, 2, failed.Load())
	require.GreaterOrEqual(t, src.Stats().Aborts, int64(2))
	requireExactlyOnce(t, brokers, want)
}

func TestKafkaExactlyOnceRestartAfterAnAbandonedRunWritesEachResultOnce(t *testing.T) {
	_, brokers := startKafkaCluster(t, 2, "in", "out")
	want, total := windowInput(t, brokers, 300, 6)
	out, err := sink.Kafka(brokers, "out")
	require.NoError(t, err)
	t.Cleanup(func() { _ = out.Close() })

	// First run: a stage stops at the 150th record and Run is cancelled
	// with it blocked (no drain): its transaction must abort whole.
	src := newKafkaSource(t, brokers, "eos", []string{"in"}, source.KafkaTransactionalID("eos-restart"))
	var seen atomic.Int64
	reached := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	k := stream.KeyBy(stream.From(src, stream.ExactlyOnce()).Map(func(ctx context.Context, r log.Record) (log.Record, error) {
		if seen.Add(1) == 150 {
			close(reached)
			<-ctx.Done()
			return r, ctx.Err()
		}
		return r, nil
	}), func(r log.Record) string { return string(r.Key) }).FollowsPartitioning()
	w := stream.Window(k, stream.Tumbling(time.Minute), stream.Count[log.Record]())
	p := stream.MapTo(w, func(_ context.Context, r stream.WindowResult[string, int64]) (log.Record, error) {
		return log.Record{Key: fmt.Appendf(nil, "%s@%d", r.Key, r.Start.UnixMilli()), Value: binary.BigEndian.AppendUint64(nil, uint64(r.Value))}, nil
	}).To(out).Checkpointing(src)
	done := runAsync(ctx, p)
	<-reached
	cancel()
	require.NoError(t, waitRun(t, done))

	// Second run, same transactional id: it resumes from what the first
	// committed, and the output holds every result once.
	src2 := newKafkaSource(t, brokers, "eos", []string{"in"}, source.KafkaTransactionalID("eos-restart"))
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	done2 := runAsync(ctx2, windowCounts(src2, out, stream.ExactlyOnce()))
	eventually(t, "every window committed", func() bool {
		c, err := fetchCommitted(brokers, "eos", "in")
		return err == nil && c[0]+c[1] == total
	})
	cancel2()
	require.NoError(t, waitRun(t, done2))
	requireExactlyOnce(t, brokers, want)
}

func TestKafkaExactlyOnceRevokeMidTransactionWithParallelInFlightWritesEachRecordOnce(t *testing.T) {
	_, brokers := startKafkaCluster(t, 4, "in", "out")
	const n = 2000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i%50), Value: fmt.Appendf(nil, "%d", i)}
	}
	produceKeyed(t, brokers, recs[:n/2])

	// Each record becomes one output keyed by its input value; Parallel(8)
	// finishes them out of order, and the first member holds records in
	// flight while a second member joins and takes partitions from it.
	hold := make(chan struct{})
	var held atomic.Int64
	pipeline := func(src *source.KafkaSource, first bool) *stream.Stream[log.Record] {
		out, err := sink.Kafka(brokers, "out")
		require.NoError(t, err)
		t.Cleanup(func() { _ = out.Close() })
		return stream.From(src, stream.ExactlyOnce()).Map(func(ctx context.Context, r log.Record) (log.Record, error) {
			if first && r.Offset%7 == 3 && held.Add(1) <= 8 {
				select {
				case <-hold:
				case <-ctx.Done():
					return r, ctx.Err()
				}
			}
			return log.Record{Key: r.Value, Value: binary.BigEndian.AppendUint64(nil, 1)}, nil
		}, stream.Parallel(8)).To(out).Checkpointing(src)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := newKafkaSource(t, brokers, "eos-rv", []string{"in"}, source.KafkaTransactionalID("eos-rv-a"))
	doneA := runAsync(ctx, pipeline(a, true))
	eventually(t, "records held in flight", func() bool { return held.Load() >= 8 })
	b := newKafkaSource(t, brokers, "eos-rv", []string{"in"}, source.KafkaTransactionalID("eos-rv-b"))
	doneB := runAsync(ctx, pipeline(b, false))
	eventually(t, "a revocation", func() bool { return a.Stats().Revoked > 0 })
	close(hold)
	produceKeyed(t, brokers, recs[n/2:])
	eventually(t, "every record committed", func() bool {
		c, err := fetchCommitted(brokers, "eos-rv", "in")
		return err == nil && c[0]+c[1]+c[2]+c[3] == n
	})
	cancel()
	require.NoError(t, waitRun(t, doneA))
	require.NoError(t, waitRun(t, doneB))
	require.Positive(t, a.Stats().Aborts, "the revocation aborted the transaction holding the records in flight")
	got := readCommitted(t, brokers, "out")
	for i := range n {
		require.Equal(t, []int64{1}, got[strconv.Itoa(i)], "record %d", i)
	}
	require.Len(t, got, n)
}

func TestKafkaExactlyOnceAZombieMemberIsFencedAndNothingOfItsTransactionIsVisible(t *testing.T) {
	c, brokers := startKafkaCluster(t, 2, "in", "out")
	const n = 400
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", i%20), Value: fmt.Appendf(nil, "%d", i)}
	}
	produceKeyed(t, brokers, recs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// A handles 29 records into its open transaction, then stops at the
	// 30th (a stop-the-world pause, the transaction's end waiting for it)
	// with its heartbeats held by the broker: the group expels it, and B
	// takes every partition and commits. Then A resumes: its transaction
	// must fail to commit, and nothing it produced become visible.
	release, thaw := make(chan struct{}), make(chan struct{})
	var seen atomic.Int64
	paused := make(chan struct{})
	pipeline := func(src *source.KafkaSource, zombie bool, opts ...stream.Option) *stream.Stream[log.Record] {
		out, err := sink.Kafka(brokers, "out")
		require.NoError(t, err)
		t.Cleanup(func() { _ = out.Close() })
		return stream.From(src, opts...).Map(func(ctx context.Context, r log.Record) (log.Record, error) {
			if zombie && seen.Add(1) == 30 {
				close(paused)
				select {
				case <-release:
				case <-ctx.Done():
					return r, ctx.Err()
				}
			}
			return log.Record{Key: r.Value, Value: binary.BigEndian.AppendUint64(nil, 1)}, nil
		}).To(out).Checkpointing(src)
	}
	a := newKafkaSource(t, brokers, "eos-z", []string{"in"}, source.KafkaTransactionalID("eos-z-a"),
		source.KafkaClientOpts(kgo.SessionTimeout(time.Second)))
	doneA := runAsync(ctx, pipeline(a, true, stream.ExactlyOnce(stream.TransactionInterval(200*time.Millisecond))))
	<-paused
	var frozen atomic.Pointer[string]
	c.ControlKey(int16(kmsg.Heartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.HeartbeatRequest)
		if frozen.Load() == nil {
			frozen.Store(&req.MemberID) // A's: B has not joined yet
		}
		if req.MemberID == *frozen.Load() {
			c.SleepControl(func() { <-thaw })
		}
		return nil, nil, false
	})
	b := newKafkaSource(t, brokers, "eos-z", []string{"in"}, source.KafkaTransactionalID("eos-z-b"))
	doneB := runAsync(ctx, pipeline(b, false, stream.ExactlyOnce()))
	eventually(t, "B commits every record", func() bool {
		c, err := fetchCommitted(brokers, "eos-z", "in")
		return err == nil && c[0]+c[1] == n
	})
	// A resumes before it hears of its expulsion: its transaction ends
	// with its old membership, and must not commit.
	close(release)
	close(thaw)
	eventually(t, "A's transaction aborted", func() bool { return a.Stats().Aborts > 0 })
	cancel()
	require.NoError(t, waitRun(t, doneA))
	require.NoError(t, waitRun(t, doneB))
	got := readCommitted(t, brokers, "out")
	for i := range n {
		require.Equal(t, []int64{1}, got[strconv.Itoa(i)], "record %d", i)
	}
	require.Len(t, got, n)
}
