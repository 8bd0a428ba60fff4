package bench

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/strom-dev/strom/kafkatest"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// moveKeys is the state BenchmarkPartitionMove moves: the issue's
// 1,000,000 keys.
const moveKeys = 1_000_000

// moveSource is one partition of a consumer group as a test gives it: an
// Assignable source that is assigned moves/0 at its first Read, starting
// at from, and returns the records [from, to), keyed "key-<offset mod
// keys>", in batches of 4,096, then io.EOF. assigned is when it called
// Assigned.
type moveSource struct {
	hooks      stream.RebalanceHooks
	from, to   int64
	keys       int64
	next       int64
	started    bool
	assignedAt time.Time
	buf        []stream.Element[log.Record]
}

func (s *moveSource) SetRebalanceHooks(h stream.RebalanceHooks) { s.hooks = h }
func (s *moveSource) Close() error                              { return nil }

func (s *moveSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if !s.started {
		s.started, s.next = true, s.from
		s.assignedAt = time.Now()
		starts := []stream.PartitionStart{{TopicPartition: stream.TopicPartition{Topic: "moves", Partition: 0}, Offset: s.from}}
		if err := s.hooks.Assigned(ctx, starts); err != nil {
			return nil, err
		}
	}
	if s.next >= s.to {
		return nil, io.EOF
	}
	s.buf = s.buf[:0]
	for ; s.next < s.to && len(s.buf) < 4096; s.next++ {
		r := log.Record{Key: fmt.Appendf(nil, "key-%d", s.next%s.keys), Value: []byte("v"), Topic: "moves", Offset: s.next, Timestamp: eventBase + s.next}
		s.buf = append(s.buf, stream.Element[log.Record]{Value: r, Topic: "moves", Partition: 0, Offset: s.next, Epoch: -1, Timestamp: r.Timestamp})
	}
	return s.buf, nil
}

// countKeys runs the per-key count of src, checkpointing to the Kafka
// source store (its changelog), and calls first at the first result.
func countKeys(src stream.Source[log.Record], store *source.KafkaSource, first func()) error {
	seen := false
	k := stream.KeyBy(stream.From(src), func(r log.Record) string { return string(r.Key) }).FollowsPartitioning()
	return stream.Aggregate(k, stream.Count[log.Record]()).
		Tap(func(context.Context, stream.KV[string, int64]) error {
			if !seen {
				seen = true
				first()
			}
			return nil
		}).
		Checkpointing(store).
		Run(context.Background())
}

// BenchmarkPartitionMove is issue 18's restore: a partition whose
// Aggregate holds 1,000,000 keys moves to another member; one op is the
// time from the assignment (the Assigned hook called) to the first record
// of the partition applied (its result out of the stage), the restore of
// the state from the changelog (on an in-process kfake) included, without
// and with the new owner's local snapshot cache (warmed by an earlier
// assignment of the same partition to it, as when a partition comes back).
// move-s is the op; goal-x the op over the goal (1 s + 0.3 s per
// GiB of state; the state here is about 40 MiB: below 1 meets it).
func BenchmarkPartitionMove(b *testing.B) {
	kc, err := kafkatest.Start(kafkatest.Topics("moves"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	store := func(b *testing.B, dir string) *source.KafkaSource {
		var opts []source.KafkaOption
		if dir != "" {
			opts = append(opts, source.KafkaStateDir(dir))
		}
		s, err := source.Kafka(kc.Brokers(), "move", []string{"moves"}, opts...)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}
	// The first owner counts moveKeys records, one per key, and saves
	// its state to the changelog.
	if err := countKeys(&moveSource{from: 0, to: moveKeys, keys: moveKeys}, store(b, ""), func() {}); err != nil {
		b.Fatal(err)
	}
	next := int64(moveKeys)
	move := func(b *testing.B, st *source.KafkaSource) time.Duration {
		src := &moveSource{from: next, to: next + 1, keys: moveKeys}
		next++
		var applied time.Time
		if err := countKeys(src, st, func() { applied = time.Now() }); err != nil {
			b.Fatal(err)
		}
		if applied.IsZero() {
			b.Fatal("no record applied after the move")
		}
		return applied.Sub(src.assignedAt)
	}
	for _, c := range []struct {
		name  string
		cache bool
	}{{"nocache", false}, {"cache", true}} {
		b.Run(c.name, func(b *testing.B) {
			dir := ""
			if c.cache {
				dir = b.TempDir()
			}
			st := store(b, dir)
			if c.cache {
				move(b, st) // the partition was here before: its cache is written
			}
			var total time.Duration
			for range b.N {
				total += move(b, st)
			}
			per := total / time.Duration(b.N)
			b.ReportMetric(per.Seconds(), "move-s")
			b.ReportMetric(per.Seconds()/(1+0.3*40.0/1024), "goal-x")
		})
	}
}
