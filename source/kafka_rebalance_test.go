package source_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/checkpoint"
	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// hookEvent is one call of a hookRecorder's hooks.
type hookEvent struct {
	kind   string // "assigned", "revoked" or "lost"
	starts []stream.PartitionStart
	parts  []stream.TopicPartition
}

// hookRecorder is a stream.RebalanceHooks that records its calls, in
// order, and runs the test's functions (when set) inside them.
type hookRecorder struct {
	mu       sync.Mutex
	events   []hookEvent
	assigned func(ctx context.Context, starts []stream.PartitionStart) error
	revoked  func(ctx context.Context, parts []stream.TopicPartition)
}

func (h *hookRecorder) Assigned(ctx context.Context, starts []stream.PartitionStart) error {
	h.mu.Lock()
	h.events = append(h.events, hookEvent{kind: "assigned", starts: append([]stream.PartitionStart(nil), starts...)})
	fn := h.assigned
	h.mu.Unlock()
	if fn != nil {
		return fn(ctx, starts)
	}
	return nil
}

func (h *hookRecorder) Revoked(ctx context.Context, parts []stream.TopicPartition) {
	h.mu.Lock()
	h.events = append(h.events, hookEvent{kind: "revoked", parts: append([]stream.TopicPartition(nil), parts...)})
	fn := h.revoked
	h.mu.Unlock()
	if fn != nil {
		fn(ctx, parts)
	}
}

func (h *hookRecorder) Lost(parts []stream.TopicPartition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, hookEvent{kind: "lost", parts: append([]stream.TopicPartition(nil), parts...)})
}

// calls returns the events of kind, in order.
func (h *hookRecorder) calls(kind string) []hookEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookEvent
	for _, e := range h.events {
		if e.kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// kinds returns the kinds of every event, in order.
func (h *hookRecorder) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.events))
	for i, e := range h.events {
		out[i] = e.kind
	}
	return out
}

// setPositions is a stream.Positions the test sets.
type setPositions struct {
	mu sync.Mutex
	m  map[stream.TopicPartition]int64
}

func (p *setPositions) set(topic string, partition int32, offset int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[stream.TopicPartition]int64{}
	}
	p.m[stream.TopicPartition{Topic: topic, Partition: partition}] = offset
}

func (p *setPositions) Position(topic string, partition int32) (checkpoint.Position, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o, ok := p.m[stream.TopicPartition{Topic: topic, Partition: partition}]
	return checkpoint.Position{Offset: o, Epoch: checkpoint.NoEpoch}, ok
}

// commitGroup commits offsets (partition to offset) of topic for group as
// an admin, as an earlier member would have.
func commitGroup(t *testing.T, brokers []string, group, topic string, offsets map[int32]int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	var os kadm.Offsets
	for p, at := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
	}
	resp, err := kadm.NewClient(cl).CommitOffsets(ctx, group, os)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
}

// produceN produces n records to each of topic's partitions ps.
func produceN(t *testing.T, brokers []string, topic string, n int, ps ...int32) {
	t.Helper()
	var recs []*kgo.Record
	for _, p := range ps {
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "p%d-%d", p, i)})
		}
	}
	produce(t, brokers, recs)
}

// readUntil calls Read until done says the records so far are enough.
func readUntil(t *testing.T, src *source.KafkaSource, done func([]stream.Element[log.Record]) bool) []stream.Element[log.Record] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	var got []stream.Element[log.Record]
	for !done(got) {
		elems, err := src.Read(ctx)
		require.NoError(t, err)
		got = append(got, elems...)
	}
	return got
}

// firstOffsets returns, per partition, the lowest offset among elems.
func firstOffsets(elems []stream.Element[log.Record]) map[int32]int64 {
	out := map[int32]int64{}
	for _, e := range elems {
		if o, ok := out[e.Partition]; !ok || e.Offset < o {
			out[e.Partition] = e.Offset
		}
	}
	return out
}

func tp(topic string, p int32) stream.TopicPartition {
	return stream.TopicPartition{Topic: topic, Partition: p}
}

