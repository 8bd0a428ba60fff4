package source_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strom-dev/strom/log"
	"github.com/strom-dev/strom/source"
	"github.com/strom-dev/strom/stream"
)

// kafkaWait bounds every wait of the Kafka tests: generous, since a loaded
// 2-core machine may take seconds for a rebalance; a passing run takes far
// less.
const kafkaWait = 60 * time.Second

// startKafka starts an in-process cluster with topics of partitions
// partitions each, closed when the test ends.
func startKafka(t *testing.T, partitions int32, topics ...string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, topics...),
		kfake.GroupMinSessionTimeout(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// testKafkaOpts are client timings for tests: rebalances are noticed
// within a heartbeat of 100ms, an empty fetch returns within 200ms.
func testKafkaOpts() source.KafkaOption {
	return source.KafkaClientOpts(
		kgo.HeartbeatInterval(100*time.Millisecond),
		kgo.SessionTimeout(10*time.Second),
		kgo.RebalanceTimeout(20*time.Second),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
}

func newKafkaSource(t *testing.T, brokers []string, group string, topics []string, opts ...source.KafkaOption) *source.KafkaSource {
	t.Helper()
	src, err := source.Kafka(brokers, group, topics, append([]source.KafkaOption{testKafkaOpts()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = src.Close() })
	return src
}

// produce writes recs synchronously and returns them with partition and
// offset set. A record's Partition is kept (manual partitioner).
func produce(t *testing.T, brokers []string, recs []*kgo.Record) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	return recs
}

// committed returns the group's committed offsets of topic, by partition.
func committed(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	out, err := fetchCommitted(brokers, group, topic)
	require.NoError(t, err)
	return out
}

// fetchCommitted is committed for goroutines other than the test's.
func fetchCommitted(brokers []string, group, topic string) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[int32]int64{}, nil // nothing committed yet
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topic] {
		if o.Err != nil {
			return nil, o.Err
		}
		out[p] = o.At
	}
	return out, nil
}

// eventually waits until cond holds, checking every 20ms, failing t after
// kafkaWait.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, kafkaWait, 20*time.Millisecond, "timed out waiting for %s", what)
}

// handledSet records what a pipeline handled, by partition and offset.
type handledSet struct {
	mu   sync.Mutex
	recs map[[2]int64]log.Record
	n    int // handled, duplicates included
}

func newHandledSet() *handledSet { return &handledSet{recs: map[[2]int64]log.Record{}} }

func (h *handledSet) add(r log.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs[[2]int64{int64(r.Partition), r.Offset}] = r
	h.n++
}

func (h *handledSet) distinct() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.recs)
}

func (h *handledSet) has(p int32, off int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.recs[[2]int64{int64(p), off}]
	return ok
}

// runAsync runs s and returns a channel with Run's result.
func runAsync[T any](ctx context.Context, s *stream.Stream[T]) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(kafkaWait):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestKafkaEveryRecordHandledWithKeysHeadersAndTimestampsAndCommittedToTheEnd(t *testing.T) {
	brokers := startKafka(t, 3, "orders")
	const n = 1000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic:     "orders",
			Partition: int32(i % 3),
			Key:       fmt.Appendf(nil, "k%d", i),
			Value:     fmt.Appendf(nil, "v%d", i),
			Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
			Headers:   []kgo.RecordHeader{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "src", Value: []byte("test")}},
		}
	}
	produce(t, brokers, recs)
	ends := map[int32]int64{}
	for _, r := range recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}

	src := newKafkaSource(t, brokers, "g-all", []string{"orders"})
	got := newHandledSet()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(ctx, stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
		got.add(r)
		if got.distinct() == n {
			cancel()
		}
		return nil
	}).Checkpointing(src))
	require.NoError(t, waitRun(t, done))

	require.Equal(t, n, got.distinct())
	for i, want := range recs {
		r, ok := got.recs[[2]int64{int64(want.Partition), want.Offset}]
		require.True(t, ok, "record %d not handled", i)
		assert.Equal(t, want.Key, r.Key)
		assert.Equal(t, want.Value, r.Value)
		assert.Equal(t, want.Timestamp.UnixMilli(), r.Timestamp)
		assert.Equal(t, "orders", r.Topic)
		assert.Equal(t, []log.Header{{Key: "i", Value: fmt.Appendf(nil, "%d", i)}, {Key: "src", Value: []byte("test")}}, r.Headers)
	}
	assert.Equal(t, ends, committed(t, brokers, "g-all", "orders"), "the group's commits are each partition's end")
	assert.Zero(t, src.Stats().DroppedRecords)
}

