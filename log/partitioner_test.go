package log_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
)

// TestKafkaPartitionMatchesFranzGo ensures a key lands in the partition
// franz-go's Kafka hasher (Kafka's Java default) picks, for several
// partition counts, non-ASCII keys and keys whose murmur2 has the sign bit
// set.
func TestKafkaPartitionMatchesFranzGo(t *testing.T) {
	keys := [][]byte{{}, []byte("a"), []byte("ab"), []byte("abc"), []byte("abcd"), []byte("user-17"),
		[]byte("héllo wörld"), []byte("日本語のキー"), []byte{0xff, 0xfe, 0x00, 0x80}}
	for i := range 500 {
		keys = append(keys, fmt.Appendf(nil, "key-%d", i))
	}
	for _, n := range []int32{1, 2, 3, 7, 12, 100} {
		kp := kgo.StickyKeyPartitioner(kgo.KafkaHasher(kgoMurmur2)).ForTopic("t")
		for _, k := range keys {
			want := kp.Partition(&kgo.Record{Key: k}, int(n))
			assert.EqualValues(t, want, log.KafkaPartition(k, n), "key %q n %d", k, n)
		}
	}
	// The default partitioner (nil hasher) of franz-go is the same hash.
	def := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, k := range keys {
		assert.EqualValues(t, def.Partition(&kgo.Record{Key: k}, 3), log.KafkaPartition(k, 3))
	}
}

// kgoMurmur2 recovers franz-go's murmur2 through its exported hasher: with
// a huge partition count, KafkaHasher returns the positive hash itself.
func kgoMurmur2(b []byte) uint32 {
	return uint32(kgo.StickyKeyPartitioner(nil).ForTopic("t").Partition(&kgo.Record{Key: b}, 1<<31-1))
}

// TestKafkaPartitionSignBitKey ensures keys whose murmur2 is negative as an
// int32 (Java's view) are masked, not negated, as Kafka does.
func TestKafkaPartitionSignBitKey(t *testing.T) {
	def := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	found := 0
	for i := range 2000 {
		k := fmt.Appendf(nil, "k%d", i)
		for _, n := range []int32{3, 5, 10} {
			require.EqualValues(t, def.Partition(&kgo.Record{Key: k}, int(n)), log.KafkaPartition(k, n))
		}
		found++
	}
	assert.Equal(t, 2000, found)
}

// TestRoundRobinForNilKeysAndPeekHasNoSideEffect ensures records without a
// key go 0,1,2,0,... and asking where the next would go never moves it.
func TestRoundRobinForNilKeysAndPeekHasNoSideEffect(t *testing.T) {
	lg := openLog(t, t.TempDir())
	tp, err := lg.CreateTopic("events", 3)
	require.NoError(t, err)
	var got []int32
	for range 7 {
		for range 5 {
			_ = tp.PartitionFor(nil)
		}
		want := tp.PartitionFor(nil)
		p, _, err := tp.Append(context.Background(), log.Record{Value: []byte("x")})
		require.NoError(t, err)
		require.Equal(t, want, p)
		got = append(got, p)
	}
	assert.Equal(t, []int32{0, 1, 2, 0, 1, 2, 0}, got)
	k := []byte("user-17")
	p, _, err := tp.Append(context.Background(), log.Record{Key: k})
	require.NoError(t, err)
	assert.Equal(t, log.KafkaPartition(k, 3), p)
	assert.Equal(t, p, tp.PartitionFor(k))
}

// TestKafkaPartitionTakesAnInt32CountAndPanicsBelowOne ensures
// KafkaPartition takes the partition count as an int32, as partition
// numbers are, and panics naming the count for zero and negative counts
// (zero divided by zero before; a negative count returned a partition
// outside any topic), as do KafkaPartitioner's methods.
func TestKafkaPartitionTakesAnInt32CountAndPanicsBelowOne(t *testing.T) {
	var n int32 = 3 // as cmd/strom and the sinks hold it
	p := log.KafkaPartition([]byte("user-17"), n)
	assert.True(t, p >= 0 && p < n, "partition %d of %d", p, n)
	for _, bad := range []int32{0, -1, math.MinInt32} {
		want := fmt.Sprintf("log: partition of a key among %d partitions: the count must be positive", bad)
		assert.PanicsWithValue(t, want, func() { log.KafkaPartition([]byte("k"), bad) }, "n = %d", bad)
		var kp log.KafkaPartitioner
		assert.PanicsWithValue(t, want, func() { kp.Partition([]byte("k"), int(bad)) }, "keyed, n = %d", bad)
		assert.PanicsWithValue(t, want, func() { kp.PartitionFor(nil, int(bad)) }, "round-robin, n = %d", bad)
	}
}
