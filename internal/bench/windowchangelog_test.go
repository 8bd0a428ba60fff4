package bench

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/stream"
)

// groupEventSource is eventSource as a consumer-group member that owns its
// one partition: an Assignable source, so a Window keeps its state per
// partition and saves it as changes (issue 18).
type groupEventSource struct {
	*eventSource
	hooks    stream.RebalanceHooks
	assigned bool
}

func (s *groupEventSource) SetRebalanceHooks(h stream.RebalanceHooks) { s.hooks = h }

func (s *groupEventSource) Read(ctx context.Context) ([]stream.Element[log.Record], error) {
	if !s.assigned {
		s.assigned = true
		starts := []stream.PartitionStart{{TopicPartition: stream.TopicPartition{Topic: "mem", Partition: 0}, Offset: -1}}
		if err := s.hooks.Assigned(ctx, starts); err != nil {
			return nil, err
		}
	}
	return s.eventSource.Read(ctx)
}

// changeCounter counts what a pipeline saves to a ChangelogStore.
type changeCounter struct {
	*checkpoint.MemoryStore
	changes, bytes, saves atomic.Int64
}

func (c *changeCounter) SaveChanges(ctx context.Context, changes []checkpoint.Change) error {
	c.saves.Add(1)
	c.changes.Add(int64(len(changes)))
	for _, ch := range changes {
		c.bytes.Add(int64(len(ch.Key) + len(ch.Value)))
	}
	return c.MemoryStore.SaveChanges(ctx, changes)
}

// BenchmarkWindowChangelog is issue 18's checkpoint cost with a changelog:
// the window of BenchmarkWindow (1,000 keys, tumbling 1 minute, a record
// per millisecond) on a consumer-group source, whose state is saved per
// partition as the keys changed since the last save, to a MemoryStore's
// changelog (what it costs strom, not the broker: the Kafka store's own
// cost is in BenchmarkChangelogSave). Reported: ns per record, the extra
// ns per record against the same window on a one-table source without a
// store (save-ns/record), the changes saved per checkpoint and the bytes per
// changed key (a key's encoding plus its open windows).
func BenchmarkWindowChangelog(b *testing.B) {
	for _, c := range []struct {
		name string
		opts []stream.CheckpointOption
	}{
		{"default", nil},
		{"each-batch", []stream.CheckpointOption{stream.CheckpointEachBatch()}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cc := &changeCounter{MemoryStore: checkpoint.NewMemoryStore()}
			var results int
			var sum int64
			with := timed(b, nil, func() (err error) {
				results, sum, err = groupWindow(&groupEventSource{eventSource: newEventSource(int64(b.N))}, cc, c.opts...)
				return err
			})
			checkWindows(b, int64(b.N), results, sum)
			start := time.Now()
			// The baseline is the same window on a source whose partitions
			// do not move, without a store: one table, nothing tracked. A
			// group's pipeline must have a changelog (Run refuses it
			// otherwise), so save-ns/record is the whole cost of keeping
			// the state per partition and saving it as changes.
			r, s, err := stromWindow(newEventSource(int64(b.N)), nil)
			if err != nil {
				b.Fatal(err)
			}
			checkWindows(b, int64(b.N), r, s)
			without := time.Since(start)
			b.ReportMetric(float64(with-without)/float64(b.N), "save-ns/record")
			if n := cc.saves.Load(); n > 0 {
				b.ReportMetric(float64(cc.changes.Load())/float64(n), "changes/save")
			}
			if n := cc.changes.Load() - cc.saves.Load(); n > 0 { // less one meta change per save
				b.ReportMetric(float64(cc.bytes.Load())/float64(cc.changes.Load()), "B/changed-key")
			}
		})
	}
}

// groupWindow is stromWindow on a consumer-group source: the key (the
// record's) follows its one partition.
func groupWindow(src stream.Source[log.Record], store checkpoint.Store, opts ...stream.CheckpointOption) (results int, sum int64, err error) {
	k := stream.KeyBy(stream.From(src), recordKey).FollowsPartitioning()
	out := stream.Window(k, stream.Tumbling(windowSize), stream.Count[log.Record]()).
		To(sink.Func(func(_ context.Context, rs []stream.WindowResult[int, int64]) error {
			results += len(rs)
			for i := range rs {
				sum += rs[i].Value
			}
			return nil
		}))
	if store != nil {
		out = out.Checkpointing(store, opts...)
	}
	err = out.Run(context.Background())
	return results, sum, err
}
