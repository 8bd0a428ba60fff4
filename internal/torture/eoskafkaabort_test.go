package torture_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
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

// TestExactlyOnceCommitsAgainAfterAnAbortedTransaction ensures an
// exactly-once pipeline goes on after one aborted transaction (scenario
// eos-kafka, seed 1, cut down to one process): a window count from Kafka to
// Kafka commits 100 records, the TxnOffsetCommit of the next transaction
// is answered ILLEGAL_GENERATION (franz-go's session aborts, the source
// rewinds to the committed offsets), and the 100 records produced then
// must be committed too. Fails while the source's Read goes on polling
// across the transaction's end: the records it polls after the rewind
// belong to the abort generation the pipeline read before the Read
// began, so the pipeline drops them as read before the rewind, and the
// client, already past them, never reads them again: the partition's
// position stays at the gap and nothing is committed any more.
func TestExactlyOnceCommitsAgainAfterAnAbortedTransaction(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Partitions(2), kafkatest.Topics("in", "out"),
		kafkatest.KfakeOpts(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	brokers := kc.Brokers()
	cl := kc.Client(t, kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)), kgo.DefaultProduceTopic("in"))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	produce := func(k int) {
		var recs []*kgo.Record
		for range k {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "k%d", n%6), Value: []byte("v"), Timestamp: base.Add(time.Duration(n) * time.Second)})
			n++
		}
		require.NoError(t, cl.ProduceSync(context.Background(), recs...).FirstErr())
	}
	committed := func() int64 {
		offs, err := kadm.NewClient(cl).FetchOffsets(context.Background(), "g")
		if errors.Is(err, kerr.GroupIDNotFound) {
			return 0
		}
		require.NoError(t, err)
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum
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
		return log.Record{Key: []byte(r.Key), Value: fmt.Appendf(nil, "%d %d", r.Start.UnixMilli(), r.Value)}, nil
	}).To(out).Checkpointing(src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	produce(100)
	require.Eventually(t, func() bool { return committed() == 100 }, 30*time.Second, 20*time.Millisecond, "the first 100 records committed")
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
	produce(100)
	require.Eventually(t, func() bool { return src.Stats().Aborts == 1 }, 30*time.Second, 20*time.Millisecond, "the transaction aborted")
	require.Eventually(t, func() bool { return committed() == 200 }, 30*time.Second, 20*time.Millisecond,
		"the records produced with the abort committed after it")
	cancel()
	require.NoError(t, <-done)
}
