package stream_test

import (
	"context"
	"hash/fnv"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
)

// memThrough is a Through over in-memory partitions: its sink places a
// record by a hash of its key, its source is a consumer-group member that
// owns every partition and ends once it has read want records.
type memThrough struct {
	mu    sync.Mutex
	cond  *sync.Cond
	parts [][]stream.ThroughRecord
	want  int
	hooks stream.RebalanceHooks
}

func newMemThrough(parts, want int) *memThrough {
	m := &memThrough{parts: make([][]stream.ThroughRecord, parts), want: want}
	m.cond = sync.NewCond(&m.mu)
	return m
}

func (m *memThrough) Sink() stream.Sink[stream.ThroughRecord]     { return (*memThroughSink)(m) }
func (m *memThrough) Source() stream.Source[stream.ThroughRecord] { return &memThroughSource{m: m} }

type memThroughSink memThrough

func (s *memThroughSink) Write(_ context.Context, recs []stream.ThroughRecord) error {
	m := (*memThrough)(s)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range recs {
		h := fnv.New32a()
		h.Write(r.Key)
		p := int(h.Sum32() % uint32(len(m.parts)))
		m.parts[p] = append(m.parts[p], r)
	}
	m.cond.Broadcast()
	return nil
}

type memThroughSource struct {
	m     *memThrough
	hooks stream.RebalanceHooks
	next  []int64
	read  int
}

func (s *memThroughSource) SetRebalanceHooks(h stream.RebalanceHooks) { s.hooks = h }
func (s *memThroughSource) Close() error                              { return nil }

func (s *memThroughSource) Read(ctx context.Context) ([]stream.Element[stream.ThroughRecord], error) {
	m := s.m
	stop := context.AfterFunc(ctx, func() { m.mu.Lock(); m.cond.Broadcast(); m.mu.Unlock() })
	defer stop()
	if s.next == nil {
		starts := make([]stream.PartitionStart, len(m.parts))
		for p := range m.parts {
			starts[p] = stream.PartitionStart{TopicPartition: stream.TopicPartition{Topic: "through", Partition: int32(p)}, Offset: -1}
		}
		if err := s.hooks.Assigned(ctx, starts); err != nil {
			return nil, err
		}
		s.next = make([]int64, len(m.parts))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for {
		if s.read >= m.want {
			return nil, io.EOF
		}
		var out []stream.Element[stream.ThroughRecord]
		for p := range m.parts {
			for ; s.next[p] < int64(len(m.parts[p])); s.next[p]++ {
				r := m.parts[p][s.next[p]]
				out = append(out, stream.Element[stream.ThroughRecord]{Value: r, Topic: "through", Partition: int32(p), Offset: s.next[p], Timestamp: r.Timestamp})
			}
		}
		if len(out) > 0 {
			s.read += len(out)
			return out, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		m.cond.Wait()
	}
}

// TestRepartitionCountsAKeyWhoseRecordsArriveOnSeveralPartitionsExactly
// ensures that a windowed count keyed by something that does not follow the
// source's partitioning (every key on both partitions), refused with KeyBy,
// is exact through Repartition, with keyedEvent times carried over.
func TestRepartitionCountsAKeyWhoseRecordsArriveOnSeveralPartitionsExactly(t *testing.T) {
	data := groupData(2, 300, 10)
	// Spread every key over both partitions: swap the keys of every
	// other record between the partitions.
	for i := 0; i < len(data[0])-1; i += 2 {
		data[0][i].key, data[1][i].key = data[1][i].key, data[0][i].key
	}
	store := checkpoint.NewMemoryStore()
	g := &groupSource{topic: "events", parts: data, store: store, batch: 20, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0, 1) }}}
	via := newMemThrough(3, len(data[0])+len(data[1]))
	log := &resultLog{got: make(map[string][]int64)}
	events := stream.MapTo(stream.From[groupRec](g).Checkpointing(store), func(_ context.Context, r groupRec) (keyedEvent, error) {
		return keyedEvent{Key: r.key, TS: r.ts}, nil
	})
	k := stream.Repartition(events, func(e keyedEvent) string { return e.Key }, via)
	// A partition of the Through interleaves the batches of both source
	// partitions (20 records, 20 s of event time, each): the
	// out-of-orderness must cover that.
	err := stream.Window(k, stream.Tumbling(10*time.Second), stream.Count[keyedEvent](), stream.OutOfOrderness(45*time.Second)).
		Tap(func(_ context.Context, r stream.WindowResult[string, int64]) error { log.add(r); return nil }).
		Run(context.Background())
	require.NoError(t, err)
	checkCounts(t, expectedCounts(data), log)
	n := 0
	for _, p := range via.parts {
		require.NotEmpty(t, p, "the keys are spread over the Through's partitions")
		n += len(p)
	}
	require.Equal(t, len(data[0])+len(data[1]), n, "every record went through once")
	changes := 0
	for p := range int32(3) {
		require.NoError(t, store.RestoreChanges(context.Background(), stream.StageWindow, "through", p, func(key, value []byte) error { changes++; return nil }))
	}
	require.Positive(t, changes, "the window's state is saved per partition of the Through")
}

// keyedEvent is what the repartition test sends through: exported fields, so
// that gob encodes it.
type keyedEvent struct {
	Key string
	TS  int64
}

func TestRepartitionOfAValueGobCannotSaveWholeIsRefusedByRun(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 5, 2), store: checkpoint.NewMemoryStore(), batch: 5, next: map[int32]int64{}}
	k := stream.Repartition(stream.From[groupRec](g), func(r groupRec) string { return r.key }, newMemThrough(1, 5))
	err := stream.Aggregate(k, stream.Count[groupRec]()).Run(context.Background())
	require.ErrorIs(t, err, stream.ErrUnsavableState)
	require.ErrorContains(t, err, "groupRec")
}
