package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/stream"
	"github.com/strom-dev/strom/stream/streamtest"
)

// groupSource is a fake consumer-group member over in-memory partitions:
// an Assignable, PositionsAware source whose rebalances the test schedules
// by Read count, run between Reads as kgo runs them with
// BlockRebalanceOnPoll. At a revocation it commits the pipeline's
// positions to store after the hooks returned, as source.Kafka does.
type groupSource struct {
	topic string
	parts map[int32][]groupRec
	store *checkpoint.MemoryStore
	batch int

	mu        sync.Mutex
	hooks     stream.RebalanceHooks
	pos       stream.Positions
	next      map[int32]int64 // assigned partitions and their next offset
	ops       map[int]func(*groupSource)
	reads     int
	starts    []stream.PartitionStart // what the last Assigned returned
	assignErr error
	silent    map[int32]int // a partition delivers nothing in its first this many Reads
}

type groupRec struct {
	key  string
	ts   int64
	part int32 // set by Read
	off  int64
}

func (g *groupSource) SetRebalanceHooks(h stream.RebalanceHooks) {
	g.mu.Lock()
	g.hooks = h
	g.mu.Unlock()
}
func (g *groupSource) SetPositions(p stream.Positions) { g.mu.Lock(); g.pos = p; g.mu.Unlock() }
func (g *groupSource) Close() error                    { return nil }

func (g *groupSource) assign(ps ...int32) {
	starts := make([]stream.PartitionStart, 0, len(ps))
	for _, p := range ps {
		o := int64(-1)
		if pos, ok, _ := g.store.Load(context.Background(), g.topic, p); ok {
			o = pos.Offset
		}
		starts = append(starts, stream.PartitionStart{TopicPartition: stream.TopicPartition{Topic: g.topic, Partition: p}, Offset: o})
	}
	g.assignErr = g.hooks.Assigned(context.Background(), starts)
	g.starts = starts
	for _, s := range starts {
		g.next[s.Partition] = max(s.Offset, 0)
	}
}

func (g *groupSource) revoke(ps ...int32) {
	tps := make([]stream.TopicPartition, 0, len(ps))
	for _, p := range ps {
		tps = append(tps, stream.TopicPartition{Topic: g.topic, Partition: p})
	}
	g.hooks.Revoked(context.Background(), tps)
	for _, p := range ps {
		if pos, ok := g.pos.Position(g.topic, p); ok {
			_ = g.store.Save(context.Background(), g.topic, p, pos)
		}
		delete(g.next, p)
	}
}

func (g *groupSource) Read(ctx context.Context) ([]stream.Element[groupRec], error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if op := g.ops[g.reads]; op != nil {
		op(g)
	}
	g.reads++
	if g.assignErr != nil {
		return nil, g.assignErr
	}
	var out []stream.Element[groupRec]
	ps := make([]int32, 0, len(g.next))
	for p := range g.next {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		if g.reads <= g.silent[p] {
			continue
		}
		o := g.next[p]
		for n := 0; n < g.batch && o < int64(len(g.parts[p])); n, o = n+1, o+1 {
			r := g.parts[p][o]
			r.part, r.off = p, o
			out = append(out, stream.Element[groupRec]{Value: r, Topic: g.topic, Partition: p, Offset: o, Timestamp: r.ts})
		}
		g.next[p] = o
	}
	if len(out) == 0 && len(g.ops) <= g.reads && g.reads > maxSilent(g.silent) {
		if _, pending := g.ops[g.reads]; !pending {
			return nil, io.EOF
		}
	}
	return out, nil
}

// groupData makes records of keys spread over partitions by key (so a key
// follows the partitioning), event times rising by 1 s with a disorder of
// up to 3 s, and a last record per partition an hour later that closes
// every window.
func groupData(parts, perPart, keys int) map[int32][]groupRec {
	out := make(map[int32][]groupRec)
	for p := range int32(parts) {
		for i := range perPart {
			k := fmt.Sprintf("k%d", (i*7+int(p))%keys*parts+int(p))
			ts := int64(1_700_000_000_000) + int64(i)*1000 - int64((i*37)%4)*1000
			out[p] = append(out[p], groupRec{key: k, ts: ts})
		}
		out[p] = append(out[p], groupRec{key: "end", ts: 1_700_000_000_000 + int64(perPart)*1000 + 3_600_000})
	}
	return out
}

// expectedCounts counts the records per (key, 10 s window), the sentinel
// records' windows left out.
func expectedCounts(parts map[int32][]groupRec) map[string]int64 {
	want := make(map[string]int64)
	for _, recs := range parts {
		for _, r := range recs {
			if r.key != "end" {
				want[fmt.Sprintf("%s@%d", r.key, r.ts-r.ts%10_000)]++
			}
		}
	}
	return want
}

