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
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/sink"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// foreignMember is a consumer group member that is not a strom source: a
// plain franz-go client offering the balancers another client offers by
// default, standing in for a member of that client. It commits what it
// handled after every poll, as a client committing synchronously does, and
// before its partitions are revoked.
type foreignMember struct {
	cl      *kgo.Client
	handled *handledSet
	cancel  context.CancelFunc
	done    chan struct{}

	mu  sync.Mutex
	err error // the first error a poll returned (a refused join among them)
}

func startForeignMember(t *testing.T, brokers []string, group, topic string, balancers ...kgo.GroupBalancer) *foreignMember {
	t.Helper()
	m := &foreignMember{handled: newHandledSet(), done: make(chan struct{})}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(balancers...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, _ map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
		}),
	)
	require.NoError(t, err)
	m.cl = cl
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				cl.AllowRebalance()
				return
			}
			fs.EachError(func(topic string, p int32, err error) {
				m.fail(fmt.Errorf("poll of %s/%d: %w", topic, p, err))
			})
			fs.EachRecord(func(r *kgo.Record) {
				m.handled.add(log.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: r.Value})
			})
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				m.fail(fmt.Errorf("commit: %w", err))
			}
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(func() { m.stop(t) })
	return m
}

func (m *foreignMember) fail(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
	}
}

func (m *foreignMember) firstErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// stop ends the poll loop, commits what was handled and leaves the group
// (Close revokes, which commits too).
func (m *foreignMember) stop(t *testing.T) {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	assert.NoError(t, m.cl.CommitUncommittedOffsets(ctx), "the foreign member's last commit")
	m.cl.Close()
}

// waitUntil calls cond on the test's goroutine (so it may use require)
// every 20ms until it holds, failing t after kafkaWait.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(kafkaWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", kafkaWait, what)
		}
		<-tick.C
	}
}

// groupView is what describing a group shows: its state, protocol, and the
// number of partitions assigned to each member.
type groupView struct {
	state, protocol string
	assigned        []int
}

func describeGroup(t *testing.T, brokers []string, group string) groupView {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	gs, err := kadm.NewClient(cl).DescribeGroups(ctx, group)
	require.NoError(t, err)
	g := gs[group]
	if errors.Is(g.Err, kerr.GroupIDNotFound) {
		return groupView{state: "Dead"} // no member joined yet
	}
	require.NoError(t, g.Err)
	v := groupView{state: g.State, protocol: g.Protocol}
	for _, m := range g.Members {
		n := 0
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, tp := range c.Topics {
				n += len(tp.Partitions)
			}
		}
		v.assigned = append(v.assigned, n)
	}
	return v
}

// settled reports whether the group is stable with members members, each
// holding at least one of the partitions and all of them assigned.
func (v groupView) settled(members, partitions int) bool {
	if v.state != "Stable" || len(v.assigned) != members {
		return false
	}
	sum := 0
	for _, n := range v.assigned {
		if n == 0 {
			return false
		}
		sum += n
	}
	return sum == partitions
}