func TestKafkaNoCommitPassesABlockedRecordUnderParallel(t *testing.T) {
	brokers := startKafka(t, 1, "slow")
	const n, k = 20, 5
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "slow", Value: fmt.Appendf(nil, "v%d", i)}
	}
	produce(t, brokers, recs)

	src := newKafkaSource(t, brokers, "g-block", []string{"slow"})
	got := newHandledSet()
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := stream.From[log.Record](src).Tap(func(ctx context.Context, r log.Record) error {
		if r.Offset == k {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		got.add(r)
		return nil
	}, stream.Parallel(4)).Checkpointing(src)
	done := runAsync(ctx, s)

	eventually(t, "every record but the blocked one handled", func() bool { return got.distinct() == n-1 })
	require.NoError(t, s.Checkpoint(ctx))
	require.NoError(t, s.Checkpoint(ctx))
	assert.Equal(t, map[int32]int64{0: k}, committed(t, brokers, "g-block", "slow"),
		"the commit stops at the blocked record: everything below it handled, nothing past it committed")

	close(release)
	eventually(t, "the commit reaching the end", func() bool {
		if err := s.Checkpoint(ctx); err != nil {
			return false
		}
		return committed(t, brokers, "g-block", "slow")[0] == n
	})
	cancel()
	require.NoError(t, waitRun(t, done))
}

func TestKafkaHandlerFailingOnTheThirdOfFiveCommitsTwo(t *testing.T) {
	brokers := startKafka(t, 1, "five")
	recs := make([]*kgo.Record, 5)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "five", Value: fmt.Appendf(nil, "v%d", i)}
	}
	produce(t, brokers, recs)

	// One record per Read: a stage failure leaves its whole batch
	// unfinished (as with the log source), so with one batch of five
	// nothing would be committed at all, which proves less.
	src := newKafkaSource(t, brokers, "g-fail", []string{"five"}, source.KafkaMaxRecords(1))
	boom := errors.New("boom")
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	err := stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
		if r.Offset == 2 {
			return boom
		}
		return nil
	}).Checkpointing(src).Run(ctx)
	require.ErrorIs(t, err, boom)
	var re *stream.RecordError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, int64(2), re.Offset)
	assert.Equal(t, map[int32]int64{0: 2}, committed(t, brokers, "g-fail", "five"), "the commit is 2, not 5")
}

