package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/strom-dev/strom/checkpoint"
)

// begin registers offsets with no epoch and requires all of them taken.
func begin(t *testing.T, p *checkpoint.PartitionTracker, offsets ...int64) {
	t.Helper()
	epochs := make([]int32, len(offsets))
	for i := range epochs {
		epochs[i] = checkpoint.NoEpoch
	}
	require.Equal(t, len(offsets), p.TryBegin(offsets, epochs), "TryBegin(%v)", offsets)
}

func tryBegin(p *checkpoint.PartitionTracker, offsets ...int64) int {
	return p.TryBegin(offsets, make([]int32, len(offsets)))
}

func position(t *testing.T, p *checkpoint.PartitionTracker) int64 {
	t.Helper()
	pos, ok := p.Position()
	require.True(t, ok, "no position yet")
	return pos.Offset
}

// waitRoom runs WaitRoom on a goroutine and returns the channel its result
// arrives on.
func waitRoom(ctx context.Context, p *checkpoint.PartitionTracker, offset int64) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- p.WaitRoom(ctx, offset) }()
	return ch
}

func requireBlocked(t *testing.T, ch <-chan error) {
	t.Helper()
	select {
	case err := <-ch:
		require.Failf(t, "WaitRoom returned early", "err %v", err)
	default:
	}
}

func requireReturns(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		require.FailNow(t, "WaitRoom did not return within 10s")
	}
	return nil
}

// TestTrackerOutOfOrderDoneAdvancesOverFinishedPrefixOnly ensures records
// finishing in any order move the position only over the finished prefix.
func TestTrackerOutOfOrderDoneAdvancesOverFinishedPrefixOnly(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	begin(t, p, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9)
	p.Done(0)
	assert.Equal(t, int64(1), position(t, p))
	p.Done(9, 3, 7, 2)
	assert.Equal(t, int64(1), position(t, p), "1 is unfinished")
	p.Done(1)
	assert.Equal(t, int64(4), position(t, p), "over 1, 2, 3; 4 is unfinished")
	p.Done(5, 6, 4)
	assert.Equal(t, int64(8), position(t, p))
	assert.Equal(t, 2, p.InFlight(), "8 and 9 lie at or above the position")
	p.Done(8)
	assert.Equal(t, int64(10), position(t, p))
	assert.Equal(t, 0, p.InFlight())
}

// TestTrackerGapsCountAsFinished ensures offsets never begun (a compacted
// log, transaction markers) do not hold the position back.
func TestTrackerGapsCountAsFinished(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	begin(t, p, 0, 5, 6, 20)
	p.Done(0)
	assert.Equal(t, int64(5), position(t, p), "1..4 never begun")
	p.Done(6, 5)
	assert.Equal(t, int64(20), position(t, p), "7..19 never begun")
	p.Done(20)
	assert.Equal(t, int64(21), position(t, p))
}

// TestTrackerGapWiderThanBoundDoesNotBlock ensures a gap wider than the
// tracker's bound (a compacted topic can skip millions of offsets) is
// crossed once the records before it finished, instead of waiting forever
// for room that can never come.
func TestTrackerGapWiderThanBoundDoesNotBlock(t *testing.T) {
	p := checkpoint.NewTracker(8).Partition("t", 0)
	begin(t, p, 0, 1)
	assert.Equal(t, 0, tryBegin(p, 1000), "1000 is past the bound while 0 is in flight")
	ch := waitRoom(t.Context(), p, 1000)
	p.Done(1)
	requireBlocked(t, ch)
	p.Done(0)
	require.NoError(t, requireReturns(t, ch))
	begin(t, p, 1000, 1001)
	assert.Equal(t, int64(1000), position(t, p), "the gap counts as finished, 1000 does not")
	p.Done(1000, 1001)
	assert.Equal(t, int64(1002), position(t, p))

	// And the very first offset begun may be anywhere.
	q := checkpoint.NewTracker(8).Partition("t", 1)
	begin(t, q, 1_000_000)
	_, ok := q.Position()
	assert.False(t, ok)
	q.Done(1_000_000)
	assert.Equal(t, int64(1_000_001), position(t, q))
}

// TestTrackerSplitNeedsEveryPart ensures a record split into three is
// finished by the third Done only.
func TestTrackerSplitNeedsEveryPart(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	begin(t, p, 0, 1, 2)
	p.Split(0, 3)
	p.Done(1, 2)
	p.Done(0)
	_, ok := p.Position()
	assert.False(t, ok, "two parts of 0 are unfinished")
	p.Done(0)
	_, ok = p.Position()
	assert.False(t, ok, "one part of 0 is unfinished")
	p.Done(0)
	assert.Equal(t, int64(3), position(t, p))
	assert.Panics(t, func() { p.Done(0) }, "a fourth Done is a bookkeeping bug")
}