// TestKafkaAssignedHookRunsBeforeAnyRecordWithTheGroupsCommit ensures the
// Assigned hook is called with every newly assigned partition and the
// group's commit as its Offset (-1 for a partition the group never
// committed), and that Read returns no record of them until it returned:
// the hook blocks, and a Read waiting meanwhile returns nothing.
func TestKafkaAssignedHookRunsBeforeAnyRecordWithTheGroupsCommit(t *testing.T) {
	brokers := startKafka(t, 2, "assign")
	produceN(t, brokers, "assign", 10, 0, 1)
	commitGroup(t, brokers, "g-assign", "assign", map[int32]int64{0: 4})

	src := newKafkaSource(t, brokers, "g-assign", []string{"assign"})
	entered, release := make(chan struct{}), make(chan struct{})
	rec := &hookRecorder{assigned: func(ctx context.Context, _ []stream.PartitionStart) error {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	src.SetRebalanceHooks(rec)

	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	type result struct {
		elems []stream.Element[log.Record]
		err   error
	}
	first := make(chan result, 1)
	go func() {
		elems, err := src.Read(ctx) // opens the source: joins the group
		first <- result{elems, err}
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("Assigned was never called")
	}
	// A negative check needs a bound: records of this partition come
	// back from kfake in milliseconds once fetchable.
	select {
	case r := <-first:
		t.Fatalf("Read returned %d records (err %v) while Assigned had not returned", len(r.elems), r.err)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	r := <-first
	require.NoError(t, r.err)
	require.NotEmpty(t, r.elems)

	got := append(r.elems, readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 16-len(r.elems) })...)
	assert.Len(t, got, 16, "6 records of partition 0 past its commit, 10 of partition 1")
	assert.Equal(t, map[int32]int64{0: 4, 1: 0}, firstOffsets(got), "each partition starts at the group's commit")
	calls := rec.calls("assigned")
	require.Len(t, calls, 1)
	assert.Equal(t, []stream.PartitionStart{{TopicPartition: tp("assign", 0), Offset: 4}, {TopicPartition: tp("assign", 1), Offset: -1}},
		calls[0].starts, "the group's commit, -1 where there is none, sorted")
}

// TestKafkaAssignedHookLoweringAStartRereadsFromThere ensures a start the
// Assigned hook lowers (the partition's state reflects an offset below the
// group's commit) is where the partition's records start, and that saves
// from there on are committed, not dropped as below the group's commit.
func TestKafkaAssignedHookLoweringAStartRereadsFromThere(t *testing.T) {
	brokers := startKafka(t, 2, "lower")
	produceN(t, brokers, "lower", 10, 0, 1)
	commitGroup(t, brokers, "g-lower", "lower", map[int32]int64{0: 6, 1: 3})

	src := newKafkaSource(t, brokers, "g-lower", []string{"lower"})
	src.SetRebalanceHooks(&hookRecorder{assigned: func(_ context.Context, starts []stream.PartitionStart) error {
		for i := range starts {
			if starts[i].Partition == 0 {
				starts[i].Offset = 2 // the state saved at 2 is all there is
			}
		}
		return nil
	}})
	got := readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 8+7 })
	assert.Len(t, got, 15)
	assert.Equal(t, map[int32]int64{0: 2, 1: 3}, firstOffsets(got), "partition 0 from the hook's 2, partition 1 from the commit")

	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, src.Save(ctx, "lower", 0, checkpoint.Position{Offset: 4, Epoch: checkpoint.NoEpoch}))
	assert.Equal(t, int64(4), committed(t, brokers, "g-lower", "lower")[0],
		"a save past the lowered start is committed, although below the group's earlier commit: the commit follows the state")
	require.NoError(t, src.Save(ctx, "lower", 0, checkpoint.Position{Offset: 2, Epoch: checkpoint.NoEpoch}))
	assert.Equal(t, int64(4), committed(t, brokers, "g-lower", "lower")[0], "a save below this member's commit is not")
}