// TestKafkaCommitRefusedForAStaleMembershipIsDroppedNotAFailure ensures a
// commit the coordinator refuses because this member's place in the group
// is stale (its session expired while it could not heartbeat, on a loaded
// machine or with a slow broker: UNKNOWN_MEMBER_ID; or a rebalance) drops
// that save, and the pipeline goes on and commits the end, where it used to
// fail Run (and exit the relay built on it); and that any other refusal
// still fails the save. The broker refuses the first commit with the code.
func TestKafkaCommitRefusedForAStaleMembershipIsDroppedNotAFailure(t *testing.T) {
	for _, tc := range []struct {
		refusal *kerr.Error
		fails   bool
	}{
		{kerr.UnknownMemberID, false},
		{kerr.RebalanceInProgress, false},
		{kerr.GroupAuthorizationFailed, true},
	} {
		t.Run(tc.refusal.Message, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "commits"))
			require.NoError(t, err)
			t.Cleanup(c.Close)
			brokers := c.ListenAddrs()
			const n = 20
			recs := make([]*kgo.Record, n)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "commits", Value: fmt.Appendf(nil, "v%d", i)}
			}
			produce(t, brokers, recs)
			refused := make(chan struct{}, 1)
			c.ControlKey(kmsg.OffsetCommit.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				req := kreq.(*kmsg.OffsetCommitRequest)
				resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewOffsetCommitResponseTopic()
					st.Topic, st.TopicID = rt.Topic, rt.TopicID
					for _, rp := range rt.Partitions {
						sp := kmsg.NewOffsetCommitResponseTopicPartition()
						sp.Partition, sp.ErrorCode = rp.Partition, tc.refusal.Code
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				refused <- struct{}{}
				return resp, nil, true
			})

			src := newKafkaSource(t, brokers, "g-stale", []string{"commits"}, source.KafkaMaxRecords(5))
			got := newHandledSet()
			ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
			defer cancel()
			err = stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
				got.add(r)
				if got.distinct() == n {
					cancel()
				}
				return nil
			}).Checkpointing(src, stream.CheckpointEachBatch()).Run(ctx)
			require.Len(t, refused, 1, "the broker refused a commit")
			if tc.fails {
				require.ErrorIs(t, err, tc.refusal)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, map[int32]int64{0: n}, committed(t, brokers, "g-stale", "commits"))
			assert.Positive(t, src.Stats().DroppedSaves)
		})
	}
}

func TestKafkaRebalanceEveryRecordHandledAndNoCommitPastAnUnfinishedRecord(t *testing.T) {
	testRebalanceInvariant(t)
}

// TestKafkaEagerRebalanceEveryRecordHandledAndNoCommitPastAnUnfinishedRecord
// ensures the same when the group runs range, an eager protocol (as with a
// member of librdkafka's defaults): every rebalance revokes every
// partition of A, those it keeps included, with a record unfinished.
func TestKafkaEagerRebalanceEveryRecordHandledAndNoCommitPastAnUnfinishedRecord(t *testing.T) {
	testRebalanceInvariant(t, source.KafkaBalancers(source.BalancerRange))
}