// TestTrackerSplitIntoNoneFinishes ensures Split(off, 0) (a flat-map that
// emitted nothing) finishes the record.
func TestTrackerSplitIntoNoneFinishes(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	begin(t, p, 0, 1, 2)
	p.Split(1, 0)
	p.Done(2)
	_, ok := p.Position()
	assert.False(t, ok)
	p.Done(0)
	assert.Equal(t, int64(3), position(t, p))

	q := checkpoint.NewTracker(0).Partition("t", 1)
	begin(t, q, 7)
	q.Split(7, 0)
	assert.Equal(t, int64(8), position(t, q), "Split at the base advances")
}

// TestTrackerTryBeginStopsAtTheBoundAndWaitRoomUnblocks ensures back-pressure:
// a prefix is registered at the bound, and WaitRoom returns once the
// position advanced.
func TestTrackerTryBeginStopsAtTheBoundAndWaitRoomUnblocks(t *testing.T) {
	p := checkpoint.NewTracker(4).Partition("t", 0)
	assert.Equal(t, 4, tryBegin(p, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9))
	assert.Equal(t, 0, tryBegin(p, 4, 5))
	assert.Equal(t, 4*8, p.MemoryBytes(), "a bound of 4 holds 4 slots of 8 bytes")
	ch := waitRoom(t.Context(), p, 4)
	p.Done(1, 2, 3)
	requireBlocked(t, ch) // 0 still holds the position
	p.Done(0)
	require.NoError(t, requireReturns(t, ch))
	assert.Equal(t, 4, tryBegin(p, 4, 5, 6, 7, 8))
	assert.Equal(t, int64(4), position(t, p))
}

// TestTrackerWaitRoomReturnsContextError ensures a blocked WaitRoom ends
// with ctx's error when ctx is cancelled.
func TestTrackerWaitRoomReturnsContextError(t *testing.T) {
	p := checkpoint.NewTracker(2).Partition("t", 0)
	begin(t, p, 0, 1)
	ctx, cancel := context.WithCancel(t.Context())
	ch := waitRoom(ctx, p, 2)
	requireBlocked(t, ch)
	cancel()
	require.ErrorIs(t, requireReturns(t, ch), context.Canceled)
}

// TestTrackerStepBackWaitsForInFlightThenRestarts ensures an offset below
// one begun (the log was truncated under the source) registers nothing
// until every record in flight finished, then starts over there.
func TestTrackerStepBackWaitsForInFlightThenRestarts(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	begin(t, p, 0, 1, 2, 3, 4)
	p.Done(0, 1, 2)
	assert.Equal(t, 0, tryBegin(p, 2, 3))
	ch := waitRoom(t.Context(), p, 2)
	p.Done(4)
	requireBlocked(t, ch)
	assert.Equal(t, int64(3), position(t, p))
	p.Done(3)
	require.NoError(t, requireReturns(t, ch))
	begin(t, p, 2, 3)
	assert.Equal(t, int64(2), position(t, p), "restarted at 2, which is in flight")
	p.Done(2)
	assert.Equal(t, int64(3), position(t, p))
}

// TestTrackerDoneOfOffsetNotInFlightPanics ensures bookkeeping bugs panic
// instead of moving a position past unfinished work.
func TestTrackerDoneOfOffsetNotInFlightPanics(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	assert.Panics(t, func() { p.Done(0) }, "nothing begun")
	begin(t, p, 3, 4)
	assert.Panics(t, func() { p.Done(5) }, "above the highest begun")
	assert.Panics(t, func() { p.Done(2) }, "below the first begun")
	assert.Panics(t, func() { p.Split(9, 2) })
	p.Done(3)
	assert.Panics(t, func() { p.Done(3) }, "already finished and passed")
	p.Done(4)
	assert.Equal(t, int64(5), position(t, p))
}

// TestTrackerPositionNotOkUntilSomethingFinished ensures a partition whose
// first record has not finished reports no position.
func TestTrackerPositionNotOkUntilSomethingFinished(t *testing.T) {
	tr := checkpoint.NewTracker(0)
	p := tr.Partition("t", 3)
	_, ok := p.Position()
	assert.False(t, ok, "nothing begun")
	begin(t, p, 5, 6, 7)
	_, ok = p.Position()
	assert.False(t, ok, "nothing finished")
	p.Done(6)
	_, ok = p.Position()
	assert.False(t, ok, "5 is unfinished")
	p.Done(5)
	pos, ok := p.Position()
	require.True(t, ok)
	assert.Equal(t, checkpoint.At(7), pos)
	assert.Same(t, p, tr.Partition("t", 3))
	assert.Len(t, tr.Partitions(nil), 1)
}

