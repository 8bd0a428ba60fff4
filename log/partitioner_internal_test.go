package log

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartitionTableMatchesKafkaHasher ensures a table of keys (ASCII,
// non-ASCII, empty, and keys whose murmur2 has the sign bit set, which Kafka
// masks rather than negates) lands where franz-go's Kafka hasher puts them
// for several partition counts, and prints the table.
func TestPartitionTableMatchesKafkaHasher(t *testing.T) {
	keys := []string{"", "a", "user-17", "order-9001", "héllo", "日本語", "ключ", "🙂"}
	signBit := 0
	for i := 0; signBit < 3; i++ {
		k := fmt.Sprintf("sign-%d", i)
		if murmur2([]byte(k))&0x80000000 != 0 {
			keys = append(keys, k)
			signBit++
		}
	}
	counts := []int32{1, 2, 3, 6, 10, 64}
	hasher := kgo.StickyKeyPartitioner(kgo.KafkaHasher(murmur2ForKgo)).ForTopic("t")
	var table strings.Builder
	fmt.Fprintf(&table, "%-12s %10s", "key", "murmur2")
	for _, n := range counts {
		fmt.Fprintf(&table, " n=%-3d", n)
	}
	table.WriteString("\n")
	for _, k := range keys {
		fmt.Fprintf(&table, "%-12q 0x%08x", k, murmur2([]byte(k)))
		for _, n := range counts {
			want := hasher.Partition(&kgo.Record{Key: []byte(k)}, int(n))
			got := KafkaPartition([]byte(k), n)
			require.EqualValues(t, want, got, "key %q, %d partitions", k, n)
			fmt.Fprintf(&table, " %-5d", got)
		}
		table.WriteString("\n")
	}
	t.Logf("partition of each key, checked against franz-go's KafkaHasher:\n%s", table.String())
	assert.Equal(t, 3, signBit)
}

// murmur2ForKgo feeds franz-go's KafkaHasher our murmur2: the test above
// then checks that the masking and modulo agree; TestKafkaPartitionMatchesFranzGo
// checks the hash itself against franz-go's own default.
func murmur2ForKgo(b []byte) uint32 { return murmur2(b) }

// TestMurmur2MatchesFranzGoDefault ensures our murmur2 equals franz-go's
// (the default StickyKeyPartitioner hash) on the positive bits for keys
// with the sign bit set, where a sign error would show.
func TestMurmur2MatchesFranzGoDefault(t *testing.T) {
	def := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range 5000 {
		k := []byte(fmt.Sprintf("k-%d-é", i))
		require.EqualValues(t, (murmur2(k)&0x7fffffff)%(1<<31-1), def.Partition(&kgo.Record{Key: k}, 1<<31-1), "key %q", k)
	}
}
