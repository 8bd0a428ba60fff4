package sink_test

import (
	"context"
	"errors"
	"fmt"
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

// txnSink returns a sink producing to topic "out" of kc with the
// transactional id id, closed when the test ends.
func txnSink(t *testing.T, kc *kafkatest.Cluster, id string) *sink.KafkaSink {
	t.Helper()
	out, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaTransactionalID(id))
	require.NoError(t, err)
	t.Cleanup(func() { out.Close() })
	return out
}

// records returns n keyless records with values prefix0..prefix(n-1).
func records(prefix string, n int) []log.Record {
	recs := make([]log.Record, n)
	for i := range recs {
		recs[i] = log.Record{Value: fmt.Appendf(nil, "%s%d", prefix, i)}
	}
	return recs
}

// positionsSeen returns the positions a read_committed reader sees in the
// positions topic of id, by key, the last record of a key winning.
func positionsSeen(t *testing.T, kc *kafkatest.Cluster, id string) map[string]int {
	t.Helper()
	m := map[string]int{}
	for _, r := range kc.Committed(t, sink.KafkaPositionsTopic(id)) {
		m[string(r.Key)] = len(r.Value)
	}
	return m
}

func pos(offset int64) checkpoint.Position { return checkpoint.Position{Offset: offset, Epoch: 2} }

// TestKafkaTransactionCommitShowsRecordsAndPositionsTogether ensures a
// commit makes the records and the positions visible to read_committed
// readers together, and not before: while the transaction is open a
// read_committed reader sees neither, after it both, and Load (of this
// sink, and of another with the id that has not begun) returns the
// committed position.
func TestKafkaTransactionCommitShowsRecordsAndPositionsTogether(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	ctx := context.Background()
	out := txnSink(t, kc, "relay-a")
	require.NoError(t, out.BeginTransactions(ctx))
	_, found, err := out.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.False(t, found, "no position was ever committed")

	require.NoError(t, out.Write(ctx, records("v", 5)))
	assert.Len(t, kc.Records(t, "out"), 5, "a read_uncommitted reader sees the records of the open transaction")
	assert.Empty(t, kc.Committed(t, "out"), "the transaction is open: a read_committed reader sees none of its records")
	assert.Empty(t, positionsSeen(t, kc, "relay-a"))

	committed, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(5)}}, true)
	require.NoError(t, err)
	require.True(t, committed)
	assert.Equal(t, []string{"v0", "v1", "v2", "v3", "v4"}, values(kc.Committed(t, "out")))
	assert.Equal(t, map[string]int{"in/0": 13}, positionsSeen(t, kc, "relay-a"))

	got, found, err := out.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, pos(5), got)

	monitor := txnSink(t, kc, "relay-a") // has not begun: reads the topic, fences nobody
	got, found, err = monitor.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, pos(5), got)

	// The next transaction is open: the sink goes on.
	require.NoError(t, out.Write(ctx, records("w", 1)))
	committed, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(6)}}, true)
	require.NoError(t, err)
	require.True(t, committed)
	assert.Len(t, kc.Committed(t, "out"), 6)
	got, _, err = monitor.Load(ctx, "in", 0)
	require.NoError(t, err)
	assert.Equal(t, pos(6), got, "the last position of a key wins")
}

// TestKafkaTransactionAbortShowsNothing ensures an abort makes neither the
// records (of the sink and of a second sink that joined its transactions)
// nor the positions visible to read_committed readers, that Load keeps
// the committed position, and that the sink begins no transaction until
// the next BeginTransactions: a late write fails rather than joining one.
func TestKafkaTransactionAbortShowsNothing(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out", "dlq"))
	ctx := context.Background()
	out := txnSink(t, kc, "relay-b")
	require.NoError(t, out.BeginTransactions(ctx))
	dlq, err := sink.Kafka(kc.Brokers(), "dlq")
	require.NoError(t, err)
	defer dlq.Close()
	require.NoError(t, dlq.JoinTransaction(out), "a second KafkaSink joins the transactional sink's transactions")

	require.NoError(t, out.Write(ctx, records("v", 3)))
	committed, err := out.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(3)}}, true)
	require.NoError(t, err)
	require.True(t, committed)

	require.NoError(t, out.Write(ctx, records("x", 4)))
	require.NoError(t, dlq.Write(ctx, records("d", 2)))
	committed, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(7)}}, false)
	require.NoError(t, err)
	require.False(t, committed)

	assert.Equal(t, []string{"v0", "v1", "v2"}, values(kc.Committed(t, "out")), "nothing of the aborted transaction is visible")
	assert.Empty(t, kc.Committed(t, "dlq"), "nor what the joined sink wrote in it")
	ends, err := kadm.NewClient(kc.Client(t)).ListEndOffsets(ctx, "out")
	require.NoError(t, err)
	end, _ := ends.Lookup("out", 0)
	assert.GreaterOrEqual(t, end.Offset, int64(3+4), "the aborted records were produced: the partition holds them")
	got, _, err := out.Load(ctx, "in", 0)
	require.NoError(t, err)
	assert.Equal(t, pos(3), got, "Load keeps the committed position")
	got, _, err = txnSink(t, kc, "relay-b").Load(ctx, "in", 0)
	require.NoError(t, err)
	assert.Equal(t, pos(3), got, "the positions topic holds the committed position for read_committed readers")

	_, err = out.EndTransaction(ctx, nil, true)
	require.ErrorIs(t, err, sink.ErrNoTransaction, "an abort ends the transactions until the next BeginTransactions")
	require.Error(t, out.Write(ctx, records("late", 1)), "a write outside a transaction fails")

	require.NoError(t, out.BeginTransactions(ctx))
	require.NoError(t, out.Write(ctx, records("y", 1)))
	committed, err = out.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(4)}}, true)
	require.NoError(t, err)
	require.True(t, committed)
	assert.Equal(t, []string{"v0", "v1", "v2", "y0"}, values(kc.Committed(t, "out")))
}