// BenchmarkTrackerMemory measures what a million records in flight cost.
func BenchmarkTrackerMemory(b *testing.B) {
	const n = 1_000_000
	offs := make([]int64, 1024)
	epochs := make([]int32, 1024)
	var bytes int
	for b.Loop() {
		p := checkpoint.NewTracker(1<<20).Partition("t", 0)
		for base := int64(0); base < n; base += int64(len(offs)) {
			k := min(len(offs), int(n-base))
			for i := range k {
				offs[i] = base + int64(i)
			}
			if got := p.TryBegin(offs[:k], epochs[:k]); got != k {
				b.Fatalf("TryBegin took %d of %d at %d", got, k, base)
			}
		}
		if p.InFlight() != n {
			b.Fatalf("in flight %d", p.InFlight())
		}
		bytes = p.MemoryBytes()
	}
	b.ReportMetric(float64(bytes)/n, "bytes/in-flight-record")
	b.ReportMetric(float64(bytes)/(1<<20), "MiB")
}

// BenchmarkTrackerBeginDone measures one record begun and finished, with a
// few in flight, as a sequential pipeline does.
func BenchmarkTrackerBeginDone(b *testing.B) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	offs := []int64{0}
	epochs := []int32{0}
	for i := range int64(64) {
		offs[0] = i
		p.TryBegin(offs, epochs)
	}
	next := int64(64)
	b.ReportAllocs()
	for b.Loop() {
		offs[0] = next
		if p.TryBegin(offs, epochs) != 1 {
			b.Fatal("full")
		}
		p.Done(next - 64)
		next++
	}
}

// TestTrackerProgressReportsLowestUnfinishedAndRecordsBegun ensures
// Progress gives the position before any record finished (where reading
// began), the lowest unfinished offset after, and counts every record
// begun, a record read again included.
func TestTrackerProgressReportsLowestUnfinishedAndRecordsBegun(t *testing.T) {
	p := checkpoint.NewTracker(0).Partition("t", 0)
	_, _, ok := p.Progress()
	assert.False(t, ok, "nothing begun")
	begin(t, p, 10, 11, 12)
	low, begun, ok := p.Progress()
	require.True(t, ok)
	assert.Equal(t, int64(10), low)
	assert.Equal(t, int64(3), begun)
	_, moved := p.Position()
	assert.False(t, moved, "Position says nothing before a record finished; Progress does")
	p.Done(11, 10)
	low, _, _ = p.Progress()
	assert.Equal(t, int64(12), low)
	p.Done(12)
	begin(t, p, 12) // read again after a step back
	low, begun, _ = p.Progress()
	assert.Equal(t, int64(12), low)
	assert.Equal(t, int64(4), begun)
}

func TestRevokedTrackerNeverPassesAnAbandonedRecordAndSettlesWhenTheRestFinish(t *testing.T) {
	tr := checkpoint.NewTracker(0)
	pt := tr.Partition("events", 0)
	require.Equal(t, 5, pt.TryBegin([]int64{10, 11, 12, 13, 14}, []int32{0, 0, 0, 0, 0}))
	pt.Done(10)
	pt.Revoke()
	require.True(t, pt.Revoked())
	pt.Abandon(12, 14)
	pt.Abandon(12) // twice: nothing more

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, pt.WaitSettled(ctx), context.Canceled, "11 and 13 are still running")

	settled := make(chan error, 1)
	go func() { settled <- pt.WaitSettled(context.Background()) }()
	pt.Done(13, 11)
	require.NoError(t, <-settled)
	pos, ok := pt.Position()
	require.True(t, ok)
	require.Equal(t, int64(12), pos.Offset, "the first abandoned record is where the next owner starts")
	pt.Done(12) // a completion after the abandon does not move the position past it
	pos, _ = pt.Position()
	require.Equal(t, int64(12), pos.Offset)
	require.NoError(t, pt.WaitRoom(context.Background(), 1<<40), "a revoked tracker never makes the source wait")
}

func TestReplaceStartsAPartitionAfreshWhileTheOldTrackerStaysRevoked(t *testing.T) {
	tr := checkpoint.NewTracker(0)
	old := tr.Partition("events", 3)
	require.Equal(t, 2, old.TryBegin([]int64{100, 101}, []int32{0, 0}))
	old.Revoke()
	fresh := tr.Replace("events", 3)
	require.NotSame(t, old, fresh)
	require.Same(t, fresh, tr.Partition("events", 3))
	require.False(t, fresh.Revoked())
	require.Equal(t, 1, fresh.TryBegin([]int64{50}, []int32{0}), "the new assignment starts at the group's commit, below the old records")
	require.Len(t, tr.Partitions(nil), 1)
	old.Done(100, 101) // the old assignment's records may still finish
}