// testRebalanceInvariant has a member B join while A holds a record of
// each partition unfinished, both with opts, and checks that every record
// is handled and that no commit passes a record not handled.
func testRebalanceInvariant(t *testing.T, opts ...source.KafkaOption) {
	brokers := startKafka(t, 4, "events")
	const n = 2000
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "events", Partition: int32(i % 4), Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)}
	}
	produce(t, brokers, recs)

	// handled is the union of both instances: a record is added before its
	// handler returns, so before it finishes and before any commit covers
	// it.
	handled := newHandledSet()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The invariant, checked while both run: every offset below a
	// partition's commit was handled.
	var violations []string
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		tick := time.NewTicker(10 * time.Millisecond) // a sample of the commits every 10ms
		defer tick.Stop()
		for ; ctx.Err() == nil; <-tick.C {
			commits, err := fetchCommitted(brokers, "g-reb", "events")
			if err != nil {
				violations = append(violations, "fetching commits: "+err.Error())
				return
			}
			for p, c := range commits {
				for off := int64(0); off < c; off++ {
					if !handled.has(p, off) {
						violations = append(violations, fmt.Sprintf("partition %d committed at %d, offset %d not handled", p, c, off))
						break
					}
				}
			}
		}
	}()

	aHandled, bHandled := newHandledSet(), newHandledSet()
	bStarted := make(chan struct{})
	aPer := map[int32]int{}
	held := false
	aHolds := make(chan struct{})
	srcA := newKafkaSource(t, brokers, "g-reb", []string{"events"}, append(opts, source.KafkaMaxRecords(50))...)
	doneA := runAsync(ctx, stream.From[log.Record](srcA).Tap(func(ctx context.Context, r log.Record) error {
		handled.add(r)
		aHandled.add(r)
		aPer[r.Partition]++
		if !held && len(aPer) == 4 {
			// Hold A mid-stream, with progress in every partition and this
			// record unfinished, until B has joined and handled something:
			// the partitions B takes over are revoked from A part-way.
			held = true
			close(aHolds)
			select {
			case <-bStarted:
			case <-ctx.Done():
			}
		}
		if handled.distinct() == n {
			cancel()
		}
		return nil
	}).Checkpointing(srcA, stream.CheckpointEachBatch()))

	select {
	case <-aHolds:
	case <-time.After(kafkaWait):
		t.Fatal("A never handled records of every partition")
	}
	srcB := newKafkaSource(t, brokers, "g-reb", []string{"events"}, append(opts, source.KafkaMaxRecords(50))...)
	var once sync.Once
	doneB := runAsync(ctx, stream.From[log.Record](srcB).Tap(func(_ context.Context, r log.Record) error {
		handled.add(r)
		bHandled.add(r)
		once.Do(func() { close(bStarted) })
		if handled.distinct() == n {
			cancel()
		}
		return nil
	}).Checkpointing(srcB, stream.CheckpointEachBatch()))

	require.NoError(t, waitRun(t, doneA))
	require.NoError(t, waitRun(t, doneB))
	<-watchDone

	assert.Equal(t, n, handled.distinct(), "every record handled at least once")
	assert.NotZero(t, bHandled.distinct(), "the second instance took part")
	assert.NotZero(t, srcA.Stats().Revoked, "A gave partitions up")
	assert.Empty(t, violations)
	for p, c := range committed(t, brokers, "g-reb", "events") {
		for off := int64(0); off < c; off++ {
			require.True(t, handled.has(p, off), "partition %d committed at %d, offset %d not handled", p, c, off)
		}
	}
	dup := 0
	for k := range bHandled.recs {
		if _, ok := aHandled.recs[k]; ok {
			dup++
		}
	}
	t.Logf("A: %+v, B: %+v, A handled %d, B %d, both %d", srcA.Stats(), srcB.Stats(), aHandled.distinct(), bHandled.distinct(), dup)
}

func TestKafkaRestartResumesFromTheCommit(t *testing.T) {
	brokers := startKafka(t, 2, "resume")
	const n = 200
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "resume", Partition: int32(i % 2), Value: fmt.Appendf(nil, "v%d", i)}
	}
	produce(t, brokers, recs)

	first := newHandledSet()
	ctx, cancel := context.WithCancel(context.Background())
	src := newKafkaSource(t, brokers, "g-resume", []string{"resume"}, source.KafkaMaxRecords(10))
	err := stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
		first.add(r)
		if first.distinct() >= n/2 {
			cancel()
		}
		return nil
	}).Checkpointing(src).Run(ctx)
	require.NoError(t, err)
	commits := committed(t, brokers, "g-resume", "resume")
	for p, c := range commits {
		for off := int64(0); off < c; off++ {
			require.True(t, first.has(p, off), "partition %d committed at %d past unhandled offset %d", p, c, off)
		}
	}

	// The second run, through ConsumeForever with the source as its store.
	second := newHandledSet()
	firstSeen := map[int32]int64{}
	var mu sync.Mutex
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	src2 := newKafkaSource(t, brokers, "g-resume", []string{"resume"}, source.KafkaMaxRecords(10))
	err = stream.ConsumeForever(ctx2, src2, src2, func(_ context.Context, r log.Record) error {
		mu.Lock()
		if _, ok := firstSeen[r.Partition]; !ok {
			firstSeen[r.Partition] = r.Offset
		}
		mu.Unlock()
		second.add(r)
		if n-first.distinct() <= second.distinct() && allHandled(first, second, recs) {
			cancel2()
		}
		return nil
	})
	require.NoError(t, err)
	for p := int32(0); p < 2; p++ {
		want, ok := commits[p]
		if !ok {
			want = 0
		}
		if want == int64(n/2) {
			continue // the partition was done in the first run
		}
		assert.Equal(t, want, firstSeen[p], "partition %d: the second run starts at the commit", p)
	}
	assert.True(t, allHandled(first, second, recs), "nothing skipped")
	assert.Equal(t, map[int32]int64{0: n / 2, 1: n / 2}, committed(t, brokers, "g-resume", "resume"))
}

