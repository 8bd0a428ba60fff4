package torture

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// TestExactlyOnceRewindBehindAnOpenTransactionCommitsNoResultTwice
// ensures an exactly-once window commits each result once when its
// changelog's last stable offset is held back by another producer's open
// transaction (scenario eos-kafka, seed 6055: a member stuck in its JoinGroup for
// 11 s, expelled, with a transaction open on the changelog, until the
// transaction timeout aborted it). The pipeline commits windows while the
// other transaction stays open, so its changes are committed past the last
// stable offset, then one of its transactions aborts (a TxnOffsetCommit
// answered ILLEGAL_GENERATION): the rewind restores the state read with
// read_committed, which ends at the last stable offset, older than the
// group's commit. Fails while the rewind then starts the partition where
// that older state stands, below the group's commit: the records between
// are counted again and the windows they close are committed a second
// time.
func TestExactlyOnceRewindBehindAnOpenTransactionCommitsNoResultTwice(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(1), kafkatest.Topics("in", "out"),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	brokers := kc.Brokers()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := kc.Client(t, kgo.DefaultProduceTopic("in"))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	// One key, one record every 20 s: a window closes every 3 records.
	produce := func(k int) {
		var recs []*kgo.Record
		for range k {
			recs = append(recs, &kgo.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: base.Add(time.Duration(n) * 20 * time.Second)})
			n++
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	src, err := source.Kafka(brokers, "g", []string{"in"}, source.KafkaTransactionalID("t1"),
		source.KafkaClientOpts(kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond)))
	require.NoError(t, err)
	out, err := sink.Kafka(brokers, "out")
	require.NoError(t, err)
	defer out.Close()
	k := stream.KeyBy(stream.From(src, stream.ExactlyOnce()), func(r log.Record) string { return string(r.Key) }).FollowsPartitioning()
	w := stream.Window(k, stream.Tumbling(time.Minute), stream.Count[log.Record]())
	p := stream.MapTo(w, func(_ context.Context, r stream.WindowResult[string, int64]) (log.Record, error) {
		return log.Record{Key: fmt.Appendf(nil, "%s@%d", r.Key, r.Start.UnixMilli()), Value: binary.BigEndian.AppendUint64(nil, uint64(r.Value))}, nil
	}).To(out).Checkpointing(src)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	committed := func() int64 {
		c, err := fetchCommitted(ctx, cl, "g", "in")
		require.NoError(t, err)
		return c
	}

	produce(10)
	require.Eventually(t, func() bool { return committed() == 10 }, 30*time.Second, 20*time.Millisecond, "the first 10 records committed")
	// Another producer's transaction, left open, on the window's changelog
	// (as a stuck member's would be): the changelog's last stable offset
	// stays below everything written after it.
	zombie := kc.Client(t, kgo.TransactionalID("zombie"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, zombie.BeginTransaction())
	require.NoError(t, zombie.ProduceSync(ctx, &kgo.Record{Topic: "g-window-changelog", Partition: 0, Key: []byte("zombie"), Value: []byte("x")}).FirstErr())
	produce(10)
	require.Eventually(t, func() bool { return committed() == 20 }, 30*time.Second, 20*time.Millisecond, "records 10 to 20 committed past the open transaction")
	// The next transaction aborts.
	kc.Kfake().ControlKey(int16(kmsg.TxnOffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.TxnOffsetCommitRequest)
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range r.Topics {
			respT := kmsg.NewTxnOffsetCommitResponseTopic()
			respT.Topic, respT.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				respP := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				respP.Partition, respP.ErrorCode = rp.Partition, kerr.IllegalGeneration.Code
				respT.Partitions = append(respT.Partitions, respP)
			}
			resp.Topics = append(resp.Topics, respT)
		}
		return resp, nil, true
	})
	produce(10)
	require.Eventually(t, func() bool { return src.Stats().Aborts == 1 }, 30*time.Second, 20*time.Millisecond, "the transaction aborted")
	require.Eventually(t, func() bool { return committed() == 30 }, 30*time.Second, 20*time.Millisecond, "records 20 to 30 committed after the abort")
	stop()
	require.NoError(t, <-done)
	// The zombie's transaction ends (the transaction timeout would abort
	// it); then every window's result must be in the output once.
	require.NoError(t, zombie.EndTransaction(ctx, kgo.TryAbort))
	recs, err := readCommitted(ctx, cl, "out")
	require.NoError(t, err)
	got := map[string]int{}
	for _, r := range recs {
		got[string(r.Key)]++
	}
	for key, times := range got {
		require.Equal(t, 1, times, "window %s committed %d times (results: %d)", key, times, len(recs))
	}
	require.Len(t, got, 9, "windows closed by records 0 to 29 (one a minute, 3 records each, the last one open)")
}

// fetchCommitted sums the group's commits of topic.
func fetchCommitted(ctx context.Context, cl *kgo.Client, group, topic string) (int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		if err == kerr.GroupIDNotFound {
			return 0, nil
		}
		return 0, err
	}
	var sum int64
	for _, t := range resp.Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Offset > 0 {
				sum += p.Offset
			}
		}
	}
	return sum, nil
}