// testMixedGroup runs a strom source.Kafka member (default balancers) and
// a foreign member offering balancers in one group and checks that every
// record is handled by exactly one of them, that the commits of both are
// honoured, and that a restart handles nothing again. It returns the
// protocol the group ran while both were members.
func testMixedGroup(t *testing.T, group string, balancers ...kgo.GroupBalancer) string {
	const topic, parts, perPhase = "mixed", 4, 25
	brokers := startKafka(t, parts, topic)
	all := func() []int32 { return []int32{0, 1, 2, 3} }
	committedTo := func(want int64) func() bool {
		return func() bool {
			c, err := fetchCommitted(brokers, group, topic)
			if err != nil || len(c) != parts {
				return false
			}
			for _, o := range c {
				if o != want {
					return false
				}
			}
			return true
		}
	}

	// Phase 1: the strom member alone reads and commits the first records.
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	aHandled := newHandledSet()
	srcA := newKafkaSource(t, brokers, group, []string{topic}, source.KafkaMaxRecords(10))
	doneA := runAsync(ctxA, stream.From[log.Record](srcA).Tap(func(_ context.Context, r log.Record) error {
		aHandled.add(r)
		return nil
	}).Checkpointing(srcA, stream.CheckpointEachBatch()))
	produceN(t, brokers, topic, perPhase, all()...)
	waitUntil(t, "the strom member committing every record of phase 1", committedTo(perPhase))

	// Phase 2: the foreign member joins; once the group settled with both,
	// more records, each read by the one member that owns its partition.
	b := startForeignMember(t, brokers, group, topic, balancers...)
	var joined groupView
	waitUntil(t, "the group settling with both members", func() bool {
		require.NoError(t, b.firstErr(), "the foreign member failed")
		joined = describeGroup(t, brokers, group)
		return joined.settled(2, parts) && srcA.Stats().Revoked > 0
	})
	produceN(t, brokers, topic, perPhase, all()...)
	waitUntil(t, "every record handled and committed by the two members", func() bool {
		require.NoError(t, b.firstErr(), "the foreign member failed")
		return aHandled.distinct()+b.handled.distinct() >= 2*parts*perPhase && committedTo(2*perPhase)()
	})

	// Phase 3: the foreign member leaves; the strom member takes its
	// partitions over at their commits, then stops.
	b.stop(t)
	waitUntil(t, "the strom member holding every partition", func() bool {
		return describeGroup(t, brokers, group).settled(1, parts)
	})
	cancelA()
	require.NoError(t, waitRun(t, doneA))

	assert.NotZero(t, b.handled.distinct(), "the foreign member took part")
	for k := range b.handled.recs {
		_, both := aHandled.recs[k]
		assert.False(t, both, "partition %d offset %d handled by both members", k[0], k[1])
	}
	assert.Equal(t, aHandled.distinct(), aHandled.n, "the strom member handled a record twice")
	assert.Equal(t, b.handled.distinct(), b.handled.n, "the foreign member handled a record twice")
	assert.Equal(t, 2*parts*perPhase, aHandled.distinct()+b.handled.distinct(), "every record handled once")
	assert.Equal(t, map[int32]int64{0: 2 * perPhase, 1: 2 * perPhase, 2: 2 * perPhase, 3: 2 * perPhase},
		committed(t, brokers, group, topic), "the commits cover every record, the foreign member's not moved back")

	// A restart handles nothing again: the first record it sees in each
	// partition is the one produced after it started.
	ctxC, cancelC := context.WithCancel(context.Background())
	defer cancelC()
	cHandled := newHandledSet()
	srcC := newKafkaSource(t, brokers, group, []string{topic})
	doneC := runAsync(ctxC, stream.From[log.Record](srcC).Tap(func(_ context.Context, r log.Record) error {
		cHandled.add(r)
		if cHandled.distinct() == parts {
			cancelC()
		}
		return nil
	}).Checkpointing(srcC))
	produceN(t, brokers, topic, 1, all()...)
	require.NoError(t, waitRun(t, doneC))
	for k := range cHandled.recs {
		assert.Equal(t, int64(2*perPhase), k[1], "partition %d: the restart handled offset %d again", k[0], k[1])
	}
	t.Logf("protocol with both members: %s; strom member handled %d, foreign %d; %+v", joined.protocol,
		aHandled.distinct(), b.handled.distinct(), srcA.Stats())
	return joined.protocol
}

// TestKafkaGroupSharedWithALibrdkafkaDefaultMemberRunsRangeAndHandlesEachRecordOnce
// ensures a strom member with the default balancers shares a group with a
// member offering librdkafka's default (range, roundrobin), which
// franz-go's default (cooperative-sticky alone) refuses with
// INCONSISTENT_GROUP_PROTOCOL: the group runs range, eagerly (the strom
// member, alone on cooperative-sticky before, is downgraded), every record
// is handled by exactly one member, the commits of both stand, and a
// restart handles nothing again.
func TestKafkaGroupSharedWithALibrdkafkaDefaultMemberRunsRangeAndHandlesEachRecordOnce(t *testing.T) {
	protocol := testMixedGroup(t, "g-librdkafka", kgo.RangeBalancer(), kgo.RoundRobinBalancer())
	assert.Equal(t, source.BalancerRange, protocol)
}

// TestKafkaGroupSharedWithAJavaDefaultMemberHandlesEachRecordOnce ensures
// the same with a member offering the Java client's default since Kafka
// 3.0 (range, cooperative-sticky). Each member votes for its first
// choice, so the group runs range or cooperative-sticky (the broker breaks
// the tie): either way, every record is handled by exactly one member.
func TestKafkaGroupSharedWithAJavaDefaultMemberHandlesEachRecordOnce(t *testing.T) {
	protocol := testMixedGroup(t, "g-java", kgo.RangeBalancer(), kgo.CooperativeStickyBalancer())
	assert.Contains(t, []string{source.BalancerRange, source.BalancerCooperativeSticky}, protocol)
}