func allHandled(a, b *handledSet, recs []*kgo.Record) bool {
	for _, r := range recs {
		if !a.has(r.Partition, r.Offset) && !b.has(r.Partition, r.Offset) {
			return false
		}
	}
	return true
}

func TestKafkaMissingTopicIsAnErrorNamingItWithinTheTimeout(t *testing.T) {
	brokers := startKafka(t, 1, "present")
	src := newKafkaSource(t, brokers, "g-missing", []string{"present", "absent"}, source.KafkaTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	_, err := src.Read(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the error came within the timeout, not at the test's deadline")
	var pe *source.PartitionError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "absent", pe.Topic)
	assert.ErrorIs(t, err, log.ErrUnknownTopic)
	assert.Contains(t, err.Error(), "absent")
	assert.NotErrorIs(t, err, stream.ErrPermanent, "retryable: the topic may be created later")
}

func TestKafkaUnreachableBrokerIsAnErrorNamingTheAddressWithinTheTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	src := newKafkaSource(t, []string{addr}, "g-gone", []string{"any"}, source.KafkaTimeout(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	_, err = src.Read(ctx)
	require.Error(t, err)
	require.NoError(t, ctx.Err(), "the error came within the timeout, not at the test's deadline")
	var ke *source.KafkaError
	require.ErrorAs(t, err, &ke)
	assert.Contains(t, err.Error(), addr)
	assert.NotErrorIs(t, err, stream.ErrPermanent)
}

// TestKafkaHighWatermarkOfAnEmptyPartitionIsZeroAndKnown ensures assigned
// partitions holding no record report (0, true) once their high watermark
// is known, although no fetch ever returns records (kgo hands out no fetch
// without records, so before it was known only when another partition's
// records came in the same fetch); and (0, false) before the source opened
// and for partitions it was not assigned.
func TestKafkaHighWatermarkOfAnEmptyPartitionIsZeroAndKnown(t *testing.T) {
	brokers := startKafka(t, 2, "empty")
	src := newKafkaSource(t, brokers, "g-empty", []string{"empty"})
	hwm, ok := src.HighWatermark("empty", 0)
	assert.False(t, ok, "unknown before the source opened")
	assert.Zero(t, hwm)

	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, stream.From[log.Record](src))
	// Stop the pipeline before newKafkaSource's cleanup closes src (even
	// when the test fails): Close must not run beside Read.
	t.Cleanup(func() { cancel(); assert.NoError(t, waitRun(t, done)) })
	eventually(t, "both partitions' high watermarks known to be 0", func() bool {
		h0, ok0 := src.HighWatermark("empty", 0)
		h1, ok1 := src.HighWatermark("empty", 1)
		return ok0 && h0 == 0 && ok1 && h1 == 0
	})
	_, ok = src.HighWatermark("empty", 2)
	assert.False(t, ok, "a partition the topic does not have")
	_, ok = src.HighWatermark("other", 0)
	assert.False(t, ok, "a topic the source does not read")
}

// TestKafkaHighWatermarkOfAPartitionReadFromItsEndIsKnown ensures a member
// that starts at the end of a partition (KafkaStart(Latest), as one
// resuming from a commit at the end does) knows its high watermark,
// although no fetch returns records of it.
func TestKafkaHighWatermarkOfAPartitionReadFromItsEndIsKnown(t *testing.T) {
	brokers := startKafka(t, 1, "tail")
	produce(t, brokers, []*kgo.Record{
		{Topic: "tail", Value: []byte("a")}, {Topic: "tail", Value: []byte("b")}, {Topic: "tail", Value: []byte("c")},
	})
	src := newKafkaSource(t, brokers, "g-tail", []string{"tail"}, source.KafkaStart(source.Latest))
	handled := newHandledSet()
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, stream.From[log.Record](src).Tap(func(_ context.Context, r log.Record) error {
		handled.add(r)
		return nil
	}))
	t.Cleanup(func() { cancel(); assert.NoError(t, waitRun(t, done)) }) // before src closes
	eventually(t, "the high watermark known to be 3", func() bool {
		hwm, ok := src.HighWatermark("tail", 0)
		return ok && hwm == 3
	})
	assert.Zero(t, handled.distinct(), "the member started at the end")
}