// TestKafkaSecondSinkWithTheSameIDFencesTheFirst ensures a sink that
// begins its transactions with the transactional id of a running one
// fences it: the first's open transaction is aborted, its commit fails
// with ErrFenced (and so does everything after), nothing of it becomes
// visible, and the second starts from the last committed position.
func TestKafkaSecondSinkWithTheSameIDFencesTheFirst(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	ctx := context.Background()
	first := txnSink(t, kc, "relay-c")
	require.NoError(t, first.BeginTransactions(ctx))
	require.NoError(t, first.Write(ctx, records("v", 2)))
	_, err := first.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(2)}}, true)
	require.NoError(t, err)
	require.NoError(t, first.Write(ctx, records("zombie", 3)))

	second := txnSink(t, kc, "relay-c")
	require.NoError(t, second.BeginTransactions(ctx))
	got, found, err := second.Load(ctx, "in", 0)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, pos(2), got, "the second starts from the committed position")

	committed, err := first.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(5)}}, true)
	require.ErrorIs(t, err, sink.ErrFenced, "the fenced sink cannot commit")
	require.False(t, committed)
	require.ErrorIs(t, first.BeginTransactions(ctx), sink.ErrFenced, "a fenced sink stays fenced")
	assert.Equal(t, []string{"v0", "v1"}, values(kc.Committed(t, "out")), "nothing of the fenced transaction is visible")
	got, _, err = second.Load(ctx, "in", 0)
	require.NoError(t, err)
	assert.Equal(t, pos(2), got)

	require.NoError(t, second.Write(ctx, records("w", 1)))
	committed, err = second.EndTransaction(ctx, []checkpoint.TopicPosition{{Topic: "in", Partition: 0, Position: pos(3)}}, true)
	require.NoError(t, err)
	require.True(t, committed)
	assert.Equal(t, []string{"v0", "v1", "w0"}, values(kc.Committed(t, "out")))
}

// relayExactlyOnce runs log topic "in" -> out under ExactlyOnce, from the
// positions out keeps, until every partition is replayed to its end.
func relayExactlyOnce(lg *log.Log, out *sink.KafkaSink, fail func(log.Record) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src := source.Topic(lg, "in", source.FromStore(out), source.Replay())
	return stream.From(src, stream.ExactlyOnce(stream.TransactionInterval(10*time.Millisecond))).
		Map(func(_ context.Context, r log.Record) (log.Record, error) {
			if fail != nil {
				return r, fail(r)
			}
			return r, nil
		}).
		To(out).
		Checkpointing(out).
		Run(ctx)
}

