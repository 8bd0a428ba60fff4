package kafkatest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/internal/kafkaread"
)

// Committed returns every record the topic holds now as a reader of
// committed records only sees it (read_committed: no record of an
// aborted or open transaction), up to each partition's last stable
// offset when it starts, ordered by partition, then offset; it fails t if
// the topic cannot be read within 30 s. A test of an exactly-once
// pipeline counts its output with it.
func (c *Cluster) Committed(t testing.TB, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := ReadCommitted(ctx, c.Brokers(), topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ReadCommitted is [Cluster.Committed] against any cluster: every
// committed record topic holds now on brokers, ordered by partition, then
// offset. For a topic no transactional producer writes it returns what
// [ReadTopic] returns. A topic that does not exist is an error.
func ReadCommitted(ctx context.Context, brokers []string, topic string) ([]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var recs []*kgo.Record
	found, err := kafkaread.Committed(ctx, cl, topic, func(r *kgo.Record) error {
		recs = append(recs, r)
		return nil
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("kafkatest: reading %s (read_committed): %w", topic, err)
	case !found:
		return nil, fmt.Errorf("kafkatest: topic %s not found", topic)
	}
	slices.SortStableFunc(recs, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return recs, nil
}