type resultLog struct {
	mu  sync.Mutex
	got map[string][]int64
}

func (l *resultLog) add(r stream.WindowResult[string, int64]) {
	if r.Key == "end" || !r.Final {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fmt.Sprintf("%s@%d", r.Key, r.Start.UnixMilli())
	l.got[k] = append(l.got[k], r.Value)
}

func runGroup(t *testing.T, g *groupSource, log *resultLog) {
	t.Helper()
	k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(g.store, stream.CheckpointEachBatch()), func(r groupRec) string { return r.key }).FollowsPartitioning()
	err := stream.Window(k, stream.Tumbling(10*time.Second), stream.Count[groupRec](), stream.OutOfOrderness(5*time.Second)).
		Tap(func(_ context.Context, r stream.WindowResult[string, int64]) error { log.add(r); return nil }).
		Run(context.Background())
	require.NoError(t, err)
}

func checkCounts(t *testing.T, want map[string]int64, log *resultLog) {
	t.Helper()
	for k, n := range want {
		got, ok := log.got[k]
		require.True(t, ok, "window %s never emitted", k)
		for _, g := range got {
			require.Equal(t, n, g, "window %s emitted with a wrong count (all its results: %v)", k, got)
		}
	}
	for k := range log.got {
		_, ok := want[k]
		require.True(t, ok, "window %s emitted but has no records", k)
	}
}

func TestWindowStateFollowsARevokedPartitionToTheNextOwner(t *testing.T) {
	data := groupData(2, 400, 10)
	store := checkpoint.NewMemoryStore()
	log := &resultLog{got: make(map[string][]int64)}
	// Member A owns both partitions, reads part of them and gives up
	// partition 1 at its 6th read; member B then takes partition 1 over,
	// from A's commit, with A's state.
	a := &groupSource{topic: "events", parts: data, store: store, batch: 25, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0, 1) }, 6: func(g *groupSource) { g.revoke(1) }}}
	runGroup(t, a, log)
	pos, ok, _ := store.Load(context.Background(), "events", 1)
	require.True(t, ok)
	require.Less(t, pos.Offset, int64(len(data[1])), "A gave partition 1 up before its end")
	require.Greater(t, pos.Offset, int64(50), "A had worked on partition 1")

	b := &groupSource{topic: "events", parts: data, store: store, batch: 25, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(1) }}}
	runGroup(t, b, log)
	checkCounts(t, expectedCounts(data), log)
}

func TestPartitionStateOlderThanTheCommitIsReadFromItsOwnOffset(t *testing.T) {
	data := groupData(1, 300, 5)
	store := checkpoint.NewMemoryStore()
	log := &resultLog{got: make(map[string][]int64)}
	a := &groupSource{topic: "events", parts: data, store: store, batch: 20, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }, 5: func(g *groupSource) { g.revoke(0) }}}
	runGroup(t, a, log)
	pos, ok, _ := store.Load(context.Background(), "events", 0)
	require.True(t, ok)
	// The group's commit moves on without the state (a member whose
	// state save failed, or another consumer of the group).
	require.NoError(t, store.Save(context.Background(), "events", 0, checkpoint.At(pos.Offset+40)))

	b := &groupSource{topic: "events", parts: data, store: store, batch: 20, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }}}
	runGroup(t, b, log)
	require.Equal(t, pos.Offset, b.starts[0].Offset, "Assigned lowered the start to the state's own offset")
	checkCounts(t, expectedCounts(data), log)
}

func TestAggregateStateIsSavedAsChangesPerPartition(t *testing.T) {
	data := groupData(2, 50, 4)
	store := checkpoint.NewMemoryStore()
	g := &groupSource{topic: "events", parts: data, store: store, batch: 10, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0, 1) }}}
	k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(store), func(r groupRec) string { return r.key }).FollowsPartitioning()
	require.NoError(t, stream.Aggregate(k, stream.Count[groupRec]()).Run(context.Background()))
	for p := range int32(2) {
		counts := make(map[string]int)
		metas := 0
		require.NoError(t, store.RestoreChanges(context.Background(), stream.StageAggregate, "events", p, func(key, value []byte) error {
			if len(key) == 1 && key[0] == 0 {
				metas++
				return nil
			}
			counts[string(key[1:])]++
			return nil
		}))
		require.Equal(t, 1, metas, "partition %d has its marks", p)
		want := make(map[string]int)
		for _, r := range data[p] {
			want[r.key] = 1
		}
		require.Equal(t, want, counts, "partition %d's changelog holds exactly the keys of its records", p)
	}
}