// TestKafkaExactlyOnceRunAfterAFailureWritesEachRecordOnce ensures a log ->
// Kafka pipeline under ExactlyOnce whose stage fails mid-way leaves only
// committed transactions visible, and that the next Run, from the
// committed positions, completes the topic with every record exactly once
// for read_committed readers, in order per key: a first Run relays 300
// records, 300 more are appended, a second Run fails at the 451st
// (having produced records past the last commit, which are aborted), a
// third completes.
func TestKafkaExactlyOnceRunAfterAFailureWritesEachRecordOnce(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	recs := make([]log.Record, 600)
	for i := range recs {
		recs[i] = log.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d", i)}
	}
	lg := kafkaLog(t, 3, recs[:300])
	out := txnSink(t, kc, "relay-d")
	require.NoError(t, relayExactlyOnce(lg, out, nil))
	require.Len(t, kc.Committed(t, "out"), 300)

	in, err := lg.Topic("in")
	require.NoError(t, err)
	require.NoError(t, in.AppendBatch(context.Background(), recs[300:]))
	boom := errors.New("boom")
	err = relayExactlyOnce(lg, out, func(r log.Record) error {
		if string(r.Value) == "v450" {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, err, boom)
	before := len(kc.Committed(t, "out"))
	require.GreaterOrEqual(t, before, 300)
	require.Less(t, before, 600, "the failed Run did not commit v450")

	require.NoError(t, relayExactlyOnce(lg, out, nil))
	got := kc.Committed(t, "out")
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for _, r := range recs {
		assert.Equal(t, 1, seen[string(r.Value)], "record %s", r.Value)
	}
	assert.Len(t, got, len(recs), "each record once")
	last := map[string]int{}
	for _, r := range got { // per key, the log's order (a key is in one partition on both sides)
		var n int
		_, err := fmt.Sscanf(string(r.Value), "v%d", &n)
		require.NoError(t, err)
		require.Greater(t, n+1, last[string(r.Key)], "key %s out of order at %s", r.Key, r.Value)
		last[string(r.Key)] = n + 1
	}
	for p := range int32(3) {
		part, err := in.Partition(p)
		require.NoError(t, err)
		position, found, err := out.Load(context.Background(), "in", p)
		require.NoError(t, err)
		require.True(t, found)
		assert.Equal(t, part.HighWatermark(), position.Offset, "partition %d", p)
	}
}

// TestKafkaTransactionalSinkRefusesWhatItCannotDo ensures the misuses of
// a transactional sink fail with errors that say why: with KafkaClient, an
// id whose positions topic name is illegal, Save outside a transaction, a
// plain sink as an ExactlyOnce pipeline's store, joining another
// transactor.
func TestKafkaTransactionalSinkRefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	ctx := context.Background()

	_, err := sink.Kafka(nil, "out", sink.KafkaTransactionalID("x"), sink.KafkaClient(kc.Client(t)))
	require.ErrorContains(t, err, "KafkaClient")
	_, err = sink.Kafka(kc.Brokers(), "out", sink.KafkaTransactionalID("no spaces"))
	require.ErrorContains(t, err, "positions topic is not a legal topic name")

	out := txnSink(t, kc, "relay-e")
	require.ErrorIs(t, out.Save(ctx, "in", 0, pos(1)), sink.ErrNoTransaction)
	require.ErrorContains(t, out.JoinTransaction(txnSink(t, kc, "relay-f")), "runs its own transactions")
	require.NoError(t, out.JoinTransaction(out))

	plain, err := sink.Kafka(kc.Brokers(), "out")
	require.NoError(t, err)
	defer plain.Close()
	lg := kafkaLog(t, 1, tenValues())
	err = stream.From(source.Topic(lg, "in", source.FromStore(plain), source.Replay()), stream.ExactlyOnce()).
		To(plain).Checkpointing(plain).Run(ctx)
	require.ErrorIs(t, err, sink.ErrNoTransaction)
	assert.Empty(t, kc.Records(t, "out"))
}

// TestKafkaCorruptPositionIsAnError ensures a position record that does
// not decode makes Load and BeginTransactions fail with
// checkpoint.ErrCorrupt naming the record, never read as "no position".
func TestKafkaCorruptPositionIsAnError(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("out"))
	ctx := context.Background()
	kc.CreateTopic(t, sink.KafkaPositionsTopic("relay-g"), 1)
	cl := kc.Client(t)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: sink.KafkaPositionsTopic("relay-g"), Key: []byte("in/0"), Value: []byte{9, 1, 2}}).FirstErr())

	out := txnSink(t, kc, "relay-g")
	_, _, err := out.Load(ctx, "in", 0)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "format version 9")
	require.ErrorIs(t, out.BeginTransactions(ctx), checkpoint.ErrCorrupt)
}

// TestKafkaTransactionTimeoutReachesTheClient ensures the transactional
// client gets the default transaction timeout, 10 s, or the one
// KafkaTransactionTimeout gives, and a plain sink no transactional id.
func TestKafkaTransactionTimeoutReachesTheClient(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t)
	out := txnSink(t, kc, "relay-h")
	assert.Equal(t, sink.DefaultKafkaTransactionTimeout, out.Client().OptValue(kgo.TransactionTimeout))
	assert.Equal(t, "relay-h", out.Client().OptValue(kgo.TransactionalID))
	out2, err := sink.Kafka(kc.Brokers(), "out", sink.KafkaTransactionalID("relay-i"), sink.KafkaTransactionTimeout(3*time.Second))
	require.NoError(t, err)
	defer out2.Close()
	assert.Equal(t, 3*time.Second, out2.Client().OptValue(kgo.TransactionTimeout))
	plain, err := sink.Kafka(kc.Brokers(), "out")
	require.NoError(t, err)
	defer plain.Close()
	assert.Nil(t, plain.TransactionClient())
}