// TestKafkaBalancersOfferedAreTheOnesNamed ensures KafkaBalancers sets the
// protocols the source offers, in order: a source offering roundrobin
// alone and a member offering range and roundrobin run roundrobin.
func TestKafkaBalancersOfferedAreTheOnesNamed(t *testing.T) {
	brokers := startKafka(t, 2, "rr")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := newKafkaSource(t, brokers, "g-rr", []string{"rr"}, source.KafkaBalancers(source.BalancerRoundRobin))
	done := runAsync(ctx, stream.From[log.Record](src).Tap(func(context.Context, log.Record) error { return nil }).Checkpointing(src))
	b := startForeignMember(t, brokers, "g-rr", "rr", kgo.RangeBalancer(), kgo.RoundRobinBalancer())
	var v groupView
	waitUntil(t, "the group settling with both members", func() bool {
		require.NoError(t, b.firstErr(), "the foreign member failed")
		v = describeGroup(t, brokers, "g-rr")
		return v.settled(2, 2)
	})
	assert.Equal(t, source.BalancerRoundRobin, v.protocol)
	cancel()
	require.NoError(t, waitRun(t, done))
}

// TestKafkaBalancersRejectsUnknownAndRepeatedNames ensures a balancer name
// the source does not know, or one given twice, is an error naming it.
func TestKafkaBalancersRejectsUnknownAndRepeatedNames(t *testing.T) {
	_, err := source.Kafka([]string{"x:1"}, "g", []string{"t"}, source.KafkaBalancers("range", "round-robin"))
	require.ErrorContains(t, err, `balancer "round-robin"`)
	require.ErrorContains(t, err, "roundrobin")
	_, err = source.Kafka([]string{"x:1"}, "g", []string{"t"}, source.KafkaBalancers("range", "range"))
	require.ErrorContains(t, err, `balancer "range" given twice`)
	for _, names := range [][]string{nil, {"sticky"}, {"cooperative-sticky", "range", "roundrobin", "sticky"}} {
		_, err = source.Kafka([]string{"x:1"}, "g", []string{"t"}, source.KafkaBalancers(names...))
		require.NoError(t, err, "%v", names)
	}
}

// TestKafkaWindowStateFollowsItsPartitionsThroughAnEagerRebalance ensures
// that window state follows its partitions when the group runs range, an
// eager protocol: A counts half the input alone, B joins (every partition
// is revoked from A, which saves the state of each, and assigned again:
// some to B, which restores theirs, the rest back to A, which restores its
// own), the rest of the input follows, and each window's count is
// written exactly once (stream.ExactlyOnce), as by one uninterrupted run.
func TestKafkaWindowStateFollowsItsPartitionsThroughAnEagerRebalance(t *testing.T) {
	brokers := startKafka(t, 4, "in", "out")
	const n, keys = 400, 12
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := keyedRecords("in", n, keys, base)
	for k := range keys { // closers: a window past the last record
		recs = append(recs, &kgo.Record{Topic: "in", Key: fmt.Appendf(nil, "k%d", k), Value: []byte("close"),
			Timestamp: base.Add(time.Hour)})
	}
	want := expectedCounts(recs[:n])
	produceKeyed(t, brokers, recs[:n/2])

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := func(name string) (*source.KafkaSource, <-chan error) {
		src := newKafkaSource(t, brokers, "g-eager-state", []string{"in"},
			source.KafkaBalancers(source.BalancerRange), source.KafkaTransactionalID("eager-state-"+name))
		out, err := sink.Kafka(brokers, "out")
		require.NoError(t, err)
		t.Cleanup(func() { _ = out.Close() })
		return src, runAsync(ctx, windowCounts(src, out, stream.ExactlyOnce()))
	}
	sum := func() int64 {
		c, err := fetchCommitted(brokers, "g-eager-state", "in")
		if err != nil {
			return -1
		}
		var s int64
		for _, o := range c {
			s += o
		}
		return s
	}
	a, doneA := member("a")
	waitUntil(t, "A committing records of the first half", func() bool { return sum() > 0 })
	b, doneB := member("b")
	var v groupView
	waitUntil(t, "the group settling with both members", func() bool {
		v = describeGroup(t, brokers, "g-eager-state")
		return v.settled(2, 4) && a.Stats().Revoked > 0
	})
	assert.Equal(t, source.BalancerRange, v.protocol)
	produceKeyed(t, brokers, recs[n/2:])
	waitUntil(t, "every record committed", func() bool { return sum() == int64(len(recs)) })
	cancel()
	require.NoError(t, waitRun(t, doneA))
	require.NoError(t, waitRun(t, doneB))
	requireExactlyOnce(t, brokers, want)
	assert.Positive(t, b.Stats().Transactions, "B took part")
	t.Logf("A: %+v, B: %+v", a.Stats(), b.Stats())
}
