package source

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/strom-dev/strom/checkpoint"
)

// TestChangelogCacheStopsAppendingOnceTheAssignmentChanges ensures the
// cache file is appended to only under the assignment its restore ran
// for: once the partition was revoked and assigned again (another member
// may have saved changes meanwhile, which the file would then claim to
// hold), saves are no longer appended, and the next restore reads them
// from Kafka.
func TestChangelogCacheStopsAppendingOnceTheAssignmentChanges(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	changes := func(from, to int) []checkpoint.Change {
		var cs []checkpoint.Change
		for i := from; i < to; i++ {
			cs = append(cs, checkpoint.Change{Stage: "s", Topic: "orders", Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
		}
		return cs
	}
	restore := func(src *KafkaSource) int {
		n := 0
		require.NoError(t, src.RestoreChanges(ctx, "s", "orders", 0, func(_, _ []byte) error { n++; return nil }))
		return n
	}
	assign := func(src *KafkaSource) {
		src.mu.Lock()
		src.assigned[topicPartition{"orders", 0}] = &kafkaPart{}
		src.mu.Unlock()
	}

	a, err := Kafka(c.ListenAddrs(), "g", []string{"orders"}, KafkaStateDir(dir))
	require.NoError(t, err)
	defer a.Close()
	assign(a)
	require.NoError(t, a.SaveChanges(ctx, changes(0, 10)))
	restore(a)
	require.NoError(t, a.SaveChanges(ctx, changes(10, 15))) // the same assignment: appended
	assign(a)                                               // revoked and assigned again
	require.NoError(t, a.SaveChanges(ctx, changes(15, 20))) // not appended
	require.NoError(t, a.Close())

	b, err := Kafka(c.ListenAddrs(), "g", []string{"orders"}, KafkaStateDir(dir))
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, 20, restore(b))
	assert.EqualValues(t, 15, b.ChangelogStats().CachedEntries)
	assert.EqualValues(t, 5, b.ChangelogStats().RestoredRecords, "the saves after the new assignment come from Kafka")
}