// TestNoRecordOfARevokedPartitionStartsOnceItsRevocationBegan ensures that
// with Parallel(8) and KeyOrdered(8) the records of a revoked partition
// queued in the stage are dropped, not handed to the handler, once
// Revoked has returned, and that the position committed at the revoke is
// not past a record that was not handled.
func TestNoRecordOfARevokedPartitionStartsOnceItsRevocationBegan(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  stream.StageOption
	}{{"Parallel(8)", stream.Parallel(8)}, {"KeyOrdered(8)", stream.KeyOrdered(8, func(r groupRec) string { return r.key })}} {
		t.Run(tc.name, func(t *testing.T) {
			data := groupData(2, 400, 64)
			store := checkpoint.NewMemoryStore()
			var (
				mu       sync.Mutex
				returned bool
				late     []int64 // offsets of partition 1 started after the revocation began
				handled  = map[int64]bool{}
				blocked  = make(chan struct{}, 1000)
				gate     = make(chan struct{})
			)
			g := &groupSource{topic: "events", parts: data, store: store, batch: 3, next: map[int32]int64{},
				ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0, 1) }}}
			done := make(chan error, 1)
			go func() {
				done <- stream.From[groupRec](g).Checkpointing(store).
					Tap(func(ctx context.Context, r groupRec) error {
						mu.Lock()
						if r.part == 1 {
							if returned {
								late = append(late, r.off)
							}
							handled[r.off] = true
						}
						mu.Unlock()
						blocked <- struct{}{}
						<-gate
						return nil
					}, tc.opt).
					Run(context.Background())
			}()
			for range 8 { // every worker holds a record: the rest wait in the queues
				<-blocked
			}
			// Every worker is blocked: mark partition 1 revoked now, so
			// that each of its records that starts from here on is one
			// the revocation should have dropped.
			g.mu.Lock()
			stream.MarkRevoked(g.hooks, stream.TopicPartition{Topic: "events", Partition: 1})
			g.mu.Unlock()
			mu.Lock()
			returned = true
			mu.Unlock()
			revoked := make(chan struct{})
			go func() {
				g.mu.Lock()
				g.revoke(1)
				g.mu.Unlock()
				close(revoked)
			}()
			close(gate)
			<-revoked
			require.NoError(t, <-done)
			mu.Lock()
			defer mu.Unlock()
			require.Empty(t, late, "records of the revoked partition started after the revocation began")
			pos, ok, _ := store.Load(context.Background(), "events", 1)
			require.True(t, ok, "the revoke committed partition 1")
			require.Less(t, len(handled), len(data[1]), "records of partition 1 queued at the revoke were dropped")
			for o := range pos.Offset {
				require.True(t, handled[o], "offset %d is below the committed position %d but was never handled", o, pos.Offset)
			}
		})
	}
}

func TestRunRefusesAKeyNotKnownToFollowTheGroupSourcesPartitioning(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 10, 2), store: checkpoint.NewMemoryStore(), batch: 10, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }}}
	k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(g.store), func(r groupRec) string { return r.key })
	err := stream.Aggregate(k, stream.Count[groupRec](), stream.Name("per-key")).Run(context.Background())
	require.ErrorIs(t, err, stream.ErrKeyNotPartitioned)
	require.ErrorContains(t, err, `"per-key"`)
	require.ErrorContains(t, err, "stream.Repartition")
	require.ErrorContains(t, err, "FollowsPartitioning")
}

func maxSilent(m map[int32]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

// TestASilentAssignedPartitionsRecordsAreNeverLate ensures that records of
// a partition assigned but silent while another partition's event times
// run an hour ahead are not late: on a consumer-group source each
// partition's windows follow its own watermark.
func TestASilentAssignedPartitionsRecordsAreNeverLate(t *testing.T) {
	data := groupData(2, 200, 6)
	for i := range data[0] {
		data[0][i].ts += 3_600_000 // partition 0 runs an hour ahead
	}
	store := checkpoint.NewMemoryStore()
	log := &resultLog{got: make(map[string][]int64)}
	g := &groupSource{topic: "events", parts: data, store: store, batch: 50, next: map[int32]int64{},
		silent: map[int32]int{1: 8}, // partition 1 delivers once partition 0 is all read
		ops:    map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0, 1) }}}
	runGroup(t, g, log) // the default late policy fails Run on a late record
	checkCounts(t, expectedCounts(data), log)
}