func TestKafkaReadReturnsContextErrorOnCancel(t *testing.T) {
	brokers := startKafka(t, 1, "quiet")
	src := newKafkaSource(t, brokers, "g-quiet", []string{"quiet"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := src.Read(ctx)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(kafkaWait):
		t.Fatal("Read did not return after cancel")
	}
}

// pollingCtx closes polling the first time someone waits on it: for a Read
// of a source already open, that is its client's PollRecords.
type pollingCtx struct {
	context.Context
	once    sync.Once
	polling chan struct{}
}

func (c *pollingCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.polling) })
	return c.Context.Done()
}

// TestKafkaCloseFromAnotherGoroutineFailsAWaitingReadWithoutAPanic ensures a
// Read waiting for records when another goroutine closes the source returns
// an error wrapping kgo.ErrClientClosed instead of dereferencing the client
// Close let go of. A test whose wait failed used to do just that: its
// cleanup closed the source under the still-running pipeline, and the nil
// dereference, raised again by Run on runAsync's goroutine, killed the test
// binary before the failure's own message was printed.
func TestKafkaCloseFromAnotherGoroutineFailsAWaitingReadWithoutAPanic(t *testing.T) {
	brokers := startKafka(t, 1, "closing")
	produce(t, brokers, []*kgo.Record{{Topic: "closing", Value: []byte("v")}})
	src := newKafkaSource(t, brokers, "g-closing", []string{"closing"})
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	elems, err := src.Read(ctx) // opens the source
	require.NoError(t, err)
	require.Len(t, elems, 1)

	pctx := &pollingCtx{Context: ctx, polling: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				errc <- fmt.Errorf("Read panicked: %v", v)
			}
		}()
		_, err := src.Read(pctx)
		errc <- err
	}()
	<-pctx.polling
	require.NoError(t, src.Close())
	select {
	case err = <-errc:
	case <-ctx.Done():
		t.Fatal("Read did not return after Close")
	}
	require.ErrorIs(t, err, kgo.ErrClientClosed)
	var ke *source.KafkaError
	assert.ErrorAs(t, err, &ke)
}

func TestKafkaRejectsBadArguments(t *testing.T) {
	for name, f := range map[string]func() error{
		"no brokers": func() error { _, err := source.Kafka(nil, "g", []string{"t"}); return err },
		"no group":   func() error { _, err := source.Kafka([]string{"x:1"}, "", []string{"t"}); return err },
		"no topics":  func() error { _, err := source.Kafka([]string{"x:1"}, "g", nil); return err },
		"bad topic":  func() error { _, err := source.Kafka([]string{"x:1"}, "g", []string{"a/b"}); return err },
		"start At": func() error {
			_, err := source.Kafka([]string{"x:1"}, "g", []string{"t"}, source.KafkaStart(source.At(3)))
			return err
		},
	} {
		assert.Error(t, f(), name)
	}
}