// TestKafkaAssignedErrorComesFromReadAndThePartitionsComeBackWhole ensures
// an Assigned that fails makes Read return a *KafkaError naming the group
// and the partitions and wrapping the hook's error, reports the partitions
// Lost (their state is not whole), and skips nothing: the group session
// ends, the member rejoins, Assigned is called again and every record is
// read from the group's commit.
func TestKafkaAssignedErrorComesFromReadAndThePartitionsComeBackWhole(t *testing.T) {
	brokers := startKafka(t, 1, "fails")
	produceN(t, brokers, "fails", 10, 0)
	commitGroup(t, brokers, "g-fails", "fails", map[int32]int64{0: 3})

	src := newKafkaSource(t, brokers, "g-fails", []string{"fails"})
	boom := errors.New("changelog unreadable")
	var once sync.Once
	rec := &hookRecorder{}
	rec.assigned = func(context.Context, []stream.PartitionStart) error {
		var err error
		once.Do(func() { err = boom })
		return err
	}
	src.SetRebalanceHooks(rec)

	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	elems, err := src.Read(ctx)
	require.Error(t, err)
	assert.Empty(t, elems)
	assert.ErrorIs(t, err, boom)
	ke, ok := err.(*source.KafkaError)
	require.True(t, ok, "a *KafkaError: %T", err)
	assert.Equal(t, "g-fails", ke.Group)
	assert.Contains(t, err.Error(), "fails/0")

	got := readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 7 })
	assert.Len(t, got, 7, "the error is returned once, then every record past the commit")
	assert.Equal(t, map[int32]int64{0: 3}, firstOffsets(got))
	assert.Equal(t, []string{"assigned", "lost", "assigned"}, rec.kinds())
	assert.Equal(t, []stream.TopicPartition{tp("fails", 0)}, rec.calls("lost")[0].parts)
}

// TestKafkaRevokedHookRunsBeforeTheCommitAndThePositionsAfterItAreCommitted
// ensures that when a second member joins and partitions move to it, the
// first member's Revoked hook is called for them, within the rebalance
// timeout, before the group's commit of them changes, and that what is
// committed is the position the pipeline gives after the hook (the records
// the hook let finish), not before.
func TestKafkaRevokedHookRunsBeforeTheCommitAndThePositionsAfterItAreCommitted(t *testing.T) {
	brokers := startKafka(t, 2, "moves")
	produceN(t, brokers, "moves", 10, 0, 1)

	a := newKafkaSource(t, brokers, "g-moves", []string{"moves"})
	pos := &setPositions{}
	a.SetPositions(pos)
	type seen struct {
		commits  map[int32]int64
		deadline time.Duration
	}
	inHook := make(chan seen, 1)
	rec := &hookRecorder{revoked: func(ctx context.Context, parts []stream.TopicPartition) {
		c, err := fetchCommitted(brokers, "g-moves", "moves")
		assert.NoError(t, err)
		dl, ok := ctx.Deadline()
		assert.True(t, ok, "Revoked's context has a deadline")
		select {
		case inHook <- seen{c, time.Until(dl)}:
		default: // a later call: at Close
		}
		for _, p := range parts {
			pos.set(p.Topic, p.Partition, 7) // records up to 7 finished during the hook
		}
	}}
	a.SetRebalanceHooks(rec)
	got := readUntil(t, a, func(got []stream.Element[log.Record]) bool { return len(got) >= 20 })
	require.Len(t, got, 20)
	pos.set("moves", 0, 5)
	pos.set("moves", 1, 5) // what had finished before the rebalance

	b := newKafkaSource(t, brokers, "g-moves", []string{"moves"})
	bctx, bcancel := context.WithCancel(context.Background())
	bdone := make(chan error, 1)
	go func() { _, err := b.Read(bctx); bdone <- err }() // joins the group
	t.Cleanup(func() { bcancel(); <-bdone })

	var s seen
	select {
	case s = <-inHook:
	case <-time.After(kafkaWait):
		t.Fatal("Revoked was never called")
	}
	assert.Empty(t, s.commits, "nothing committed when the hook ran")
	assert.InDelta(t, float64(20*time.Second), float64(s.deadline), float64(5*time.Second), "bounded by the rebalance timeout the client was given (20s)")
	revoked := rec.calls("revoked")[0].parts
	require.Len(t, revoked, 1, "one of the two partitions moves to the new member")
	eventually(t, "the revoked partition committed", func() bool {
		c, err := fetchCommitted(brokers, "g-moves", "moves")
		return err == nil && len(c) > 0
	})
	assert.Equal(t, map[int32]int64{revoked[0].Partition: 7}, committed(t, brokers, "g-moves", "moves"),
		"the position given after the hook is committed, and only the revoked partition's")
	eventually(t, "the partition counted revoked (after its commit)", func() bool { return a.Stats().Revoked == 1 })
}