// TestAChangeNoMarksClosedIsUndoneAtRestoreAndWrittenAgain ensures that
// changes saved after a partition's last marks (a save a crash cut short)
// are not applied by a restore, and that the keys they touched are saved
// again, so that they do not stay the last change of their key.
func TestAChangeNoMarksClosedIsUndoneAtRestoreAndWrittenAgain(t *testing.T) {
	data := groupData(1, 40, 4)
	store := checkpoint.NewMemoryStore()
	count := func(g *groupSource) map[string]int64 {
		last := map[string]int64{}
		k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(store), func(r groupRec) string { return r.key }).FollowsPartitioning()
		err := stream.Aggregate(k, stream.Count[groupRec]()).
			Tap(func(_ context.Context, kv stream.KV[string, int64]) error { last[kv.Key] = kv.Value; return nil }).
			Run(context.Background())
		require.NoError(t, err)
		return last
	}
	newMember := func() *groupSource {
		return &groupSource{topic: "events", parts: data, store: store, batch: 10, next: map[int32]int64{},
			ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }}}
	}
	first := count(newMember())
	key := data[0][0].key
	want := first[key]
	require.Positive(t, want)
	// A save cut short: the key's new value reached the changelog, the
	// marks that would close it did not.
	torn := checkpoint.Change{Stage: stream.StageAggregate, Topic: "events", Partition: 0,
		Key: append([]byte{1}, key...), Value: binary.AppendVarint(nil, 999)}
	require.NoError(t, store.SaveChanges(context.Background(), []checkpoint.Change{torn}))

	data[0] = append(data[0], groupRec{key: key, ts: data[0][len(data[0])-1].ts})
	second := count(newMember())
	require.Equal(t, map[string]int64{key: want + 1}, second, "the torn change is not applied")

	var saved []byte
	require.NoError(t, store.RestoreChanges(context.Background(), stream.StageAggregate, "events", 0, func(k, v []byte) error {
		if string(k) == string(torn.Key) {
			saved = append([]byte(nil), v...)
		}
		return nil
	}))
	got, _ := binary.Varint(saved)
	require.Equal(t, want+1, got, "the key's last change is written again")
}

// TestAStatefulStageOnAGroupWithoutAChangelogIsRefusedEvenWithoutCheckpointing
// ensures Run refuses a consumer group's stateful pipeline that has no
// store for its state at all: the group commits positions at its
// rebalances anyway, and the next owner would start there with empty
// windows, its counts silently too low.
func TestAStatefulStageOnAGroupWithoutAChangelogIsRefusedEvenWithoutCheckpointing(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 10, 2), store: checkpoint.NewMemoryStore(), batch: 10, next: map[int32]int64{}}
	k := stream.KeyBy(stream.From[groupRec](g), func(r groupRec) string { return r.key }).FollowsPartitioning()
	err := stream.Window(k, stream.Tumbling(time.Minute), stream.Count[groupRec]()).Run(context.Background())
	require.ErrorIs(t, err, stream.ErrNoStateStore)
	require.ErrorContains(t, err, "Checkpointing(src)")
}

// TestAStatefulStageAfterAWindowOnAGroupIsRefused ensures that on a
// consumer group a stateful stage fed by a Window's results, which belong
// to no source partition, is refused instead of keeping a state that no
// partition saves and a rebalance loses.
func TestAStatefulStageAfterAWindowOnAGroupIsRefused(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 10, 2), store: checkpoint.NewMemoryStore(), batch: 10, next: map[int32]int64{}}
	k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(g.store), func(r groupRec) string { return r.key }).FollowsPartitioning()
	perMinute := stream.Window(k, stream.Tumbling(time.Minute), stream.Count[groupRec](), stream.Name("per-minute"))
	busiest := stream.KeyBy(perMinute, func(r stream.WindowResult[string, int64]) string { return r.Key }).FollowsPartitioning()
	err := stream.Reduce(busiest, func(a, b stream.WindowResult[string, int64]) stream.WindowResult[string, int64] {
		if b.Value > a.Value {
			return b
		}
		return a
	}, stream.Name("busiest")).Run(context.Background())
	require.ErrorIs(t, err, stream.ErrNotPerPartition)
	require.ErrorContains(t, err, `"busiest"`)
	require.ErrorContains(t, err, `"per-minute"`)
}

func TestRunRefusesATableJoinedWithAConsumerGroupSource(t *testing.T) {
	g := &groupSource{topic: "events", parts: groupData(1, 10, 2), store: checkpoint.NewMemoryStore(), batch: 10, next: map[int32]int64{},
		ops: map[int]func(*groupSource){0: func(g *groupSource) { g.assign(0) }}}
	k := stream.KeyBy(stream.From[groupRec](g).Checkpointing(g.store), func(r groupRec) string { return r.key }).FollowsPartitioning()
	tbl := stream.ToTable(stream.KeyBy(stream.From(streamtest.Slice([]string{"a"}, streamtest.OnTopic("users"))), func(s string) string { return s }),
		stream.Name("users"))
	err := stream.JoinTable(k, tbl, func(r groupRec, _ string) groupRec { return r }).Run(context.Background())
	require.ErrorIs(t, err, stream.ErrNotPerPartition)
	require.ErrorContains(t, err, `table "users"`)
}
