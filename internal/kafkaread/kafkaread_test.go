package kafkaread_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/internal/kafkaread"
	"github.com/strom-dev/strom/kafkatest"
)

// committed returns the values Committed reads from topic.
func committed(t *testing.T, cl *kgo.Client, topic string) ([]string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var vs []string
	found, err := kafkaread.Committed(ctx, cl, topic, func(r *kgo.Record) error {
		vs = append(vs, string(r.Value))
		return nil
	})
	require.NoError(t, err)
	return vs, found
}

// TestCommittedSkipsAbortedAndEndsAtTheLastStableOffset ensures Committed
// returns the records of committed transactions, none of an aborted one,
// and ends (rather than waiting) at the last stable offset: below an open
// transaction, and after a partition whose last records are an aborted
// transaction and its marker, which no consumer is handed. A topic that
// does not exist is found false.
func TestCommittedSkipsAbortedAndEndsAtTheLastStableOffset(t *testing.T) {
	t.Parallel()
	kc := kafkatest.NewCluster(t, kafkatest.Topics("t"))
	ctx := context.Background()
	cl := kc.Client(t)
	txn := kc.Client(t, kgo.TransactionalID("w"))
	write := func(commit kgo.TransactionEndTry, vs ...string) {
		t.Helper()
		require.NoError(t, txn.BeginTransaction())
		for _, v := range vs {
			require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte(v)}).FirstErr())
		}
		require.NoError(t, txn.EndTransaction(ctx, commit))
	}
	write(kgo.TryCommit, "a", "b")
	write(kgo.TryAbort, "x", "y")
	got, found := committed(t, cl, "t")
	require.True(t, found)
	assert.Equal(t, []string{"a", "b"}, got, "the topic ends in an aborted transaction and its marker")

	write(kgo.TryCommit, "c")
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("open")}).FirstErr())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("after")}).FirstErr())
	got, _ = committed(t, cl, "t")
	assert.Equal(t, []string{"a", "b", "c"}, got, "nothing at or above the open transaction")

	require.NoError(t, txn.EndTransaction(ctx, kgo.TryCommit))
	got, _ = committed(t, cl, "t")
	assert.Equal(t, []string{"a", "b", "c", "open", "after"}, got)

	_, found = committed(t, cl, "missing")
	assert.False(t, found)
}