// TestKafkaCloseCallsRevokedWhichMaySaveWithoutDeadlock ensures closing
// the source (leaving the group) calls Revoked for every partition before
// committing, without holding the source's lock: the hook saves through
// the source, and Close then commits the positions given after the hook.
func TestKafkaCloseCallsRevokedWhichMaySaveWithoutDeadlock(t *testing.T) {
	brokers := startKafka(t, 2, "closes")
	produceN(t, brokers, "closes", 10, 0, 1)

	src := newKafkaSource(t, brokers, "g-closes", []string{"closes"})
	pos := &setPositions{}
	src.SetPositions(pos)
	rec := &hookRecorder{}
	savedInHook := make(chan map[int32]int64, 1)
	rec.revoked = func(ctx context.Context, parts []stream.TopicPartition) {
		assert.NoError(t, src.Save(ctx, "closes", 0, checkpoint.Position{Offset: 3, Epoch: checkpoint.NoEpoch}))
		c, err := fetchCommitted(brokers, "g-closes", "closes")
		assert.NoError(t, err)
		savedInHook <- c
		for _, p := range parts {
			pos.set(p.Topic, p.Partition, 8)
		}
	}
	src.SetRebalanceHooks(rec)
	readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 20 })

	closed := make(chan error, 1)
	go func() { closed <- src.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(kafkaWait):
		t.Fatal("Close did not return: deadlocked with the hook")
	}
	calls := rec.calls("revoked")
	require.Len(t, calls, 1)
	assert.Equal(t, []stream.TopicPartition{tp("closes", 0), tp("closes", 1)}, calls[0].parts)
	assert.Empty(t, <-savedInHook, "a save during a revocation returns at once, dropped: kgo would hold its commit until the rebalance ends, which waits for the hook")
	assert.Equal(t, map[int32]int64{0: 8, 1: 8}, committed(t, brokers, "g-closes", "closes"), "the revocation commits the positions given after the hook")
	assert.Equal(t, int64(1), src.Stats().DroppedSaves)
	assert.Empty(t, rec.calls("lost"))
}

// TestKafkaSessionExpiryCallsLostAndCommitsNothing ensures a member whose
// session expires (its heartbeats held at the broker past the session
// timeout, as on a stalled machine: the group expels it) has the Lost
// hook called for its partitions, never Revoked, and commits nothing for
// them.
func TestKafkaSessionExpiryCallsLostAndCommitsNothing(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "expires"),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	produceN(t, brokers, "expires", 10, 0)

	src := newKafkaSource(t, brokers, "g-expires", []string{"expires"},
		source.KafkaClientOpts(kgo.SessionTimeout(time.Second), kgo.RebalanceTimeout(2*time.Second)))
	pos := &setPositions{}
	src.SetPositions(pos)
	rec := &hookRecorder{}
	src.SetRebalanceHooks(rec)
	readUntil(t, src, func(got []stream.Element[log.Record]) bool { return len(got) >= 10 })
	pos.set("expires", 0, 10)

	release := make(chan struct{})
	var held sync.Once
	c.ControlKey(kmsg.Heartbeat.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		held.Do(func() { c.SleepControl(func() { <-release }) })
		return nil, nil, false // then the broker answers it: the member is gone
	})
	adm, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer adm.Close()
	eventually(t, "the group expelling the member", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
		defer cancel()
		d, err := kadm.NewClient(adm).DescribeGroups(ctx, "g-expires")
		return err == nil && d["g-expires"].Err == nil && len(d["g-expires"].Members) == 0
	})
	close(release)
	eventually(t, "Lost called", func() bool { return len(rec.calls("lost")) > 0 })
	assert.Equal(t, []stream.TopicPartition{tp("expires", 0)}, rec.calls("lost")[0].parts)
	assert.Empty(t, rec.calls("revoked"))
	assert.Equal(t, int64(1), src.Stats().Lost)
	assert.Empty(t, committed(t, brokers, "g-expires", "expires"), "nothing committed for a lost partition")
}
